"""Paired comparison of two score columns on the same samples: AUC(A) - AUC(B).

Both AUCs are computed on the same samples, so their errors are correlated; comparing their two
separate intervals (or resampling them independently) ignores that and is too wide or too
narrow. Two paired methods:

- **DeLong's test** (DeLong, DeLong & Clarke-Pearson 1988, "Comparing the areas under two or more
  correlated receiver operating characteristic curves", Biometrics 44(3):837-845). Per member i
  the structural component ``V10_i`` is the fraction of non-members it outscores (ties 1/2), per
  non-member j ``V01_j`` the fraction of members that outscore it; AUC = mean V10 = mean V01, and
  the covariance of the AUCs of k columns is ``S10 / m + S01 / n`` (their section 3), S10 and S01
  the k x k sample covariances of the components over m members and n non-members. The
  components come from mid-ranks in O(n log n) (Sun & Xu 2014, IEEE Signal Processing Letters
  21(11):1389-1393). With **clusters** (a document's sequences) the components are summed per
  cluster before their spread is taken (Obuchowski 1997, "Nonparametric analysis of clustered
  ROC curve data", Biometrics 53(2):567-578): ``K/(K-1) * sum_c T_c T_c' / m^2`` per class, T_c
  the cluster's summed centred components; with one sample per cluster this is DeLong's S10/m.
- **Paired bootstrap**: members and non-members (or member and non-member documents) are
  resampled with replacement, class counts kept, and both AUCs are computed on the same resample;
  the **expanded percentile** interval of AUC(A)* - AUC(B)* (Hesterberg 2015, "What teachers
  should know about the bootstrap", The American Statistician 69(4), its expanded percentile
  interval): the percentile interval read at the level whose normal quantile is
  sqrt(K/(K-1)) t_{K-1}, K the smaller class's unit count, so that it widens for the
  bootstrap's narrowness with few units. The plain percentile interval had size 0.076 at alpha
  0.05 on 15 + 15 documents (an outside simulation found 0.075; BCa 0.083); expanded 0.052
  (issue 37, docs/calibration.md). A resample is a vector of multiplicities, one per unit,
  applied to both columns (:func:`resample_weights`); each column's AUC on it is
  :func:`imprint.metrics.bootstrap.weighted_statistics`, the cluster bootstrap's own.

A score column's NaN samples are left out of every pair it is in (the pair is compared on the
samples both columns scored). Higher score = more likely member, as everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import ConfigError, DataError
from imprint.metrics._validation import as_labels_and_scores
from imprint.metrics.bootstrap import Interval, _check_settings
from imprint.metrics.resample import group_index, weighted_statistics

__all__ = [
    "DeLongResult",
    "delong_covariance",
    "delong_test",
    "paired_bootstrap",
    "paired_bootstrap_aucs",
    "expanded_level",
    "paired_interval",
    "resample_weights",
    "structural_components",
    "unit_index",
]

# Upper bound on the elements of one (resamples x units) work array.
_CHUNK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class DeLongResult:
    """DeLong's paired test of ``diff = AUC(A) - AUC(B)``: its standard error, z and the two-sided
    p-value (normal approximation); ``n_member_units`` / ``n_nonmember_units`` are the
    independent units the variance rests on (samples, or documents with clusters)."""

    auc_a: float
    auc_b: float
    diff: float
    se: float
    z: float
    p_value: float
    n_member_units: int
    n_nonmember_units: int

    def interval(self, confidence: float) -> Interval:
        """``diff +- z_{(1+confidence)/2} * se`` (NaN when the variance is undefined)."""
        half = NormalDist().inv_cdf(0.5 + confidence / 2) * self.se
        return Interval(self.diff, self.diff - half, self.diff + half)


def _midranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks 1..n along the last axis, ties given their mean rank; x has shape (k, n)."""
    out = np.empty(x.shape, dtype=np.float64)
    for row in range(x.shape[0]):
        _, inverse, counts = np.unique(x[row], return_inverse=True, return_counts=True)
        below = np.cumsum(counts) - counts
        out[row] = (below + (counts + 1) / 2)[inverse]
    return out


def _as_columns(scores: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(scores, dtype=np.float64)
    return arr[None, :] if arr.ndim == 1 else arr


def structural_components(
    labels: ArrayLike, scores: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """DeLong's structural components of each score column.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        scores: shape (n,) or (k, n): k score columns, higher = more likely member, no NaN.

    Returns:
        ``(v10, v01)`` of shapes (k, m) and (k, n0): per member the fraction of non-members it
        outscores, per non-member the fraction of members that outscore it (ties count 1/2).
    """
    cols = _as_columns(scores)
    is_member = as_labels_and_scores(labels, cols[0])[0]
    for row in cols[1:]:
        as_labels_and_scores(labels, row)  # same length, no NaN
    m, n = int(is_member.sum()), int((~is_member).sum())
    if m == 0 or n == 0:
        raise DataError(f"a paired AUC comparison needs members and non-members; got {m} and {n}")
    pos, neg = cols[:, is_member], cols[:, ~is_member]
    ranks = _midranks(cols)
    v10 = (ranks[:, is_member] - _midranks(pos)) / n
    v01 = 1.0 - (ranks[:, ~is_member] - _midranks(neg)) / m
    return v10, v01


def unit_index(
    labels: ArrayLike, groups: ArrayLike | None
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Each sample's resampling unit and each unit's class.

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        groups: shape (n,) cluster ids (e.g. ``meta["doc_id"]``), or None: each sample is a unit.

    Returns:
        ``(unit_of, unit_is_member)`` of shapes (n,) and (K,). A cluster holding members and
        non-members raises :class:`DataError` (units are resampled within their class).
    """
    lab = np.asarray(labels).astype(bool)
    if groups is None:
        return np.arange(lab.size, dtype=np.int64), lab.copy()
    keys = np.asarray(groups).astype(str)  # ids may be ints or text: one type to sort
    unit_of, n_units = group_index(keys, lab)  # refuses a group holding both classes
    return unit_of, np.bincount(unit_of, weights=lab, minlength=n_units) > 0


def delong_covariance(
    labels: ArrayLike, scores: ArrayLike, *, groups: ArrayLike | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """AUCs of k score columns, shape (k,), and their covariance matrix, shape (k, k).

    Without ``groups`` DeLong et al. (1988) section 3: ``S10 / m + S01 / n``. With ``groups``
    (cluster ids, shape (n,)) Obuchowski (1997): components summed per cluster. A class with
    fewer than two units makes the covariance NaN.
    """
    v10, v01 = structural_components(labels, scores)
    is_member = as_labels_and_scores(labels, _as_columns(scores)[0])[0]
    unit_of, _ = unit_index(is_member, groups)
    theta = v10.mean(axis=1)
    cov = _cluster_spread(v10 - theta[:, None], unit_of[is_member])
    cov += _cluster_spread(v01 - theta[:, None], unit_of[~is_member])
    return theta, cov


def _cluster_spread(
    centred: NDArray[np.float64], unit_of: NDArray[np.int64]
) -> NDArray[np.float64]:
    """``K/(K-1) * sum_c T_c T_c' / N^2``: T_c the per-cluster sums of ``centred`` (k, N)."""
    _, compact = np.unique(unit_of, return_inverse=True)
    n_units, total = int(compact.max()) + 1, centred.shape[1]
    if n_units < 2:
        return np.full((centred.shape[0],) * 2, math.nan)
    sums = np.stack([np.bincount(compact, weights=row, minlength=n_units) for row in centred])
    return (n_units / (n_units - 1)) * (sums @ sums.T) / total**2


def delong_test(
    labels: ArrayLike,
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    groups: ArrayLike | None = None,
) -> DeLongResult:
    """DeLong's paired test of AUC(A) = AUC(B) on the same samples (cluster-robust with
    ``groups``). All inputs have shape (n,); scores must be finite (drop NaN first)."""
    cols = np.stack([np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, np.float64)])
    theta, cov = delong_covariance(labels, cols, groups=groups)
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    diff = float(theta[0] - theta[1])
    se = math.sqrt(max(var, 0.0)) if not math.isnan(var) else math.nan
    if math.isnan(se):
        z, p = math.nan, math.nan
    elif se <= 1e-15:  # identical rankings (or a degenerate split): no variation to test
        z, p = (0.0, 1.0) if abs(diff) <= 1e-15 else (math.copysign(math.inf, diff), 0.0)
    else:
        z = diff / se
        p = math.erfc(abs(z) / math.sqrt(2))
    is_member = np.asarray(labels).astype(bool)
    unit_of, unit_member = unit_index(is_member, groups)
    return DeLongResult(
        float(theta[0]), float(theta[1]), diff, se, z, p,
        int(unit_member.sum()), int((~unit_member).sum()),
    )  # fmt: skip


def resample_weights(
    unit_of: NDArray[np.int64],
    unit_is_member: NDArray[np.bool_],
    n_resamples: int,
    rng: np.random.Generator,
) -> Iterator[NDArray[np.int64]]:
    """Yield chunks of bootstrap multiplicities per sample, shape (c, n), c rows per chunk.

    Units (samples, or clusters) are drawn with replacement within their class, keeping the
    number of member units and of non-member units; a sample's weight is its unit's count. Draw
    order per chunk: member units, then non-member units, both with ``rng.integers``.
    """
    member_units = np.flatnonzero(unit_is_member)
    other_units = np.flatnonzero(~unit_is_member)
    n_units = unit_is_member.size
    chunk = max(1, _CHUNK_ELEMENTS // max(n_units, unit_of.size, 1))
    for start in range(0, n_resamples, chunk):
        c = min(chunk, n_resamples - start)
        offsets = (np.arange(c, dtype=np.int64) * n_units)[:, None]
        counts = np.zeros(c * n_units, dtype=np.int64)
        for units in (member_units, other_units):
            drawn = units[rng.integers(0, units.size, size=(c, units.size))]
            counts += np.bincount((drawn + offsets).ravel(), minlength=c * n_units)
        yield counts.reshape(c, n_units)[:, unit_of]


def paired_bootstrap_aucs(
    labels: ArrayLike,
    scores: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> NDArray[np.float64]:
    """Bootstrap AUCs of k columns on shared resamples, shape (k, n_resamples): row r of every
    column comes from the same resampled units, so differences of rows are paired."""
    cols = _as_columns(scores)
    is_member = as_labels_and_scores(labels, cols[0])[0]
    for row in cols[1:]:
        as_labels_and_scores(labels, row)
    _check_settings(n_resamples, 0.95, seed, ())
    unit_of, unit_member = unit_index(is_member, groups)
    if unit_member.all() or not unit_member.any():
        raise DataError("a paired bootstrap needs member and non-member units")
    parts = []
    rng = np.random.default_rng(seed)
    for w in resample_weights(unit_of, unit_member, int(n_resamples), rng):
        parts.append(np.stack([weighted_statistics(is_member, row, w, ())[0] for row in cols]))
    return np.concatenate(parts, axis=1)


def paired_bootstrap(
    labels: ArrayLike,
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    interval: str = "expanded",
) -> Interval:
    """AUC(A) - AUC(B) with the expanded percentile interval of its paired bootstrap
    (stratified; units are clusters with ``groups``; ``interval="percentile"``: the plain
    quantiles, the interval before issue 37). Inputs shape (n,), finite scores."""
    _, conf = _check_settings(n_resamples, confidence, seed, ())
    cols = np.stack([np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, np.float64)])
    boot = paired_bootstrap_aucs(labels, cols, groups=groups, n_resamples=n_resamples, seed=seed)
    return paired_interval(labels, cols, boot[0] - boot[1], groups, conf, interval)


def expanded_level(confidence: float, n_units: int) -> float:
    """The level at which to read a percentile interval so that it covers at ``confidence``
    with ``n_units`` units: ``2 Phi(sqrt(K/(K-1)) t_{K-1, (1+confidence)/2}) - 1`` (Hesterberg
    2015, the expanded percentile interval); ``confidence`` itself below two units."""
    from scipy.stats import t as student_t

    k = int(n_units)
    if k < 2:
        return confidence
    z = math.sqrt(k / (k - 1)) * float(student_t.ppf((1 + confidence) / 2, k - 1))
    return 2 * NormalDist().cdf(z) - 1


def paired_interval(
    labels: ArrayLike,
    cols: NDArray[np.float64],
    diffs: NDArray[np.float64],
    groups: ArrayLike | None,
    confidence: float,
    interval: str = "expanded",
) -> Interval:
    """AUC(A) - AUC(B) of ``cols`` (shape (2, n)) with the interval read from its paired
    bootstrap differences ``diffs``: "expanded" (default: at :func:`expanded_level` for the
    smaller class's unit count) or "percentile" (at ``confidence``, before issue 37)."""
    if interval not in ("expanded", "percentile"):
        raise ConfigError(f"interval must be 'expanded' or 'percentile'; got {interval!r}.")
    v10, _ = structural_components(labels, cols)
    estimate = float(v10[0].mean() - v10[1].mean())
    level = confidence
    if interval == "expanded":
        _, unit_member = unit_index(np.asarray(labels), groups)
        level = expanded_level(confidence, int(min(unit_member.sum(), (~unit_member).sum())))
    alpha = 1.0 - level
    low, high = np.nanquantile(diffs, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate, float(low), float(high))
