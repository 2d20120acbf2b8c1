"""Min-K%++ from a server's top-k candidates: an approximation, named as one.

Min-K%++ (Zhang et al. 2025, Sec. 3, Eq. 2) standardises log p(x_t) by the mean mu_t and variance
sigma_t^2 of log p over the whole vocabulary at step t. A served model gives only its top-k
candidates per position, so this attack takes mu_t and sigma_t^2 over those candidates, weighted
by their probabilities renormalised over the top-k
(:func:`imprint.backends.alignment.topk_moments`):
the tail is left out, which raises mu_t and shrinks sigma_t. Its column is ``min_k_pp_topk``,
never ``min_k_pp``. It runs only when named (``all`` leaves it out) and needs a backend that fills
the moments: ``--model openai-logprobs:M --api-base URL --model-arg topk_moments=true``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import RunContext, register
from imprint.attacks.min_k_pp import MinKPlusPlus
from imprint.errors import ConfigError
from imprint.signals.needs import SignalSet


@register("min_k_pp_topk")
@dataclass(frozen=True)
class MinKPlusPlusTopK(MinKPlusPlus):
    vocab_stats: ClassVar[bool] = False  # reads the backend's top-k moments, not the vocabulary
    summary = "APPROXIMATE Min-K%++: mean/std of log p over the server's top-k candidates only"
    deviations: ClassVar[tuple[str, ...]] = (
        "mu and sigma of Eq. 2 are taken over the server's top-k candidates (probabilities "
        "renormalised over them), not the whole vocabulary: an approximation of Min-K%++",
    )

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return "an approximation: runs only when named (min_k_pp_topk)"

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        stats = signals.get()
        if any(len(s) and np.isnan(s.mean_logp).all() for s in stats):
            raise ConfigError(
                "min_k_pp_topk needs top-k moments of log p, which the target's backend did not "
                "return; use --model openai-logprobs:MODEL --api-base URL --model-arg "
                "topk_moments=true (a server returning top-k candidates), or min_k_pp on a local "
                "model"
            )
        return super().score_signals(signals)
