"""Empirical epsilon lower bounds from membership guesses (pure functions, numpy/scipy).

Two audits:

* **One run** (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run",
  arXiv 2305.08846, Section 3): ``m`` canaries, each included in training independently with
  probability 1/2; the auditor guesses "in" on some canaries, "out" on others and abstains on the
  rest (``r`` guesses, ``v`` of them correct). If training is (eps, delta)-DP then for every ``v``

      P[V >= v] <= P[B >= v] + 2 m delta max_{i=1..v} P[v - i <= B < v] / i,  B ~ Binomial(r, q)

  with ``q = e^eps / (1 + e^eps)`` (their main theorem; delta = 0 is the pure-DP statement). The
  right-hand side is the p-value of "training is (eps, delta)-DP"; the lower bound is the largest
  eps it rejects at level ``beta``. Repeated canaries need group privacy: audit canaries seen once.
* **Many runs** (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021): at one threshold, an
  (eps, delta)-DP algorithm has ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 -
  delta``; with Clopper-Pearson upper bounds on FPR and FNR (``beta / 2`` each),
  ``eps >= log((1 - delta - FPR_hi) / FNR_hi)`` (and the symmetric form) at confidence 1 - beta.

Scores follow the house rule: higher = more likely member.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from imprint.errors import ConfigError, DataError

__all__ = [
    "OneRunBound",
    "clopper_pearson_upper",
    "multi_run_epsilon",
    "one_run_bound",
    "one_run_epsilon",
    "one_run_guesses",
    "one_run_p_value",
]

#: Bisection steps: the bound is found to within 2^-60 of its search interval.
_STEPS = 60


def _check_counts(m: int, r: int, v: int) -> None:
    if not (0 <= v <= r <= m) or m < 1:
        raise ConfigError(
            f"one-run audit counts must satisfy 0 <= correct ({v}) <= guesses ({r}) <= "
            f"canaries ({m}) and canaries >= 1"
        )


def _check_level(beta: float, delta: float) -> None:
    if not 0 < beta < 1:
        raise ConfigError(f"beta (1 - confidence) must be in (0, 1), got {beta}")
    if not 0 <= delta < 1:
        raise ConfigError(f"delta must be in [0, 1), got {delta}")


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float = 0.0) -> float:
    """P-value of ">= v correct of r guesses on m canaries" if training were (eps, delta)-DP.

    Steinke et al. 2023, Section 3 (main theorem): the binomial tail of eps-randomized response
    plus ``2 m delta`` times the largest average of the ``i`` probabilities just below ``v``.
    """
    _check_counts(m, r, v)
    if eps < 0 or not 0 <= delta <= 1:
        raise ConfigError(f"need eps >= 0 and 0 <= delta <= 1, got {eps}, {delta}")
    if v == 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-eps))  # accuracy of eps-DP randomized response
    tail = float(stats.binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if delta == 0:
        return min(tail, 1.0)
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[B = v-1], P[B = v-2], ...
    alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2 * m * delta * alpha, 1.0)


def one_run_epsilon(m: int, r: int, v: int, *, beta: float = 0.05, delta: float = 0.0) -> float:
    """Largest eps that ``v`` correct of ``r`` guesses rejects at level ``beta`` (0 if none).

    The audit's claim: with confidence ``1 - beta`` training is not (eps', delta)-DP for any
    eps' below the returned value. The p-value grows with eps, so bisection finds it.
    """
    _check_counts(m, r, v)
    _check_level(beta, delta)
    if one_run_p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    hi = 1.0
    while one_run_p_value(m, r, v, hi, delta) < beta:
        hi *= 2.0
        if hi > 1e4:  # unreachable for r >= 1: the tail tends to 1 as eps grows
            raise DataError(f"one-run bound diverged for m={m}, r={r}, v={v}")
    lo = 0.0
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if one_run_p_value(m, r, v, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_guesses(
    scores: Sequence[float] | np.ndarray,
    included: Sequence[bool] | np.ndarray,
    *,
    k_pos: int,
    k_neg: int,
) -> tuple[int, int]:
    """``(r, v)``: guess "in" on the ``k_pos`` highest scores and "out" on the ``k_neg`` lowest,
    abstain on the rest; ``v`` counts correct guesses. Ties are broken by position (stable sort),
    which the scores, not the labels, decide."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    if s.shape != inc.shape or s.ndim != 1:
        raise DataError(f"scores {s.shape} and inclusion mask {inc.shape} must be equal 1-D")
    if np.isnan(s).any():
        raise DataError(f"{int(np.isnan(s).sum())} canary score(s) are NaN; the audit needs all")
    if k_pos < 0 or k_neg < 0 or k_pos + k_neg > len(s):
        raise ConfigError(f"cannot guess {k_pos} in and {k_neg} out on {len(s)} canaries")
    order = np.argsort(-s, kind="stable")  # highest first
    top, bottom = order[:k_pos], order[len(s) - k_neg :]
    v = int(inc[top].sum()) + int((~inc[bottom]).sum())
    return k_pos + k_neg, v


@dataclass(frozen=True)
class OneRunBound:
    """One-run audit at one number of guesses: ``epsilon`` lower bound at ``1 - beta``."""

    canaries: int
    guesses: int
    correct: int
    k_pos: int
    k_neg: int
    beta: float
    delta: float
    epsilon: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "canaries": self.canaries,
            "guesses": self.guesses,
            "correct": self.correct,
            "k_pos": self.k_pos,
            "k_neg": self.k_neg,
            "beta": self.beta,
            "delta": self.delta,
            "epsilon": self.epsilon,
        }


def one_run_bound(
    scores: Sequence[float] | np.ndarray,
    included: Sequence[bool] | np.ndarray,
    *,
    guesses: int,
    side: str = "both",
    beta: float = 0.05,
    delta: float = 0.0,
) -> OneRunBound:
    """The one-run bound after ``guesses`` guesses: ``side="both"`` guesses "in" on the top
    ``ceil(guesses / 2)`` scores and "out" on the bottom ``floor(guesses / 2)``; ``"in"`` guesses
    only members (the top ``guesses``)."""
    if side not in ("both", "in"):
        raise ConfigError(f"side must be 'both' or 'in', got {side!r}")
    k_pos = guesses if side == "in" else guesses - guesses // 2
    k_neg = guesses - k_pos
    r, v = one_run_guesses(scores, included, k_pos=k_pos, k_neg=k_neg)
    eps = one_run_epsilon(len(np.asarray(scores)), r, v, beta=beta, delta=delta)
    return OneRunBound(len(np.asarray(scores)), r, v, k_pos, k_neg, beta, delta, eps)


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate: ``k`` successes of ``n``, level
    ``alpha`` (P[rate > bound] <= alpha): the ``1 - alpha`` quantile of Beta(k + 1, n - k)."""
    if n < 1 or not 0 <= k <= n:
        raise ConfigError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if k == n:
        return 1.0
    return float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def multi_run_epsilon(
    fp: int, negatives: int, fn: int, positives: int, *, beta: float = 0.05, delta: float = 0.0
) -> float:
    """Epsilon lower bound from a threshold's false positives and negatives over many runs.

    ``fp`` of ``negatives`` runs without the canary guessed "in", ``fn`` of ``positives`` runs
    with it guessed "out". Clopper-Pearson upper bounds at ``beta / 2`` each (so both hold at
    ``1 - beta``); ``max(log((1 - delta - FPR_hi) / FNR_hi), log((1 - delta - FNR_hi) /
    FPR_hi), 0)`` (the hypothesis-testing view of DP used by Jagielski, Ullman & Oprea 2020 and
    Nasr et al. 2021 to audit DP-SGD).
    """
    _check_level(beta, delta)
    fpr = clopper_pearson_upper(fp, negatives, beta / 2)
    fnr = clopper_pearson_upper(fn, positives, beta / 2)
    out = 0.0
    for a, b in ((fpr, fnr), (fnr, fpr)):
        top = 1 - delta - a
        if top > 0 and b < top:
            out = max(out, math.inf if b == 0 else math.log(top / b))
    return out
