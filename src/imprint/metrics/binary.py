"""Binary membership metrics: one confusion-count core and thin wrappers.

Conventions used throughout: ``labels`` are 1 for members and 0 for non-members; ``scores``
are real numbers where a **higher score means more likely a member**. A sample is predicted
a member when ``score >= threshold``. Signs are never flipped here (attacks do that).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.metrics._validation import (
    NotMeasurableWarning,
    UndefinedMetricWarning,
    allowed_false_positives,
    as_labels_and_scores,
    check_fraction,
    warn_undefined,
)
from imprint.metrics.resolution import MIN_FALSE_POSITIVES, unresolvable_reason

__all__ = [
    "NotMeasurableWarning",
    "UndefinedMetricWarning",
    "auc",
    "confusion_at_thresholds",
    "roc_auc_score",
    "roc_curve",
    "tpr_at_fpr",
    "edge_bound",
]


def confusion_at_thresholds(
    labels: ArrayLike, scores: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], int, int]:
    """Cumulative confusion counts at every distinct score used as a threshold.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,), higher = more likely member. NaN raises ``ValueError``.

    Returns:
        ``(thresholds, tp, fp, n_pos, n_neg)``: ``thresholds`` has shape (m,) and holds the
        m distinct scores in decreasing order; ``tp[i]`` / ``fp[i]`` (shape (m,), int64) count
        members / non-members with ``score >= thresholds[i]``; ``n_pos`` / ``n_neg`` are the
        numbers of members / non-members. Empty input gives empty arrays and zero counts.
    """
    is_member, score_arr = as_labels_and_scores(labels, scores)
    n_pos = int(is_member.sum())
    n_neg = int(is_member.size - n_pos)
    order = np.argsort(-score_arr, kind="stable")
    sorted_scores = score_arr[order]
    # Last position of each run of equal scores: counts there include every tied sample.
    last_of_run = np.flatnonzero(sorted_scores[1:] != sorted_scores[:-1])
    if sorted_scores.size:
        last_of_run = np.append(last_of_run, sorted_scores.size - 1)
    tp_all = np.cumsum(is_member[order], dtype=np.int64)
    tp = tp_all[last_of_run]
    fp = (last_of_run + 1).astype(np.int64) - tp
    return sorted_scores[last_of_run], tp, fp, n_pos, n_neg


def roc_curve(
    labels: ArrayLike, scores: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Receiver operating characteristic, one point per distinct threshold.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,), higher = more likely member.

    Returns:
        ``(fpr, tpr, thresholds)``, each of shape (m + 1,) for m distinct scores. The first
        point is (0, 0) at threshold ``+inf``; thresholds then decrease and the last point is
        (1, 1). If a class is missing, an :class:`UndefinedMetricWarning` is emitted and the
        undefined axis (fpr without non-members, tpr without members) is all NaN.
    """
    thresholds, tp, fp, n_pos, n_neg = confusion_at_thresholds(labels, scores)
    if n_pos == 0 or n_neg == 0:
        warn_undefined("The ROC curve", n_pos, n_neg)
    tp0 = np.concatenate(([0], tp)).astype(np.float64)
    fp0 = np.concatenate(([0], fp)).astype(np.float64)
    tpr = tp0 / n_pos if n_pos else np.full_like(tp0, np.nan)
    fpr = fp0 / n_neg if n_neg else np.full_like(fp0, np.nan)
    return fpr, tpr, np.concatenate(([np.inf], thresholds))


def roc_auc_score(labels: ArrayLike, scores: ArrayLike) -> float:
    """Area under the ROC curve (trapezoid rule over every distinct threshold), from labels and
    scores as scikit-learn's ``roc_auc_score(y_true, y_score)`` (not its ``auc(x, y)``, the area
    under any curve).

    Equals the Mann-Whitney probability that a random member outscores a random
    non-member, ties counted 1/2. Computed from integer counts, so it is exact up to the
    final division.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,), higher = more likely member.

    Returns:
        AUC in [0, 1]; NaN with an :class:`UndefinedMetricWarning` if a class is missing.
    """
    _, tp, fp, n_pos, n_neg = confusion_at_thresholds(labels, scores)
    if n_pos == 0 or n_neg == 0:
        warn_undefined("AUC", n_pos, n_neg)
        return math.nan
    tp0 = np.concatenate(([0], tp))
    fp0 = np.concatenate(([0], fp))
    # Twice the area, in units of one member x non-member pair: exact integer arithmetic.
    twice_area = int(np.sum(np.diff(fp0) * (tp0[1:] + tp0[:-1])))
    return twice_area / (2 * n_pos * n_neg)


def auc(labels: ArrayLike, scores: ArrayLike) -> float:
    """Deprecated name of :func:`roc_auc_score` (scikit-learn's ``auc(x, y)`` is the area under
    a curve given by points, another function); warns and returns the same value."""
    warnings.warn(
        "imprint.metrics.auc(labels, scores) is renamed roc_auc_score(labels, scores), as in "
        "scikit-learn, whose auc(x, y) means the area under a curve; auc will be removed",
        FutureWarning,
        stacklevel=2,
    )
    return roc_auc_score(labels, scores)


def tpr_at_fpr(
    labels: ArrayLike,
    scores: ArrayLike,
    max_fpr: float,
    *,
    min_false_positives: int = MIN_FALSE_POSITIVES,
) -> float | None:
    """Largest true-positive rate over ROC points whose false-positive rate is <= ``max_fpr``.

    No interpolation: a point is eligible only if its FPR is at most ``max_fpr``; the point
    (0, 0) is always eligible, so the result is 0 when no threshold qualifies.

    One resolution rule (:mod:`imprint.metrics.resolution`), as in every report: the read-out
    allows ``k = floor(max_fpr n)`` false positives and its threshold's real FPR is about
    (k+1)/(n+1), so with fewer than ``min_false_positives`` (4) allowed the figure runs well
    above its FPR and its interval under-covers. It is then None, with a
    :class:`NotMeasurableWarning` that gives the reason.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,), higher = more likely member.
        max_fpr: FPR bound in [0, 1], e.g. 0.01 for TPR at 1 % FPR.
        min_false_positives: the rule's k (1: the rule before issue 37, only for comparisons).

    Returns:
        TPR in [0, 1]; NaN with an :class:`UndefinedMetricWarning` if a class is missing; None
        with a :class:`NotMeasurableWarning` if the non-members cannot resolve ``max_fpr``.
    """
    bound = check_fraction(max_fpr, name="max_fpr")
    _, tp, fp, n_pos, n_neg = confusion_at_thresholds(labels, scores)
    if n_pos == 0 or n_neg == 0:
        warn_undefined(f"TPR at FPR <= {bound:g}", n_pos, n_neg)
        return math.nan
    reason = unresolvable_reason(bound, n_neg, min_false_positives=min_false_positives)
    if reason is not None:
        warnings.warn(
            f"TPR at FPR <= {bound:g} is not measurable: {reason}.",
            NotMeasurableWarning,
            stacklevel=2,
        )
        return None
    return tpr_from_counts(tp, fp, n_pos, n_neg, bound)


def tpr_from_counts(
    tp: NDArray[np.int64], fp: NDArray[np.int64], n_pos: int, n_neg: int, bound: float
) -> float:
    """The ROC read-out behind :func:`tpr_at_fpr`, without the resolution rule (both classes
    present; ``tp``, ``fp`` as :func:`confusion_at_thresholds` returns them)."""
    k = allowed_false_positives(bound, n_neg)
    # fp is non-decreasing, so the eligible points form a prefix; tp is largest at its end.
    n_eligible = int(np.searchsorted(fp, k, side="right"))
    best_tp = int(tp[n_eligible - 1]) if n_eligible else 0
    return best_tp / n_pos


def edge_bound(bound: float, n_neg: int) -> float | None:
    """The FPR bound at which the read-out allows ``k' = floor(bound (n_neg + 1)) - 1`` false
    positives, or None when ``k'`` is not below the read-out's ``k = floor(bound n_neg)``.

    The read-out's threshold sits above the (k+1)-th highest non-member, whose expected FPR is
    (k+1)/(n+1) > ``bound``; at ``k'`` it is (k'+1)/(n+1) <= ``bound``. A TPR interval's low
    end is the lower of the two reads of one bootstrap (issue 37, item 7).
    """
    k = allowed_false_positives(bound, n_neg)
    k_edge = math.floor(bound * (n_neg + 1)) - 1
    if k_edge < 0 or k_edge >= k:
        return None
    return k_edge / n_neg
