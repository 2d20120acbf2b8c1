"""A local model at another softmax temperature: p_tau(v) proportional to exp(z_v / tau).

ACMIA (attacks/acmia.py) needs per-token statistics of the target's distribution at temperature
tau: log p_tau(x_t), E_{p_tau}[log p_tau] and Var_{p_tau}[log p_tau]. Those are exactly what the
log-prob pass reduces when the output head's logits are divided by tau, so this backend is the
target's own Hugging Face backend (same weights, tokenizer, start token, windows, batching and
chunked on-device reduction: no full-vocabulary logits on the host) with a scaled head and a
fingerprint of its own. Its passes go through the planner and the signal cache like any model's;
the cost is one forward pass per temperature (the hidden states are recomputed).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from imprint.backends.hf import HFLogprobBackend
from imprint.errors import ConfigError


class TemperedBackend(HFLogprobBackend):
    """``base`` with its logits divided by ``temperature`` (> 0) before the softmax."""

    def __init__(self, base: HFLogprobBackend, temperature: float) -> None:
        if not temperature > 0:
            raise ConfigError(f"a softmax temperature must be > 0, got {temperature}")
        # the base's loaded model and settings, shared rather than reloaded (no constructor run)
        self.__dict__.update(base.__dict__)
        self.temperature = float(temperature)
        self.name = f"{base.name}@t={temperature:g}"

    @property
    def fingerprint(self) -> str:
        # the base's, read per call: it follows the bf16 scoring variant (IMPRINT_NO_COMPILE)
        key = f"{super().fingerprint}|temperature={self.temperature!r}"
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return super().head(hidden) / self.temperature

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "temperature": self.temperature}


def tempered_replica(base: Any, temperature: float) -> TemperedBackend:
    """A worker's tempered backend: its own replica of the base model, built by ``base`` (a
    picklable factory of the target), with logits divided by ``temperature``."""
    return TemperedBackend(base.build(), temperature)
