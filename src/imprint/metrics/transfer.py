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
    UndefinedMetricWarning,
    allowed_false_positives,
    as_scores,
    check_fraction,
)

__all__ = ["fpr_at_threshold", "threshold_at_fpr", "threshold_transfer"]


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
