"""Leave-one-unit-out (jackknife) AUC and TPR@FPR, and the BCa acceleration built from them
(Efron 1987; several samples: Davison & Hinkley 1997, 5.3). A unit is a row, or a whole group
(e.g. a document) in a cluster bootstrap."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from imprint.metrics._counts import _allowed_per_row, _histogram_statistics

__all__ = ["acceleration", "jackknife_groups", "jackknife_rows"]

# bound on the elements of one (units x levels) work array, as the bootstrap's
_CHUNK_ELEMENTS = 1 << 20


def acceleration(jack: NDArray[np.float64], unit_class: NDArray[np.int64]) -> float:
    """BCa acceleration from leave-one-unit-out values ``jack`` (shape (u,)) of units in
    classes ``unit_class`` (shape (u,)): a = sum_k n_k^-3 sum_j l_kj^3 / (6 (sum_k n_k^-2
    sum_j l_kj^2)^1.5), l_kj = (n_k - 1)(mean_k - jack_kj) (Davison & Hinkley 1997, 5.3;
    one class: Efron 1987). Units whose removal leaves the figure undefined (NaN)
    are left out; 0 when nothing varies."""
    num = den = 0.0
    for k in np.unique(unit_class):
        values = jack[(unit_class == k) & np.isfinite(jack)]
        n_k = values.size
        if n_k < 2:
            continue
        influence = (n_k - 1) * (values.mean() - values)
        num += float(np.sum(influence**3)) / n_k**3
        den += float(np.sum(influence**2)) / n_k**2
    return 0.0 if den <= 0.0 else num / (6.0 * den**1.5)


def jackknife_rows(
    is_member: NDArray[np.bool_], levels: NDArray[np.int64], n_levels: int, bounds: Sequence[float]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """As :func:`jackknife_groups` with each row its own unit, in O(n + levels) per bound:
    removing a member at level l changes the counts above l only; removing a non-member
    lowers the non-member counts at or above levels <= l by one and the allowed false
    positives to those of n_neg - 1, so the lowest eligible threshold follows in closed form."""
    h_pos = np.bincount(levels[is_member], minlength=n_levels)
    h_neg = np.bincount(levels[~is_member], minlength=n_levels)
    n_pos, n_neg = int(h_pos.sum()), int(h_neg.sum())
    neg_below = np.cumsum(h_neg) - h_neg
    pos_above = h_pos[::-1].cumsum()[::-1] - h_pos
    twice_u = float(np.sum(h_pos * (2 * neg_below + h_neg)))
    own = np.where(
        is_member, 2 * neg_below[levels] + h_neg[levels], 2 * pos_above[levels] + h_pos[levels]
    )
    pos_left = np.where(is_member, n_pos - 1, n_pos)
    neg_left = np.where(is_member, n_neg, n_neg - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc_values = (twice_u - own) / (2.0 * pos_left * neg_left)
    pos_at_or_above = np.r_[h_pos[::-1].cumsum()[::-1], 0]
    neg_at_or_above = h_neg[::-1].cumsum()[::-1]
    tpr_values = np.empty((len(bounds), levels.size), dtype=np.float64)
    for i, bound in enumerate(bounds):
        k = int(_allowed_per_row(bound, np.array([n_neg]))[0])
        first = int(np.sum(neg_at_or_above > k))  # threshold of the full data
        tp = pos_at_or_above[first]
        member_tpr = (tp - (levels >= first)) / max(n_pos - 1, 1)
        k1 = int(_allowed_per_row(bound, np.array([max(n_neg - 1, 1)]))[0])
        a = int(np.sum(neg_at_or_above > k1 + 1))  # first level with count <= k1 + 1
        b = int(np.sum(neg_at_or_above > k1))  # first level with count <= k1
        first_wo = np.where(a <= levels, a, np.maximum(b, levels + 1))
        nonmember_tpr = pos_at_or_above[first_wo] / n_pos
        tpr_values[i] = np.where(is_member, member_tpr, nonmember_tpr)
    auc_values[(pos_left == 0) | (neg_left == 0)] = np.nan
    tpr_values[:, (pos_left == 0) | (neg_left == 0)] = np.nan
    return auc_values, tpr_values


def jackknife_groups(
    is_member: NDArray[np.bool_],
    levels: NDArray[np.int64],
    n_levels: int,
    unit: NDArray[np.int64],
    n_units: int,
    bounds: Sequence[float],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUC, shape (u,), and TPR, shape (b, u), with each unit (row group) left out in turn:
    the full histograms minus the left-out unit's, in chunks of units. NaN where a class
    empties."""
    full = [np.bincount(levels[m], minlength=n_levels) for m in (is_member, ~is_member)]
    chunk = max(1, _CHUNK_ELEMENTS // (n_levels + 1))
    auc_parts, tpr_parts = [], []
    for start in range(0, n_units, chunk):
        c = min(chunk, n_units - start)
        mine = (unit >= start) & (unit < start + c)
        hists = []
        for h, m in zip(full, (is_member, ~is_member), strict=True):
            sel = mine & m
            flat = np.bincount((unit[sel] - start) * n_levels + levels[sel], minlength=c * n_levels)
            hists.append(h[None, :] - flat.reshape(c, n_levels))
        with np.errstate(invalid="ignore", divide="ignore"):
            a, t = _histogram_statistics(hists[0], hists[1], bounds)
        empty = (hists[0].sum(axis=1) == 0) | (hists[1].sum(axis=1) == 0)
        a[empty], t[:, empty] = np.nan, np.nan
        auc_parts.append(a)
        tpr_parts.append(t)
    return np.concatenate(auc_parts), np.concatenate(tpr_parts, axis=1)
