"""Stratified, seeded, vectorised bootstrap intervals for AUC and TPR at fixed FPR.

Members and non-members are resampled separately (with replacement, keeping their counts),
so every resample has both classes. With ``groups`` (e.g. the document of each sequence) whole
groups are resampled instead, each bringing all its rows: rows of one group are correlated, so
resampling them one by one gives intervals that are too narrow (a cluster bootstrap). Every
summary names what it resampled (``resamples``). All resamples are evaluated together: scores
are mapped once to integer levels (their rank among the distinct scores), each resample becomes a
histogram over levels, and AUC and TPR@FPR follow from cumulative sums of those histograms.
The per-resample values equal :func:`~imprint.metrics.binary.roc_auc_score` and
:func:`~imprint.metrics.binary.tpr_at_fpr` applied to that resample, exactly.

Intervals are BCa by default (bias-corrected and accelerated; Efron 1987, "Better bootstrap
confidence intervals", JASA 82): the percentile interval read at levels
shifted by the bootstrap median bias ``z0`` and the jackknife acceleration ``a``. With two
classes (and with groups) the acceleration is the several-sample form of Davison & Hinkley 1997
(Bootstrap Methods and their Application, section 5.3): jackknife influence values per
class, each class weighted by its own unit count. The plain percentile interval under-covers
with about 20 units in a class (0.925 at 95 % with 20 non-members in the calibration suite);
``interval="percentile"`` keeps it available. Every summary names its ``method``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import ConfigError, DataError
from imprint.metrics._counts import _histogram_statistics
from imprint.metrics._validation import (
    as_labels_and_scores,
    check_fraction,
    warn_undefined,
)
from imprint.metrics.binary import confusion_at_thresholds, roc_auc_score, tpr_from_counts
from imprint.metrics.degenerate import class_units, tie_note, tied_share, unless_collapsed
from imprint.metrics.interval import Interval
from imprint.metrics.jackknife import acceleration, jackknife_groups, jackknife_rows
from imprint.metrics.resolution import MIN_FALSE_POSITIVES, unresolvable

__all__ = [
    "DEFAULT_FPR_BOUNDS",
    "INTERVAL_METHODS",
    "Interval",
    "MetricSummary",
    "bca_interval",
    "bootstrap_metrics",
    "weighted_statistics",
]

DEFAULT_FPR_BOUNDS: tuple[float, ...] = (0.001, 0.01, 0.05, 0.1)
#: interval constructions over one bootstrap distribution (the first is the default)
INTERVAL_METHODS: tuple[str, ...] = ("bca", "percentile")

# Upper bound on the elements of one (resamples x levels) work array; resamples are processed
# in chunks of this size so memory stays bounded for large datasets.
_CHUNK_ELEMENTS = 1 << 20


def fpr_key(bound: float) -> str:
    """Name of the TPR column for an FPR bound, e.g. 0.001 -> ``"tpr@0.1%"``."""
    return f"tpr@{round(bound * 100, 10):g}%"


_NAN_INTERVAL = Interval(math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class MetricSummary:
    """AUC and TPR at each FPR bound, each with a bootstrap interval: the one result type of a
    score column, from the bootstrap to a run's ``metrics.json`` and back.

    ``tpr_at_fpr`` maps an FPR bound (e.g. 0.01) to its :class:`Interval`, or to None when the
    non-members cannot resolve it (:mod:`~imprint.metrics.resolution`); ``not_measurable``
    then says why. ``tied_share`` is the share of scores tied with another (None when not
    recorded); ``tie_decides`` maps a bound to why ties decide its threshold.
    ``resamples`` names the unit the bootstrap drew ("samples", "texts", or e.g. "documents"
    when whole groups were resampled; None when not recorded, as in run folders written before
    it was); ``n_units`` counts those units (None when they are the rows or not recorded);
    ``method`` the interval read from the resamples ("bca", "percentile" or the out-of-fold
    widening; None when not recorded). ``n_nan`` counts the samples a run's score column gave
    no score (left out); None where every sample is scored (a blind classifier) or not counted.
    ``n_nonmember_units`` counts the non-member groups when whole groups were resampled (the
    resolution rule counts them, :meth:`unresolved`); None when rows were resampled or in
    folders written before it was recorded (the rule then counts non-member texts).
    """

    auc: Interval
    tpr_at_fpr: dict[float, Interval | None]
    n_members: int
    n_nonmembers: int
    n_resamples: int
    confidence: float
    seed: int
    not_measurable: dict[float, str] = field(default_factory=dict)
    resamples: str | None = "samples"
    n_units: int | None = None
    method: str | None = "bca"
    n_nan: int | None = None
    tied_share: float | None = None
    tie_decides: dict[float, str] = field(default_factory=dict)
    n_nonmember_units: int | None = None

    def unresolved(
        self, bounds: Iterable[float] | None = None, *, where: str = "this evaluation"
    ) -> dict[float, str]:
        """``{bound: reason}`` for each of ``bounds`` (default: this summary's) that its
        non-members cannot resolve: the one rule of :mod:`~imprint.metrics.resolution`,
        counting non-member groups when whole groups were resampled."""
        return unresolvable(
            self.tpr_at_fpr if bounds is None else bounds,
            self.n_nonmembers,
            where=where,
            nonmember_units=self.n_nonmember_units,
            unit_name=self.resamples or "groups",
        )

    def tpr(self, bound: float) -> Interval | None:
        """The TPR interval at FPR ``bound``; None when not measurable (or not asked for)."""
        return None if bound in self.not_measurable else self.tpr_at_fpr.get(bound)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: ``"auc"``, ``"tpr@1%"``, ... each ``{"estimate", "low", "high"}``
        (a not measurable one all None with ``not_measurable``: why), then the counts and the
        bootstrap settings, in the order metrics.json has always had. NaN is written as None."""
        out: dict[str, Any] = {"auc": self.auc.to_dict()}
        for bound, interval in self.tpr_at_fpr.items():
            if interval is None or bound in self.not_measurable:
                reason = self.not_measurable.get(bound)
                out[fpr_key(bound)] = {"estimate": None, "low": None, "high": None}
                out[fpr_key(bound)]["not_measurable"] = reason
            else:
                out[fpr_key(bound)] = interval.to_dict()
                if bound in self.tie_decides:
                    out[fpr_key(bound)]["ties"] = self.tie_decides[bound]
        out.update(
            n_members=self.n_members,
            n_nonmembers=self.n_nonmembers,
            n_resamples=self.n_resamples,
            confidence=self.confidence,
            seed=self.seed,
        )
        optional = (("n_nan", self.n_nan), ("resamples", self.resamples),
                    ("method", self.method), ("n_units", self.n_units),
                    ("tied_share", self.tied_share),
                    ("n_nonmember_units", self.n_nonmember_units))  # fmt: skip
        out.update({key: value for key, value in optional if value is not None})
        return out


def _check_settings(
    n_resamples: int, confidence: float, seed: int, fpr_bounds: Sequence[float]
) -> tuple[tuple[float, ...], float]:
    """Validate bootstrap settings; return the FPR bounds and confidence as floats."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise ConfigError(f"n_resamples must be an integer >= 1; got {n_resamples!r}.")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be >= 1 (1000 is customary); got {n_resamples}.")
    conf = check_fraction(confidence, name="confidence")
    if not 0.0 < conf < 1.0:
        raise ConfigError(f"confidence must be strictly between 0 and 1, e.g. 0.95; got {conf}.")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}.")
    if isinstance(fpr_bounds, int | float | np.number):
        raise ConfigError(f"fpr_bounds must be a sequence, e.g. (0.01,); got {fpr_bounds!r}.")
    bounds = tuple(check_fraction(b, name="each FPR bound") for b in fpr_bounds)
    if len(set(bounds)) != len(bounds):
        raise ConfigError(f"fpr_bounds must not repeat a value; got {tuple(fpr_bounds)}.")
    return bounds, conf


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


def _percentile_interval(
    estimate: float, values: NDArray[np.float64], confidence: float
) -> Interval:
    alpha = 1.0 - confidence
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate=float(estimate), low=float(low), high=float(high))


def bca_interval(
    estimate: float,
    values: NDArray[np.float64],
    jack: NDArray[np.float64],
    unit_class: NDArray[np.int64],
    confidence: float,
) -> Interval:
    """Efron's (1987) BCa interval from bootstrap ``values`` (NaN left out), leave-one-unit-out
    values ``jack`` and each unit's class (for :func:`acceleration`). The bias correction
    z0 = Phi^-1(share of values below the estimate, ties counting half), kept within
    [1/(2B), 1 - 1/(2B)] so a one-sided bootstrap gives an end quantile, not an infinity."""
    values = values[np.isfinite(values)]
    if not values.size:
        return Interval(float(estimate), math.nan, math.nan)
    normal = NormalDist()
    b = values.size
    below = (np.sum(values < estimate) + 0.5 * np.sum(values == estimate)) / b
    z0 = normal.inv_cdf(min(max(float(below), 0.5 / b), 1 - 0.5 / b))
    a = acceleration(np.asarray(jack, dtype=np.float64), np.asarray(unit_class))
    levels = []
    for tail in ((1 - confidence) / 2, (1 + confidence) / 2):
        z = z0 + normal.inv_cdf(tail)
        levels.append(normal.cdf(z0 + z / (1 - a * z)) if a * z < 1 else float(tail > 0.5))
    low, high = np.quantile(values, levels)
    return Interval(estimate=float(estimate), low=float(low), high=float(high))


def _bootstrap_distribution(
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


def _group_index(groups: ArrayLike, is_member: NDArray[np.bool_]) -> tuple[NDArray[np.int64], int]:
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


def _grouped_distribution(
    is_member: NDArray[np.bool_],
    scores: NDArray[np.float64],
    group: NDArray[np.int64],
    n_groups: int,
    *,
    n_resamples: int,
    seed: int,
    bounds: Sequence[float],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """As :func:`_bootstrap_distribution`, resampling whole groups within each class: a group
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


def bootstrap_metrics(
    labels: ArrayLike,
    scores: ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    fpr_bounds: Sequence[float] = DEFAULT_FPR_BOUNDS,
    groups: ArrayLike | None = None,
    resamples: str | None = None,
    interval: str = "bca",
    min_false_positives: int = MIN_FALSE_POSITIVES,
) -> MetricSummary:
    """AUC and TPR at each FPR bound, with stratified bootstrap intervals (BCa by default).

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,), higher = more likely member. NaN raises ``ValueError``.
        n_resamples: number of bootstrap resamples.
        confidence: two-sided confidence level of the intervals.
        seed: seed of the ``np.random.default_rng`` that draws the resamples.
        fpr_bounds: FPR bounds for TPR@FPR (fractions, e.g. 0.01 for 1 %).
        groups: shape (n,), the group of each sample (e.g. its document id) when samples of a
            group are correlated: whole groups are then resampled within each class (a
            cluster bootstrap). A group must not mix members and non-members.
        resamples: the name of what is resampled, recorded in the summary (default
            "samples", or "groups" with ``groups``), e.g. "texts" or "documents".
        interval: "bca" (Efron 1987; the jackknife leaves out one unit: a sample, or a group
            with ``groups``) or "percentile" (the plain quantiles of the resamples).
        min_false_positives: the resolution rule's k (:mod:`~imprint.metrics.resolution`);
            1 is the rule before issue 37, kept for the calibration suite's OLD row.

    Returns:
        A :class:`MetricSummary`. Point estimates come from the full data (not the bootstrap
        mean). With a class missing, an :class:`UndefinedMetricWarning` is emitted once and
        every estimate and interval is NaN. A TPR@FPR the non-members cannot resolve (fewer
        than ``ceil(4 / t)`` of them) is None, its reason in ``not_measurable``, as in every
        report. A figure whose resamples all gave one value gets a score bound instead
        (``Interval.basis`` says so); ties that decide a TPR threshold are in ``tie_decides``.
    """
    bounds, confidence = _check_settings(n_resamples, confidence, seed, fpr_bounds)
    if interval not in INTERVAL_METHODS:
        raise ConfigError(f"interval must be one of {INTERVAL_METHODS}; got {interval!r}.")
    is_member, score_arr = as_labels_and_scores(labels, scores)
    n_pos = int(is_member.sum())
    n_neg = int(is_member.size - n_pos)
    grouped = None if groups is None else _group_index(groups, is_member)
    neg_units = None if grouped is None else class_units(grouped, is_member)[1]
    name = resamples or ("samples" if grouped is None else "groups")
    rule = min_false_positives  # checked by the resolution rule
    reasons = (
        unresolvable(bounds, n_neg, min_false_positives=rule, nonmember_units=neg_units,
                     unit_name=name)
        if n_pos and n_neg
        else {}
    )  # fmt: skip
    kept = [b for b in bounds if b not in reasons]
    tpr_intervals: dict[float, Interval | None] = {b: None for b in reasons}
    ties: dict[float, str] = {}
    if n_pos == 0 or n_neg == 0:
        warn_undefined("Bootstrap metrics", n_pos, n_neg)
        auc_interval = _NAN_INTERVAL
        tpr_intervals = {b: _NAN_INTERVAL for b in bounds}
    else:
        n_r, sd = int(n_resamples), int(seed)
        if grouped is None:
            auc_boot, tpr_boot = _bootstrap_distribution(
                is_member, score_arr, n_resamples=n_r, seed=sd, bounds=kept
            )
        else:
            auc_boot, tpr_boot = _grouped_distribution(
                is_member, score_arr, *grouped, n_resamples=n_r, seed=sd, bounds=kept
            )
        thresholds, tp, fp, _, _ = confusion_at_thresholds(is_member, score_arr)
        estimates = [roc_auc_score(is_member, score_arr)]
        estimates += [tpr_from_counts(tp, fp, n_pos, n_neg, b) for b in kept]
        boots = [auc_boot, *tpr_boot]
        if interval == "bca":
            unit, n_u = grouped or (np.arange(is_member.size, dtype=np.int64), is_member.size)
            _, levels = np.unique(score_arr, return_inverse=True)
            n_levels = int(levels.max()) + 1
            if grouped is None:  # each row its own unit: closed form, O(n) per bound
                jack_auc, jack_tpr = jackknife_rows(is_member, levels, n_levels, kept)
            else:
                jack_auc, jack_tpr = jackknife_groups(is_member, levels, n_levels, unit, n_u, kept)
            unit_class = np.zeros(n_u, dtype=np.int64)
            unit_class[unit[is_member]] = 1
            jacks = [jack_auc, *jack_tpr]
            found = [
                bca_interval(e, v, j, unit_class, confidence)
                for e, v, j in zip(estimates, boots, jacks, strict=True)
            ]
        else:
            found = [
                _percentile_interval(e, v, confidence)
                for e, v in zip(estimates, boots, strict=True)
            ]
        m_units, n_units = class_units(grouped, is_member)
        trials = [min(m_units, n_units)] + [m_units] * len(kept)
        found = [
            unless_collapsed(iv, v, k, "auc" if i == 0 else "tpr", confidence)
            for i, (iv, v, k) in enumerate(zip(found, boots, trials, strict=True))
        ]
        auc_interval = found[0]
        tpr_intervals.update(zip(kept, found[1:], strict=True))
        notes = {b: tie_note(thresholds, tp, fp, n_pos, n_neg, b) for b in kept}
        ties = {b: note for b, note in notes.items() if note is not None}
    return MetricSummary(
        auc=auc_interval,
        tpr_at_fpr={b: tpr_intervals[b] for b in bounds},
        n_members=n_pos,
        n_nonmembers=n_neg,
        n_resamples=int(n_resamples),
        confidence=confidence,
        seed=int(seed),
        not_measurable=reasons,
        resamples=name,
        n_units=None if grouped is None else grouped[1],
        method=interval,
        tied_share=tied_share(score_arr),
        tie_decides=ties,
        n_nonmember_units=neg_units,
    )
