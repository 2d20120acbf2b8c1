"""Min-K% Prob (Shi et al. 2024): mean log-probability of the k% least likely tokens.

Selects the ``max(1, floor(k * T))`` lowest log p(x_t | x_<t). ``sweep`` adds one column per extra
k, all from the same forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, check_fraction, lowest_fraction_mean, register
from imprint.signals.needs import Need, SignalSet


@register("min_k")
@dataclass(frozen=True)
class MinK(Attack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    k: float = 0.2
    sweep: tuple[float, ...] = ()

    summary = "mean log-prob of the k% least likely tokens (k=0.2; optional k sweep)"
    paper = "Shi et al. 2024, Detecting Pretraining Data from Large Language Models"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sweep", tuple(float(k) for k in self.sweep))
        for k in (self.k, *self.sweep):
            check_fraction("min_k k", k)

    def columns(self) -> tuple[str, ...]:
        return (self.name, *(f"{self.name}@{k:g}" for k in self.sweep))

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        stats = signals.get()
        out = {self.name: np.array([lowest_fraction_mean(s.logp, self.k) for s in stats])}
        for k in self.sweep:
            out[f"{self.name}@{k:g}"] = np.array([lowest_fraction_mean(s.logp, k) for s in stats])
        return out
