"""ROC figures from per-level counts: AUC and TPR at FPR bounds of many weighted copies of
one sample set at once (the bootstrap's and the jackknife's shared core)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


def _allowed_per_row(bound: float, n_neg: NDArray[np.int64]) -> NDArray[np.int64]:
    """:func:`allowed_false_positives` for each entry of ``n_neg`` (same float comparisons)."""
    k = np.minimum(np.floor(bound * n_neg), n_neg).astype(np.int64)
    while True:
        up = (k < n_neg) & ((k + 1) / n_neg <= bound)
        down = (k > 0) & (k / n_neg > bound)
        if not (up.any() or down.any()):
            return k
        k = k + up - down


def _histogram_statistics(
    h_pos: NDArray[np.int64], h_neg: NDArray[np.int64], bounds: Sequence[float]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUC, shape (c,), and TPR@FPR, shape (b, c), of resamples given as per-level counts
    (shape (c, n_levels) per class); the class sizes may differ between resamples."""
    n_pos, n_neg = h_pos.sum(axis=1), h_neg.sum(axis=1)
    neg_below = np.cumsum(h_neg, axis=1) - h_neg
    # Twice the Mann-Whitney U: each member scores 2 per lower non-member and 1 per tie.
    twice_u = np.sum(h_pos * (2 * neg_below + h_neg), axis=1)
    auc_values = twice_u / (2 * n_pos * n_neg)
    # Counts at or above each level; a trailing zero column stands for threshold +inf.
    zero = np.zeros((h_pos.shape[0], 1), dtype=np.int64)
    pos_at_or_above = np.concatenate([np.cumsum(h_pos[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    neg_at_or_above = np.cumsum(h_neg[:, ::-1], axis=1)[:, ::-1]
    tpr_values = np.empty((len(bounds), h_pos.shape[0]), dtype=np.float64)
    rows = np.arange(h_pos.shape[0])
    for i, bound in enumerate(bounds):
        k = _allowed_per_row(bound, n_neg)[:, None]
        # Levels with too many false positives form a prefix; the first level after it is
        # the lowest eligible threshold and so has the largest TPR.
        first_ok = np.sum(neg_at_or_above > k, axis=1)
        tpr_values[i] = pos_at_or_above[rows, first_ok] / n_pos
    return auc_values, tpr_values
