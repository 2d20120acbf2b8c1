"""Drawing stratified bootstrap resamples and each resample's AUC and TPR@FPR, vectorised.

Members and non-members are resampled separately (keeping their counts), or, with groups, whole
groups within each class. Scores are mapped once to integer levels (their rank among the
distinct scores); each resample becomes a histogram over levels, and AUC and TPR@FPR follow
from cumulative sums of those histograms (:mod:`imprint.metrics._counts`). Resamples are drawn
in chunks so one work array stays under ``_CHUNK_ELEMENTS``. The draw order of each function
is part of the reproducibility contract for a seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import DataError
from imprint.metrics._counts import _histogram_statistics
from imprint.metrics._validation import as_labels_and_scores

__all__ = [
    "bootstrap_distribution",
    "group_index",
    "grouped_distribution",
    "weighted_statistics",
]

# Upper bound on the elements of one (resamples x levels) work array; resamples are processed
# in chunks of this size so memory stays bounded for large datasets.
_CHUNK_ELEMENTS = 1 << 20


def _resample_chunks(
    rng: np.random.Generator, n_pos: int, n_neg: int, n_resamples: int, n_levels: int
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield ``(member_idx, nonmember_idx)`` of shapes (c, n_pos) and (c, n_neg) per chunk.

    Draw order (part of the reproducibility contract for a given seed): for each chunk,
    member indices then non-member indices, both with ``rng.integers``.
    """
    chunk = max(1, _CHUNK_ELEMENTS // max(n_levels + 1, n_pos, n_neg))
    for start in range(0, n_resamples, chunk):
        c = min(chunk, n_resamples - start)
        yield rng.integers(0, n_pos, size=(c, n_pos)), rng.integers(0, n_neg, size=(c, n_neg))


def _histograms(levels: NDArray[np.int64], n_levels: int) -> NDArray[np.int64]:
    """Row-wise counts of ``levels``, shape (c, k), over ``n_levels`` bins: shape (c, n_levels)."""
    c = levels.shape[0]
    offsets = (np.arange(c, dtype=np.int64) * n_levels)[:, None]
    flat = np.bincount((levels + offsets).ravel(), minlength=c * n_levels)
    return flat.reshape(c, n_levels)


def _resample_statistics(
    pos_levels: NDArray[np.int64],
    neg_levels: NDArray[np.int64],
    n_levels: int,
    bounds: Sequence[float],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUC and TPR@FPR for each resample, given resampled score levels.

    Args:
        pos_levels: shape (c, n_pos), member score levels (0 = lowest distinct score).
        neg_levels: shape (c, n_neg), non-member score levels.
        n_levels: number of distinct levels (all levels are < n_levels).
        bounds: FPR bounds, length b.

    Returns:
        ``(auc, tpr)`` with shapes (c,) and (b, c).
    """
    h_pos = _histograms(pos_levels, n_levels)
    h_neg = _histograms(neg_levels, n_levels)
    return _histogram_statistics(h_pos, h_neg, bounds)


def bootstrap_distribution(
    is_member: NDArray[np.bool_],
    scores: NDArray[np.float64],
    *,
    n_resamples: int,
    seed: int,
    bounds: Sequence[float],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bootstrap AUC values, shape (n_resamples,), and TPR values, shape (b, n_resamples)."""
    n_pos = int(is_member.sum())
    n_neg = int(is_member.size - n_pos)
    distinct, levels = np.unique(scores, return_inverse=True)
    pos_levels, neg_levels = levels[is_member], levels[~is_member]
    auc_parts, tpr_parts = [], []
    rng = np.random.default_rng(seed)
    for pos_idx, neg_idx in _resample_chunks(rng, n_pos, n_neg, n_resamples, distinct.size):
        a, t = _resample_statistics(pos_levels[pos_idx], neg_levels[neg_idx], distinct.size, bounds)
        auc_parts.append(a)
        tpr_parts.append(t)
    return np.concatenate(auc_parts), np.concatenate(tpr_parts, axis=1)


def group_index(groups: ArrayLike, is_member: NDArray[np.bool_]) -> tuple[NDArray[np.int64], int]:
    """(each row's group position, shape (n,), number of groups); a group mixing members and
    non-members is an error (the bootstrap keeps each class's group count)."""
    arr = np.asarray(groups)
    if arr.shape != is_member.shape:
        raise DataError(
            f"groups must give one group per sample; got shape {arr.shape} for "
            f"{is_member.size} samples."
        )
    _, index = np.unique(arr, return_inverse=True)
    index = index.astype(np.int64).ravel()
    n_groups = int(index.max()) + 1 if index.size else 0
    members = np.bincount(index, weights=is_member, minlength=n_groups)
    sizes = np.bincount(index, minlength=n_groups)
    mixed = int(np.sum((members > 0) & (members < sizes)))
    if mixed:
        raise DataError(
            f"{mixed} group(s) hold both members and non-members; a resampled group (e.g. a "
            "document) must have one label. Pass groups that do not cross the classes."
        )
    return index, n_groups


def _weighted_histograms(
    levels: NDArray[np.int64], weights: NDArray[np.int64], n_levels: int
) -> NDArray[np.int64]:
    """Per row of ``weights`` (shape (c, k)), counts over ``n_levels`` bins of ``levels`` (shape
    (k,)) with row r counting level i ``weights[r, i]`` times: shape (c, n_levels)."""
    c = weights.shape[0]
    offsets = (np.arange(c, dtype=np.int64) * n_levels)[:, None]
    flat = np.bincount(
        (levels[None, :] + offsets).ravel(), weights=weights.ravel(), minlength=c * n_levels
    )
    return np.rint(flat).astype(np.int64).reshape(c, n_levels)


def grouped_distribution(
    is_member: NDArray[np.bool_],
    scores: NDArray[np.float64],
    group: NDArray[np.int64],
    n_groups: int,
    *,
    n_resamples: int,
    seed: int,
    bounds: Sequence[float],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """As :func:`bootstrap_distribution`, resampling whole groups within each class: a group
    drawn twice counts each of its rows twice. Draw order: member groups, then non-member
    groups, per chunk."""
    distinct, levels = np.unique(scores, return_inverse=True)
    n_levels = distinct.size
    group_member = np.zeros(n_groups, dtype=bool)
    group_member[group[is_member]] = True
    pools = (np.flatnonzero(group_member), np.flatnonzero(~group_member))
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // max(n_levels + 1, scores.size, n_groups))
    auc_parts, tpr_parts = [], []
    for start in range(0, n_resamples, chunk):
        c = min(chunk, n_resamples - start)
        offsets = (np.arange(c, dtype=np.int64) * n_groups)[:, None]
        counts = np.zeros(c * n_groups, dtype=np.int64)
        for pool in pools:
            draws = pool[rng.integers(0, pool.size, size=(c, pool.size))]
            counts += np.bincount((draws + offsets).ravel(), minlength=c * n_groups)
        weights = counts.reshape(c, n_groups)[:, group]  # (c, n): copies of each row
        h_pos = _weighted_histograms(levels[is_member], weights[:, is_member], n_levels)
        h_neg = _weighted_histograms(levels[~is_member], weights[:, ~is_member], n_levels)
        a, t = _histogram_statistics(h_pos, h_neg, bounds)
        auc_parts.append(a)
        tpr_parts.append(t)
    return np.concatenate(auc_parts), np.concatenate(tpr_parts, axis=1)


def weighted_statistics(
    labels: ArrayLike, scores: ArrayLike, weights: NDArray[np.int64], fpr_bounds: Sequence[float]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUC, shape (c,), and TPR at each bound, shape (b, c), of ``c`` weighted copies of one
    sample set: row r of ``weights`` (shape (c, n), non-negative integers) counts sample i
    ``weights[r, i]`` times, as a resample does. NaN for a row that leaves a class empty; no
    resolution rule applied (the caller's)."""
    is_member, score_arr = as_labels_and_scores(labels, scores)
    distinct, levels = np.unique(score_arr, return_inverse=True)
    w = np.asarray(weights, dtype=np.int64)
    h_pos = _weighted_histograms(levels[is_member], w[:, is_member], distinct.size)
    h_neg = _weighted_histograms(levels[~is_member], w[:, ~is_member], distinct.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc_values, tpr_values = _histogram_statistics(h_pos, h_neg, fpr_bounds)
    empty = (h_pos.sum(axis=1) == 0) | (h_neg.sum(axis=1) == 0)
    auc_values[empty], tpr_values[:, empty] = np.nan, np.nan
    return auc_values, tpr_values
