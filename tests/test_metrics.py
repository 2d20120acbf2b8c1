"""Tests for imprint.metrics.binary: brute-force references, properties, hand-computed cases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imprint.errors import ConfigError, DataError
from imprint.metrics import (
    NotMeasurableWarning,
    UndefinedMetricWarning,
    auc,
    confusion_at_thresholds,
    min_nonmembers,
    roc_curve,
    tpr_at_fpr,
)
from imprint.metrics._validation import allowed_false_positives

pytestmark = pytest.mark.filterwarnings("ignore::imprint.metrics.NotMeasurableWarning")

# ---------------------------------------------------------------- brute-force references


def brute_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """O(n^2) Mann-Whitney: every member/non-member pair, ties count 1/2."""
    pos = scores[labels == 1]
    neg = scores[labels == 0]
    twice = 0
    for p in pos:
        for q in neg:
            twice += 2 if p > q else (1 if p == q else 0)
    return twice / (2 * len(pos) * len(neg))


def brute_tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, max_fpr: float) -> float | None:
    """Try every candidate threshold (each distinct score and +inf); None when fewer than
    1/max_fpr non-members (the resolution rule)."""
    pos = scores[labels == 1]
    neg = scores[labels == 0]
    if len(neg) < min_nonmembers(max_fpr):
        return None
    best = 0.0
    for t in [math.inf, *np.unique(scores).tolist()]:
        fpr = int(np.sum(neg >= t)) / len(neg)
        if fpr <= max_fpr:
            best = max(best, int(np.sum(pos >= t)) / len(pos))
    return best


def brute_roc(labels: np.ndarray, scores: np.ndarray) -> tuple[list, list, list]:
    thresholds = [math.inf, *sorted(set(scores.tolist()), reverse=True)]
    pos, neg = scores[labels == 1], scores[labels == 0]
    fpr = [int(np.sum(neg >= t)) / len(neg) for t in thresholds]
    tpr = [int(np.sum(pos >= t)) / len(pos) for t in thresholds]
    return fpr, tpr, thresholds


# ---------------------------------------------------------------- strategies


score_values = st.one_of(
    st.integers(-4, 4).map(float),  # heavy ties
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)


@st.composite
def labelled(draw, *, max_size: int = 40, scores=score_values):
    """(labels, scores) with at least one member and one non-member."""
    n = draw(st.integers(2, max_size))
    labels = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    labels[0], labels[1] = 1, 0
    values = draw(st.lists(scores, min_size=n, max_size=n))
    return np.array(labels), np.array(values, dtype=float)


@st.composite
def labelled_ints(draw, *, max_size: int = 40):
    """Integer-valued scores in a small range (ties), safe for exact monotone transforms."""
    return draw(labelled(max_size=max_size, scores=st.integers(-20, 20).map(float)))


def random_case(rng: np.random.Generator, n: int, n_levels: int | None):
    labels = rng.integers(0, 2, size=n)
    labels[:2] = [1, 0]
    if n_levels is None:
        scores = rng.normal(size=n) + 0.7 * labels
    else:
        scores = rng.integers(0, n_levels, size=n) + labels * rng.integers(0, 2, size=n)
    return labels, scores.astype(float)


CASES = [(n, levels, seed) for n in (2, 7, 50, 300) for levels in (None, 2, 5) for seed in (0, 1)]

# ---------------------------------------------------------------- hand-computed examples


def test_auc_hand_example() -> None:
    assert auc([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == 0.75


def test_auc_perfect_inverse_and_all_tied() -> None:
    assert auc([1, 1, 0, 0], [3, 4, 1, 2]) == 1.0
    assert auc([1, 1, 0, 0], [1, 2, 3, 4]) == 0.0
    assert auc([1, 0, 1, 0], [5, 5, 5, 5]) == 0.5


def test_auc_ties_count_half() -> None:
    # pairs (m, n): (2,1) win, (2,2) tie, (1,1) tie, (1,2) loss -> (1 + .5 + .5) / 4
    assert auc([1, 1, 0, 0], [2, 1, 1, 2]) == 0.5
    # member 3 beats both, member 2 ties one and beats one -> (2 + 1.5) / 4
    assert auc([1, 1, 0, 0], [3, 2, 2, 1]) == 0.875


def test_confusion_hand_example() -> None:
    thresholds, tp, fp, n_pos, n_neg = confusion_at_thresholds(
        [1, 0, 1, 0, 0], [0.8, 0.8, 0.5, 0.2, 0.5]
    )
    np.testing.assert_array_equal(thresholds, [0.8, 0.5, 0.2])
    np.testing.assert_array_equal(tp, [1, 2, 2])
    np.testing.assert_array_equal(fp, [1, 2, 3])
    assert (n_pos, n_neg) == (2, 3)
    assert tp.dtype == np.int64 and fp.dtype == np.int64


def test_roc_hand_example() -> None:
    fpr, tpr, thresholds = roc_curve([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])
    np.testing.assert_array_equal(fpr, [0, 0, 0.5, 0.5, 1])
    np.testing.assert_array_equal(tpr, [0, 0.5, 0.5, 1, 1])
    np.testing.assert_array_equal(thresholds, [np.inf, 0.9, 0.5, 0.4, 0.1])


def test_tpr_at_fpr_hand_example() -> None:
    """The read-out itself, on hand-sized data (so with the resolution rule at one false
    positive: the default needs four allowed, see test_metrics_edge.py)."""
    labels, scores = [1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]
    assert tpr_at_fpr(labels, scores, 0.0) == 0.5
    assert tpr_at_fpr(labels, scores, 0.5, min_false_positives=1) == 1.0
    assert tpr_at_fpr(labels, scores, 1.0, min_false_positives=1) == 1.0
    # no interpolation toward (0.5, 1): with 4 non-members, 0.26 allows one false positive
    labels4, scores4 = [1, 1, 0, 0, 0, 0], [0.9, 0.4, 0.5, 0.45, 0.1, 0.05]
    assert tpr_at_fpr(labels4, scores4, 0.26, min_false_positives=1) == 0.5


def test_tpr_at_fpr_unresolvable_is_none_with_reason() -> None:
    """Two non-members cannot resolve an FPR of 49 %: None and the reason, as reports say."""
    with pytest.warns(NotMeasurableWarning, match="needs at least 9 non-members .4 false "):
        assert tpr_at_fpr([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1], 0.49) is None
    with pytest.warns(NotMeasurableWarning, match="at least 4000"):
        assert tpr_at_fpr([1] * 5 + [0] * 3999, list(range(4004)), 0.001) is None


def test_tpr_at_fpr_tie_straddling_the_bound() -> None:
    # Two non-members tied with the member: that threshold has FPR 2/20 > 0.05 -> TPR 0.
    labels, scores = [1] + [0] * 20, [5, 5, 5] + [1] * 18
    assert tpr_at_fpr(labels, scores, 0.05, min_false_positives=1) == 0.0
    assert tpr_at_fpr(labels, scores, 0.25) == 1.0


def test_tpr_at_fpr_exact_bound_arithmetic() -> None:
    # 29 of 100 non-members above the member: FPR 0.29 is allowed at max_fpr=0.29 exactly.
    labels = [1] + [0] * 100
    scores = [50.0] + [100.0] * 29 + [0.0] * 71
    assert tpr_at_fpr(labels, scores, 0.29) == 1.0
    assert tpr_at_fpr(labels, scores, 0.289) == 0.0


# ---------------------------------------------------------------- brute force on random inputs


@pytest.mark.parametrize(("n", "levels", "seed"), CASES)
def test_matches_brute_force_random(n: int, levels: int | None, seed: int) -> None:
    labels, scores = random_case(np.random.default_rng(seed), n, levels)
    assert auc(labels, scores) == brute_auc(labels, scores)
    for bound in (0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0):
        assert tpr_at_fpr(labels, scores, bound) == brute_tpr_at_fpr(labels, scores, bound)
    fpr, tpr, thresholds = roc_curve(labels, scores)
    ref = brute_roc(labels, scores)
    np.testing.assert_array_equal(fpr, ref[0])
    np.testing.assert_array_equal(tpr, ref[1])
    np.testing.assert_array_equal(thresholds, ref[2])


@settings(max_examples=200, deadline=None)
@given(labelled(), st.floats(0, 1))
def test_matches_brute_force_property(data, bound: float) -> None:
    labels, scores = data
    assert auc(labels, scores) == brute_auc(labels, scores)
    assert tpr_at_fpr(labels, scores, bound) == brute_tpr_at_fpr(labels, scores, bound)


def test_infinite_scores_are_ranked() -> None:
    labels = np.array([1, 1, 0, 0, 1, 0])
    scores = np.array([np.inf, np.inf, np.inf, -np.inf, 0.0, -np.inf])
    assert auc(labels, scores) == brute_auc(labels, scores)
    thresholds, tp, fp, _, _ = confusion_at_thresholds(labels, scores)
    np.testing.assert_array_equal(thresholds, [np.inf, 0.0, -np.inf])
    np.testing.assert_array_equal(tp, [2, 3, 3])
    np.testing.assert_array_equal(fp, [1, 1, 3])


# ---------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(labelled_ints())
def test_auc_invariant_under_monotone_transforms(data) -> None:
    labels, scores = data
    base = auc(labels, scores)
    for transform in (lambda x: 3 * x - 7, np.exp, lambda x: x**3, np.arctan, lambda x: x / 1e3):
        assert auc(labels, transform(scores)) == base


@settings(max_examples=150, deadline=None)
@given(labelled())
def test_swapping_labels_and_negating_scores(data) -> None:
    labels, scores = data
    base = auc(labels, scores)
    assert auc(1 - labels, scores) == pytest.approx(1 - base, abs=1e-12)
    assert auc(labels, -scores) == pytest.approx(1 - base, abs=1e-12)
    assert auc(1 - labels, -scores) == pytest.approx(base, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(labelled())
def test_roc_shape_and_monotonicity(data) -> None:
    labels, scores = data
    fpr, tpr, thresholds = roc_curve(labels, scores)
    assert (fpr[0], tpr[0], thresholds[0]) == (0.0, 0.0, math.inf)
    assert (fpr[-1], tpr[-1]) == (1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert np.all(np.diff(thresholds) < 0)
    # trapezoid over the returned curve agrees with auc()
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert area == pytest.approx(auc(labels, scores), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(labelled(), st.floats(0, 1), st.floats(0, 1))
def test_tpr_at_fpr_monotone_in_bound(data, a: float, b: float) -> None:
    labels, scores = data
    lo, hi = sorted((a, b))
    low, high = tpr_at_fpr(labels, scores, lo), tpr_at_fpr(labels, scores, hi)
    if low is not None and high is not None:  # None: the non-members cannot resolve it
        assert low <= high


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1), st.integers(1, 5000))
def test_allowed_false_positives_is_exact(bound: float, n: int) -> None:
    k = allowed_false_positives(bound, n)
    assert 0 <= k <= n
    assert k == 0 or k / n <= bound
    assert k == n or (k + 1) / n > bound


def test_auc_exact_rational() -> None:
    rng = np.random.default_rng(3)
    labels, scores = random_case(rng, 101, 4)
    pos, neg = scores[labels == 1], scores[labels == 0]
    u = sum(Fraction(int(p > q) * 2 + int(p == q), 2) for p in pos for q in neg)
    assert auc(labels, scores) == float(u / (len(pos) * len(neg)))


# ---------------------------------------------------------------- degenerate and bad input


@pytest.mark.parametrize(("labels", "scores"), [([1, 1, 1], [0.1, 0.2, 0.3]), ([0, 0], [1, 2])])
def test_single_class_warns_and_returns_nan(labels, scores) -> None:
    with pytest.warns(UndefinedMetricWarning, match="both classes"):
        assert math.isnan(auc(labels, scores))
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(tpr_at_fpr(labels, scores, 0.01))
    with pytest.warns(UndefinedMetricWarning):
        fpr, tpr, _ = roc_curve(labels, scores)
    undefined = tpr if labels[0] == 0 else fpr
    assert np.all(np.isnan(undefined))


def test_empty_input_warns_and_returns_nan() -> None:
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(auc([], []))
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(tpr_at_fpr([], [], 0.1))
    thresholds, tp, fp, n_pos, n_neg = confusion_at_thresholds([], [])
    assert thresholds.size == tp.size == fp.size == 0 and n_pos == n_neg == 0


def test_undefined_metric_warning_is_user_warning() -> None:
    assert issubclass(UndefinedMetricWarning, UserWarning)


def test_nan_scores_raise_with_count() -> None:
    with pytest.raises(ValueError, match="2 NaN"):
        auc([1, 0, 1, 0], [0.1, np.nan, np.nan, 0.3])
    with pytest.raises(DataError, match="1 NaN"):
        confusion_at_thresholds([1, 0], [np.nan, 0.3])


@pytest.mark.parametrize("labels", [[1, 2], [-1, 0], [0.5, 1], [np.nan, 1], ["a", "b"]])
def test_labels_outside_zero_one_raise(labels) -> None:
    with pytest.raises(ValueError, match="0 \\(non-member\\) or 1 \\(member\\)"):
        auc(labels, [0.1, 0.2])


def test_accepts_bool_and_float_labels() -> None:
    scores = [0.9, 0.4, 0.5, 0.1]
    assert auc([True, True, False, False], scores) == 0.75
    assert auc(np.array([1.0, 1.0, 0.0, 0.0]), scores) == 0.75


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="same length"):
        auc([1, 0, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="1-D"):
        auc([[1, 0]], [[0.1, 0.2]])
    with pytest.raises(ValueError, match="real numbers"):
        auc([1, 0], ["high", "low"])


@pytest.mark.parametrize("bound", [-0.1, 1.5, math.nan, math.inf])
def test_invalid_fpr_bound(bound: float) -> None:
    with pytest.raises(ConfigError, match="max_fpr"):
        tpr_at_fpr([1, 0], [1, 0], bound)
