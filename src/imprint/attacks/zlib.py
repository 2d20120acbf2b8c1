"""Zlib (Carlini et al. 2021): calibrate the loss by the text's zlib compressed length.

``zlib``: mean token log-likelihood / zlib bytes (= -loss / zlib entropy, Carlini's ratio).
``zlib_char``: total log-likelihood / zlib bytes, i.e. model code length per character over
zlib's code length per character; independent of how many tokens the tokenizer makes.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, mean_logp, register
from imprint.signals.needs import Need, SignalSet


def zlib_bytes(text: str) -> int:
    """Length in bytes of the zlib-compressed UTF-8 text."""
    return len(zlib.compress(text.encode("utf-8")))


@register("zlib")
@dataclass(frozen=True)
class Zlib(Attack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    summary = "log-likelihood over zlib compressed length (token mean, and per character)"
    paper = "Carlini et al. 2021, Extracting Training Data from Large Language Models"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def columns(self) -> tuple[str, ...]:
        return ("zlib", "zlib_char")

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        sizes = np.array([zlib_bytes(t) for t in signals.texts], dtype=float)
        stats = signals.get()
        mean_ll = np.array([mean_logp(s.logp) for s in stats])
        total_ll = np.array([float(np.sum(s.logp)) for s in stats])
        return {"zlib": mean_ll / sizes, "zlib_char": total_ll / sizes}
