"""Paired AUC comparisons against brute-force references: DeLong's structural components and
covariance from the pairwise kernel, the cluster (document) variance from a loop over clusters,
and the paired bootstrap against a slow loop over the same resamples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from imprint.errors import DataError
from imprint.metrics import auc
from imprint.metrics.paired import (
    delong_covariance,
    delong_test,
    paired_bootstrap,
    paired_bootstrap_aucs,
    resample_weights,
    structural_components,
    unit_index,
)


def data(seed: int = 0, n: int = 40, ties: bool = True):
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 3 == 0).astype(int)  # imbalanced: 14 members, 26 non-members
    a = rng.normal(size=n) + 0.8 * labels
    b = 0.6 * a + rng.normal(size=n)
    if ties:
        a, b = np.round(a, 1), np.round(b, 1)
    return labels, a, b


def kernel_components(labels, scores):
    """V10, V01 straight from DeLong et al. (1988): psi(x, y) = 1 if x > y, 1/2 if equal."""
    x, y = scores[labels == 1], scores[labels == 0]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    return psi.mean(axis=1), psi.mean(axis=0)


def test_structural_components_equal_the_kernel_means():
    labels, a, b = data()
    v10, v01 = structural_components(labels, np.stack([a, b]))
    for row, s in enumerate((a, b)):
        k10, k01 = kernel_components(labels, s)
        np.testing.assert_allclose(v10[row], k10, atol=1e-12)
        np.testing.assert_allclose(v01[row], k01, atol=1e-12)
        assert v10[row].mean() == pytest.approx(auc(labels, s), abs=1e-12)


def test_delong_covariance_is_s10_over_m_plus_s01_over_n():
    labels, a, b = data(1)
    theta, cov = delong_covariance(labels, np.stack([a, b]))
    k = [kernel_components(labels, s) for s in (a, b)]
    s10 = np.cov(np.stack([k[0][0], k[1][0]]))  # (k x k), denominator m - 1
    s01 = np.cov(np.stack([k[0][1], k[1][1]]))
    m, n = int(labels.sum()), int((1 - labels).sum())
    np.testing.assert_allclose(cov, s10 / m + s01 / n, atol=1e-14)
    np.testing.assert_allclose(theta, [auc(labels, a), auc(labels, b)], atol=1e-12)
    test = delong_test(labels, a, b)
    var = s10[0, 0] / m + s01[0, 0] / n + s10[1, 1] / m + s01[1, 1] / n
    var -= 2 * (s10[0, 1] / m + s01[0, 1] / n)
    assert test.se == pytest.approx(math.sqrt(var), rel=1e-10)
    assert test.p_value == pytest.approx(math.erfc(abs(test.diff / test.se) / math.sqrt(2)))


def test_cluster_variance_equals_a_loop_over_documents_and_delong_for_singletons():
    labels, a, b = data(2, n=60)
    docs = np.array([f"d{i // 3}-{lab}" for i, lab in enumerate(labels)])  # label-pure clusters
    _, cov = delong_covariance(labels, np.stack([a, b]), groups=docs)
    ref = np.zeros((2, 2))
    for cls, denom in ((1, labels.sum()), (0, (1 - labels).sum())):
        comps = [kernel_components(labels, s)[0 if cls else 1] for s in (a, b)]
        comp = np.stack(comps)
        centred = comp - comp.mean(axis=1, keepdims=True)
        ids = docs[labels == cls]
        sums = np.stack([centred[:, ids == d].sum(axis=1) for d in np.unique(ids)], axis=1)
        big_k = sums.shape[1]
        ref += big_k / (big_k - 1) * sums @ sums.T / denom**2
    np.testing.assert_allclose(cov, ref, atol=1e-14)
    singletons = np.arange(labels.size)
    np.testing.assert_allclose(
        delong_covariance(labels, np.stack([a, b]), groups=singletons)[1],
        delong_covariance(labels, np.stack([a, b]))[1],
        atol=1e-15,
    )
    assert delong_test(labels, a, b, groups=docs).n_member_units == len(set(docs[labels == 1]))


def test_paired_bootstrap_equals_a_slow_loop_over_the_same_resamples():
    labels, a, b = data(3)
    docs = np.array([f"d{i // 2}-{lab}" for i, lab in enumerate(labels)])
    for groups in (None, docs):
        fast = paired_bootstrap_aucs(
            labels, np.stack([a, b]), groups=groups, n_resamples=50, seed=7
        )
        unit_of, unit_member = unit_index(labels, groups)
        rng = np.random.default_rng(7)
        w = np.concatenate(list(resample_weights(unit_of, unit_member, 50, rng)))
        for r in range(50):
            idx = np.repeat(np.arange(labels.size), w[r].astype(int))
            assert fast[0, r] == pytest.approx(auc(labels[idx], a[idx]), abs=1e-12)
            assert fast[1, r] == pytest.approx(auc(labels[idx], b[idx]), abs=1e-12)
        # class counts of units are kept in every resample
        member_units = unit_member.sum()
        per_unit = np.zeros((50, unit_member.size))
        for u in range(unit_member.size):
            per_unit[:, u] = w[:, np.flatnonzero(unit_of == u)[0]]
        assert (per_unit[:, unit_member].sum(axis=1) == member_units).all()


def test_paired_interval_contains_the_estimate_flips_sign_and_is_seeded():
    labels, a, b = data(4, ties=False)
    ab = paired_bootstrap(labels, a, b, n_resamples=300, seed=1)
    ba = paired_bootstrap(labels, b, a, n_resamples=300, seed=1)
    assert ab.low <= ab.estimate <= ab.high
    assert ab.estimate == pytest.approx(auc(labels, a) - auc(labels, b))
    assert (ba.estimate, ba.low, ba.high) == pytest.approx((-ab.estimate, -ab.high, -ab.low))
    assert paired_bootstrap(labels, a, b, n_resamples=300, seed=1) == ab
    # invariant under monotone transforms of either column
    moved = paired_bootstrap(labels, np.exp(a), 3 * b - 1, n_resamples=300, seed=1)
    assert moved == pytest.approx(ab)


def test_identical_columns_have_no_difference_and_p_one():
    labels, a, _ = data(5)
    t = delong_test(labels, a, a.copy())
    assert (t.diff, t.se, t.p_value) == (0.0, 0.0, 1.0)
    interval = paired_bootstrap(labels, a, a, n_resamples=100)
    assert (interval.low, interval.high) == (0.0, 0.0)


def test_bad_input_teaches():
    labels, a, b = data(6)
    mixed = np.zeros(labels.size, dtype=int)  # one document holding both classes
    with pytest.raises(DataError, match="both members and non-members"):
        delong_test(labels, a, b, groups=mixed)
    with pytest.raises(DataError, match="NaN"):
        delong_test(labels, np.where(labels == 1, np.nan, a), b)
    with pytest.raises(DataError, match="members and non-members"):
        delong_test(np.ones(labels.size), a, b)
    one_doc = np.where(labels == 1, "m", np.arange(labels.size).astype(str))
    assert math.isnan(delong_test(labels, a, b, groups=one_doc).se)  # one member unit


def test_compare_scores_all_pairs_bonferroni_and_verdicts():
    from imprint.metrics.pairwise import compare_scores

    rng = np.random.default_rng(8)
    labels = np.repeat([1, 0], 150)
    strong = rng.normal(size=300) + 1.5 * labels
    weak = rng.normal(size=300) + 0.2 * labels
    twin = weak + 0.01 * rng.normal(size=300)  # the same attack, nearly
    cols = {"strong": strong, "weak": weak, "twin": twin}
    result = compare_scores(labels, cols, n_resamples=200, seed=3)
    assert result.n_pairs == 3 and [(p.a, p.b) for p in result.pairs] == [
        ("strong", "weak"), ("strong", "twin"), ("weak", "twin")
    ]  # fmt: skip
    sw = result.between("strong", "weak")
    assert sw.verdict == "a" and sw.better == "strong" and sw.p_adjusted == min(1, 3 * sw.p_value)
    assert result.between("weak", "strong").better == "strong"  # flipped, same verdict
    assert result.between("weak", "twin").verdict == "none"
    # the Bonferroni interval is the (1 - 0.05 / 3) DeLong interval, wider than the nominal one
    t = delong_test(labels, strong, weak)
    assert sw.adjusted == pytest.approx(t.interval(1 - 0.05 / 3))
    assert sw.adjusted.low < sw.interval.low and sw.bootstrap.low > 0
    d = result.to_dict()
    assert d["n_pairs"] == 3 and d["correction"] == "bonferroni" and d["resamples"] == "samples"
    assert "3 pair(s)" in d["description"]


def test_compare_scores_leaves_out_nan_per_pair_and_names_documents():
    from imprint.metrics.pairwise import compare_scores

    labels, a, b = data(9, n=60)
    c = np.where(np.arange(60) < 10, np.nan, a + 0.1)
    docs = np.array([f"d{i // 2}-{lab}" for i, lab in enumerate(labels)])
    result = compare_scores(labels, {"a": a, "b": b, "c": c}, groups=docs, n_resamples=100)
    ab, ac = result.between("a", "b"), result.between("a", "c")
    assert ab.n_members + ab.n_nonmembers == 60 and ac.n_members + ac.n_nonmembers == 50
    assert result.resamples == "documents" and ab.n_member_units == len(set(docs[labels == 1]))
    assert ab.diff == pytest.approx(delong_test(labels, a, b, groups=docs).diff)
    ok = ~np.isnan(c)
    ref = paired_bootstrap(labels[ok], a[ok], c[ok], groups=docs[ok], n_resamples=100)
    assert (ac.bootstrap.low, ac.bootstrap.high) == pytest.approx((ref.low, ref.high))
    with pytest.raises(Exception, match="unknown score column"):
        compare_scores(labels, {"a": a}, pairs=[("a", "zz")])
