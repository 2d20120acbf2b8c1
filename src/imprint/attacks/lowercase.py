"""Lowercase (Carlini et al. 2021): compare the loss of x with the loss of lower(x).

Score = -loss(x) / loss(lower(x)): a member's own casing is memorised, so its loss is small
relative to the lowercased text's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, mean_logp, register
from imprint.signals.needs import LOWER, Need, SignalSet


@register("lowercase")
@dataclass(frozen=True)
class Lowercase(Attack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    summary = "loss of x relative to the loss of lowercased x"
    paper = "Carlini et al. 2021, Extracting Training Data from Large Language Models"

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(variant=LOWER))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        ll = np.array([mean_logp(s.logp) for s in signals.get()])
        ll_lower = np.array([mean_logp(s.logp) for s in signals.get(Need(variant=LOWER))])
        return {self.name: -(ll / ll_lower)}
