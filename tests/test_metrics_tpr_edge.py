"""TPR intervals at the edge of resolvability (issue 37, item 7): the low end is also read at
k' = floor(t (n+1)) - 1 false positives, the threshold whose expected FPR is <= t."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from imprint.metrics.bca import percentile_interval
from imprint.metrics.binary import confusion_at_thresholds, edge_bound, tpr_from_counts
from imprint.metrics.bootstrap import bootstrap_metrics
from imprint.metrics.resample import bootstrap_distribution


def _hand_set() -> tuple[np.ndarray, np.ndarray]:
    """40 non-members scored 1..40; 40 members, 8 just below each of the top four
    non-members and 8 at the bottom."""
    members = [39.5] * 8 + [38.5] * 8 + [37.5] * 8 + [36.5] * 8 + [0.5] * 8
    scores = np.array(members + list(range(1, 41)), dtype=float)
    labels = np.array([1] * 40 + [0] * 40)
    return labels, scores


def test_edge_bound_by_hand() -> None:
    # t = 0.1, n = 40: k = 4, k' = floor(4.1) - 1 = 3, read at bound 3 / 40
    assert edge_bound(0.1, 40) == 3 / 40
    # n = 39: k = 3 and (k+1)/(n+1) = 0.1 <= t already: nothing to widen
    assert edge_bound(0.1, 39) is None
    # t = 0.001, n = 4000: k = 4, k' = 3
    assert edge_bound(0.001, 4000) == 3 / 4000
    labels, scores = _hand_set()
    _, tp, fp, n_pos, n_neg = confusion_at_thresholds(labels, scores)
    # k = 4 false positives (40..37) let the threshold drop to 36.5: 32 of 40 members
    assert tpr_from_counts(tp, fp, n_pos, n_neg, 0.1) == 0.8
    # k' = 3 (40, 39, 38): the members at 39.5, 38.5, 37.5, 24 of 40
    assert tpr_from_counts(tp, fp, n_pos, n_neg, edge_bound(0.1, 40)) == 0.6


def test_low_end_is_the_lower_of_both_reads() -> None:
    labels, scores = _hand_set()
    is_member = labels.astype(bool)
    _, boots = bootstrap_distribution(
        is_member, scores, n_resamples=300, seed=5, bounds=[0.1, 3 / 40]
    )
    at_t = percentile_interval(0.8, boots[0], 0.95)
    at_edge = percentile_interval(0.6, boots[1], 0.95)
    got = bootstrap_metrics(
        labels, scores, n_resamples=300, seed=5, fpr_bounds=(0.1,), interval="percentile"
    ).tpr_at_fpr[0.1]
    assert got is not None
    assert got.estimate == 0.8
    assert got.high == at_t.high
    assert got.low == min(at_t.low, at_edge.low)
    assert at_edge.low < at_t.low  # the widening does act on this set
    old = bootstrap_metrics(
        labels, scores, n_resamples=300, seed=5, fpr_bounds=(0.1,), interval="percentile",
        widen_at_edge=False,
    ).tpr_at_fpr[0.1]  # fmt: skip
    assert old is not None and old.low == at_t.low and old.high == got.high


def test_grouped_bootstrap_is_widened_too() -> None:
    labels, scores = _hand_set()
    groups = np.arange(labels.size)  # one row per group: same data, cluster path
    new = bootstrap_metrics(labels, scores, n_resamples=200, seed=1, fpr_bounds=(0.1,),
                            groups=groups).tpr_at_fpr[0.1]  # fmt: skip
    old = bootstrap_metrics(labels, scores, n_resamples=200, seed=1, fpr_bounds=(0.1,),
                            groups=groups, widen_at_edge=False).tpr_at_fpr[0.1]  # fmt: skip
    assert new is not None and old is not None
    assert new.low < old.low and new.high == old.high and new.estimate == old.estimate


def test_coverage_improves_at_the_edge() -> None:
    """Seeded Gaussian calibration at the 1 % edge (400 + 400, k = 4, AUC 0.9): the new low
    end is never above the old one, and coverage rises (misses are one-sided, truth below)."""
    t, n, auc = 0.01, 400, 0.9
    nd = NormalDist()
    shift = 2**0.5 * nd.inv_cdf(auc)
    truth = 1 - nd.cdf(nd.inv_cdf(1 - t) - shift)
    rng = np.random.default_rng(2026)
    labels = np.r_[np.ones(n), np.zeros(n)]
    hits_old = hits_new = 0
    reps = 120
    for rep in range(reps):
        scores = np.r_[rng.normal(shift, 1, n), rng.normal(0, 1, n)]
        old = bootstrap_metrics(labels, scores, n_resamples=200, seed=rep, fpr_bounds=(t,),
                                widen_at_edge=False).tpr_at_fpr[t]  # fmt: skip
        new = bootstrap_metrics(labels, scores, n_resamples=200, seed=rep,
                                fpr_bounds=(t,)).tpr_at_fpr[t]  # fmt: skip
        assert old is not None and new is not None
        assert new.low <= old.low and new.high == old.high
        hits_old += old.low <= truth <= old.high
        hits_new += new.low <= truth <= new.high
    assert hits_new > hits_old  # 109 -> 112 of 120 with this seed
    assert hits_new / reps >= 0.92
