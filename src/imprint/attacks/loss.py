"""LOSS (Yeom et al. 2018): members have lower loss. Score = mean log p(x_t | x_<t)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, mean_logp, register
from imprint.signals.needs import Need, SignalSet


@register("loss")
@dataclass(frozen=True)
class Loss(Attack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    summary = "mean token log-likelihood (minus the loss)"
    paper = "Yeom et al. 2018, Privacy Risk in Machine Learning"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {self.name: np.array([mean_logp(s.logp) for s in signals.get()])}
