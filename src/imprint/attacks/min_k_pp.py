"""Min-K%++ (Zhang et al. 2025): standardise each token's log-prob by the model's own distribution.

z_t = (log p(x_t) - mu_t) / sigma_t with mu_t = E_{v~p}[log p(v)] and
sigma_t^2 = Var_{v~p}[log p(v)] over the vocabulary at step t; score = mean of the k% lowest z_t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import Attack, check_fraction, lowest_fraction_mean, register
from imprint.backends.base import TokenStats
from imprint.signals.needs import Need, SignalSet

_MIN_SIGMA = 1e-6  # a one-hot distribution has zero variance


def standardised_logp(stats: TokenStats) -> np.ndarray:
    """z_t per token, shape (T,)."""
    sigma = np.sqrt(np.maximum(stats.var_logp.astype(np.float64), _MIN_SIGMA**2))
    return (stats.logp.astype(np.float64) - stats.mean_logp) / sigma


@register("min_k_pp")
@dataclass(frozen=True)
class MinKPlusPlus(Attack):
    k: float = 0.2
    sweep: tuple[float, ...] = ()

    summary = "Min-K% on log-probs standardised by the vocabulary mean and std (k=0.2)"
    paper = "Zhang et al. 2025, Min-K%++: Improved Baseline for Detecting Pre-Training Data"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sweep", tuple(float(k) for k in self.sweep))
        for k in (self.k, *self.sweep):
            check_fraction("min_k_pp k", k)

    def columns(self) -> tuple[str, ...]:
        return (self.name, *(f"{self.name}@{k:g}" for k in self.sweep))

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        z = [standardised_logp(s) for s in signals.get()]
        out = {self.name: np.array([lowest_fraction_mean(v, self.k) for v in z])}
        for k in self.sweep:
            out[f"{self.name}@{k:g}"] = np.array([lowest_fraction_mean(v, k) for v in z])
        return out
