"""Gap-K% (Kwak & Kim 2026): the gap to the model's top-1 prediction, smoothed, lowest k%.

Training on x penalises every step where the model's top choice is not x_t, so on a member the
true token sits close to the top. Per token, the gap to the top-1 log-probability, standardised
by the spread of the model's own distribution (as Min-K%++):

    g_t = (log p(x_t) - max_v log p(v)) / sigma_t,   sigma_t^2 = Var_{v~p}[log p(v)]   (g_t <= 0)

then a moving average over ``window`` adjacent tokens (neighbouring tokens are correlated; one
noisy token should not decide), and the mean of the ``k`` lowest fraction of the smoothed values
(max(1, floor(k * n)) of them). Higher = member. Defaults follow the authors' code: k = 0.2,
window = 3 (they use 6 for LLaMA models); a text shorter than the window is not smoothed; sigma^2
is floored at 1e-8. A text with no scored token has no score: NaN, with a warning.

Needs nothing beyond the target's plain log-prob pass: the planner keeps max_v log p(v) per
token (``TokenStats.top1_logp``), so Gap-K% shares the pass with loss, Min-K% and Min-K%++.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import Attack, check_fraction, lowest_fraction_mean, register
from imprint.attacks.ez_mia import warn_undefined
from imprint.backends.base import TokenStats
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet

_MIN_VAR = 1e-8  # the authors' floor: a one-hot distribution has no spread


def standardised_gap(stats: TokenStats) -> np.ndarray:
    """g_t per token, shape (T,); <= 0, and 0 where x_t is the top choice."""
    if stats.top1_logp is None or np.isnan(stats.top1_logp).any():
        raise ConfigError(
            "gap_k needs each token's top-1 log-probability, which this backend did not record "
            "(TokenStats.top1_logp); score with a local model (the Hugging Face backend)"
        )
    sigma = np.sqrt(np.maximum(stats.var_logp.astype(np.float64), _MIN_VAR))
    gap = stats.logp.astype(np.float64) - stats.top1_logp.astype(np.float64)
    return np.minimum(gap, 0.0) / sigma  # float32 rounding may leave +1e-7 at the top choice


def gap_k_score(gaps: np.ndarray, *, k: float, window: int) -> float:
    """Mean of the ``k`` lowest moving averages (width ``window``) of ``gaps``; NaN if empty."""
    gaps = np.asarray(gaps, dtype=np.float64)
    if gaps.size == 0:
        return float("nan")
    smoothed = gaps if gaps.size < window else np.convolve(gaps, np.ones(window) / window, "valid")
    return lowest_fraction_mean(smoothed, k)


@register("gap_k")
@dataclass(frozen=True)
class GapK(Attack):
    k: float = 0.2
    window: int = 3

    summary = (
        "gap between each token's log-prob and the top-1 log-prob, standardised, smoothed over "
        "3 tokens; mean of the lowest 20% (k=0.2)"
    )
    paper = (
        "Kwak & Kim 2026, Gap-K%: Measuring Top-1 Prediction Gap for Detecting Pretraining Data, "
        "arXiv 2601.19936"
    )

    def __post_init__(self) -> None:
        check_fraction("gap_k k", self.k)
        if self.window < 1:
            raise ConfigError(f"gap_k window must be >= 1 token, got {self.window}")

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)  # the target's plain pass, shared with loss, min_k and min_k_pp

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        scores = np.array(
            [gap_k_score(standardised_gap(s), k=self.k, window=self.window) for s in signals.get()],
            dtype=np.float64,
        )
        n_nan = int(np.isnan(scores).sum())
        warn_undefined(self.name, self.name, n_nan, len(signals), "no scored token")
        return {self.name: scores}
