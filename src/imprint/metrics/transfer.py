"""Threshold transfer: fix a threshold at x % FPR on one non-member set, measure FPR on another.

A threshold calibrated on one candidate set (A) is only meaningful on another (B) if it gives
a similar FPR there; benchmark shifts show up as a large gap. Scores follow the package
convention (higher = more likely member; predicted member when ``score >= threshold``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import ConfigError, DataError
from imprint.metrics._validation import (
    NotMeasurableWarning,
    UndefinedMetricWarning,
    allowed_false_positives,
    as_scores,
    check_fraction,
)
from imprint.metrics.bootstrap import Interval
from imprint.metrics.resolution import unresolvable_reason

__all__ = ["fpr_at_threshold", "threshold_at_fpr", "threshold_transfer", "transfer_interval"]


def _warn_empty(name: str) -> None:
    warnings.warn(
        f"{name} is empty: FPR and thresholds are undefined; returning NaN.",
        UndefinedMetricWarning,
        stacklevel=3,
    )


def _threshold(nonmembers: NDArray[np.float64], fpr: float) -> float:
    """Smallest float threshold with FPR <= ``fpr`` on non-empty, validated ``nonmembers``."""
    n = nonmembers.size
    k = allowed_false_positives(fpr, n)
    if k >= n:
        return -math.inf
    # The (k+1)-th largest score must be excluded; every score above it may stay.
    pivot = float(-np.partition(-nonmembers, k)[k])
    if pivot == math.inf:
        raise DataError(
            f"{int(np.isposinf(nonmembers).sum())} of {n} non-member scores are +inf, more than "
            f"the {k} false positive(s) allowed at FPR <= {fpr:g}; no threshold reaches that "
            "FPR. Replace infinite scores by finite ones before calibrating a threshold."
        )
    return float(np.nextafter(pivot, math.inf))


def _fpr(nonmembers: NDArray[np.float64], threshold: float) -> float:
    return int(np.count_nonzero(nonmembers >= threshold)) / nonmembers.size


def threshold_at_fpr(nonmember_scores: ArrayLike, fpr: float) -> float:
    """The threshold that reaches FPR <= ``fpr`` on these non-members with the largest TPR.

    This is the smallest threshold ``t`` with ``mean(nonmember_scores >= t) <= fpr``: the
    float just above the (k+1)-th largest non-member score, where k is the number of false
    positives allowed, so ``score >= t`` means ``score >`` that non-member score. For any
    member scores, ``mean(members >= t)`` equals :func:`~imprint.metrics.binary.tpr_at_fpr`.

    Args:
        nonmember_scores: shape (n,), scores of non-members (higher = more likely member).
        fpr: FPR bound in [0, 1], e.g. 0.01.

    Returns:
        The threshold; ``-inf`` when every non-member may be a false positive; NaN with an
        :class:`UndefinedMetricWarning` when there are no non-members.
    """
    bound = check_fraction(fpr, name="fpr")
    nonmembers = as_scores(nonmember_scores, name="nonmember_scores")
    if nonmembers.size == 0:
        _warn_empty("nonmember_scores")
        return math.nan
    return _threshold(nonmembers, bound)


def fpr_at_threshold(nonmember_scores: ArrayLike, threshold: float) -> float:
    """Fraction of non-members with ``score >= threshold``.

    Args:
        nonmember_scores: shape (n,), scores of non-members (higher = more likely member).
        threshold: decision threshold (may be +/- inf, not NaN).

    Returns:
        FPR in [0, 1]; NaN with an :class:`UndefinedMetricWarning` when there are no
        non-members.
    """
    t = float(threshold)
    if math.isnan(t):
        raise ConfigError("threshold is NaN; pass a real number (or +/- inf).")
    nonmembers = as_scores(nonmember_scores, name="nonmember_scores")
    if nonmembers.size == 0:
        _warn_empty("nonmember_scores")
        return math.nan
    return _fpr(nonmembers, t)


def threshold_transfer(
    scores_a_nonmembers: ArrayLike,
    scores_b_nonmembers: ArrayLike,
    *,
    fprs: Sequence[float] = (0.01, 0.05, 0.1),
) -> dict[float, float]:
    """FPR obtained on set B at thresholds fixed at each target FPR on set A.

    Args:
        scores_a_nonmembers: shape (n_a,), non-member scores of the calibration set A.
        scores_b_nonmembers: shape (n_b,), non-member scores of the evaluation set B.
        fprs: target FPRs on A (fractions).

    Returns:
        ``{target_fpr: fpr_on_b}``. A perfectly transferable threshold gives values close to
        the targets. All NaN (with one :class:`UndefinedMetricWarning`) if a set is empty.
    """
    if isinstance(fprs, int | float | np.number):
        raise ConfigError(f"fprs must be a sequence, e.g. (0.01,); got {fprs!r}.")
    bounds = [check_fraction(f, name="each target FPR") for f in fprs]
    a = as_scores(scores_a_nonmembers, name="scores_a_nonmembers")
    b = as_scores(scores_b_nonmembers, name="scores_b_nonmembers")
    if a.size == 0 or b.size == 0:
        _warn_empty("scores_a_nonmembers" if a.size == 0 else "scores_b_nonmembers")
        return {f: math.nan for f in bounds}
    return {f: _fpr(b, _threshold(a, f)) for f in bounds}


def transfer_interval(
    scores_a_nonmembers: ArrayLike,
    scores_b_nonmembers: ArrayLike,
    fpr: float,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval | None:
    """The FPR on set B of the threshold set at ``fpr`` on set A, with a percentile bootstrap
    interval that resamples both sets (the threshold is re-estimated on each resample of A).

    Args:
        scores_a_nonmembers: shape (n_a,), non-member scores where the threshold is set.
        scores_b_nonmembers: shape (n_b,), non-member scores where its FPR is measured.
        fpr: the target FPR on A.

    Returns:
        An :class:`Interval` for the FPR on B, or None (with a :class:`NotMeasurableWarning`)
        when A has fewer than 1/``fpr`` non-members, the package's resolution rule.
    """
    bound = check_fraction(fpr, name="fpr")
    conf = check_fraction(confidence, name="confidence")
    a = as_scores(scores_a_nonmembers, name="scores_a_nonmembers")
    b = as_scores(scores_b_nonmembers, name="scores_b_nonmembers")
    if a.size == 0 or b.size == 0:
        raise DataError("transfer_interval needs non-member scores in both sets; one is empty.")
    reason = unresolvable_reason(bound, a.size, where="set A, where the threshold is set")
    if reason is not None:
        warnings.warn(f"transfer FPR at {bound:g}: {reason}.", NotMeasurableWarning, stacklevel=2)
        return None
    k = allowed_false_positives(bound, a.size)
    rng = np.random.default_rng(seed)
    a_star = a[rng.integers(0, a.size, size=(n_resamples, a.size))]
    b_star = b[rng.integers(0, b.size, size=(n_resamples, b.size))]
    if k >= a.size:
        fprs = np.ones(n_resamples)
    else:
        pivot = -np.partition(-a_star, k, axis=1)[:, k]  # the (k+1)-th largest of each A*
        fprs = np.mean(b_star > pivot[:, None], axis=1)  # the threshold is just above it
    low, high = np.quantile(fprs, [(1 - conf) / 2, (1 + conf) / 2])
    return Interval(_fpr(b, _threshold(a, bound)), float(low), float(high))
