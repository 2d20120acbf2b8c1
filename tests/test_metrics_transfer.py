"""Tests for imprint.metrics.transfer: thresholds at a target FPR and their transfer."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imprint.errors import ConfigError, DataError
from imprint.metrics import (
    NotMeasurableWarning,
    UndefinedMetricWarning,
    fpr_at_threshold,
    min_nonmembers,
    threshold_at_fpr,
    threshold_transfer,
    tpr_at_fpr,
    transfer_interval,
)

TEN = np.arange(1.0, 11.0)  # non-member scores 1..10


def brute_threshold(nonmembers: np.ndarray, fpr: float) -> float:
    """Smallest threshold among every score, the float just above each score, and -inf."""
    candidates = [-math.inf]
    for s in np.unique(nonmembers):
        candidates += [float(s), float(np.nextafter(s, math.inf))]
    ok = [t for t in candidates if int(np.sum(nonmembers >= t)) / nonmembers.size <= fpr]
    return min(ok)


# ---------------------------------------------------------------- hand-computed cases


def test_threshold_at_fpr_hand_cases() -> None:
    # 10 % of 10 non-members: one false positive allowed; 9 must be excluded.
    t = threshold_at_fpr(TEN, 0.1)
    assert t == np.nextafter(9.0, np.inf)
    assert fpr_at_threshold(TEN, t) == 0.1
    assert threshold_at_fpr(TEN, 0.15) == t  # still only one false positive allowed
    assert threshold_at_fpr(TEN, 0.0) == np.nextafter(10.0, np.inf)
    assert threshold_at_fpr(TEN, 0.5) == np.nextafter(5.0, np.inf)
    assert threshold_at_fpr(TEN, 1.0) == -math.inf


def test_threshold_with_ties_never_exceeds_target() -> None:
    scores = [1.0, 1.0, 1.0, 1.0, 2.0]
    assert fpr_at_threshold(scores, threshold_at_fpr(scores, 0.2)) == 0.2
    assert fpr_at_threshold(scores, threshold_at_fpr(scores, 0.1)) == 0.0
    # 3 false positives allowed, but the 4 tied scores of 1.0 come together: stays at 1/5.
    assert fpr_at_threshold(scores, threshold_at_fpr(scores, 0.79)) == 0.2
    assert fpr_at_threshold(scores, threshold_at_fpr(scores, 0.8)) == 0.2
    assert fpr_at_threshold(scores, threshold_at_fpr(scores, 0.99)) == 0.2


def test_fpr_at_threshold_hand_cases() -> None:
    assert fpr_at_threshold(TEN, 9.0) == 0.2  # score >= threshold counts
    assert fpr_at_threshold(TEN, 9.5) == 0.1
    assert fpr_at_threshold(TEN, math.inf) == 0.0
    assert fpr_at_threshold(TEN, -math.inf) == 1.0


def test_threshold_transfer_hand_case() -> None:
    b = np.arange(5.0, 15.0)  # B is shifted up by 4
    # FPR 0.1 on A -> score > 9 -> B has 10..14 -> 5/10; FPR 0.5 -> score > 5 -> 6..14 -> 9/10.
    assert threshold_transfer(TEN, b, fprs=(0.1, 0.5)) == {0.1: 0.5, 0.5: 0.9}
    # B shifted down: FPR 0.1 on A -> score > 9 on B = -5..4 -> none.
    assert threshold_transfer(TEN, TEN - 10, fprs=(0.1,)) == {0.1: 0.0}


def test_threshold_transfer_defaults_and_self_transfer() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=1000)
    out = threshold_transfer(a, a)
    assert list(out) == [0.01, 0.05, 0.1]
    assert out == {0.01: 0.01, 0.05: 0.05, 0.1: 0.1}  # continuous scores hit targets exactly


# ---------------------------------------------------------------- properties


scores_lists = st.lists(
    st.one_of(st.integers(-3, 3).map(float), st.floats(-1e6, 1e6, allow_nan=False)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(scores_lists, st.floats(0, 1))
def test_threshold_is_smallest_with_fpr_within_target(values, fpr: float) -> None:
    nonmembers = np.array(values)
    t = threshold_at_fpr(nonmembers, fpr)
    assert fpr_at_threshold(nonmembers, t) <= fpr
    assert t == brute_threshold(nonmembers, fpr)
    if t != -math.inf:
        assert fpr_at_threshold(nonmembers, float(np.nextafter(t, -math.inf))) > fpr


@settings(max_examples=200, deadline=None)
@given(scores_lists, scores_lists, st.floats(0, 1))
def test_threshold_gives_tpr_at_fpr(members, nonmembers, fpr: float) -> None:
    """Applying the calibrated threshold to members reproduces tpr_at_fpr exactly."""
    pos, neg = np.array(members), np.array(nonmembers)
    labels = np.r_[np.ones(pos.size, int), np.zeros(neg.size, int)]
    t = threshold_at_fpr(neg, fpr)
    tpr = int(np.sum(pos >= t)) / pos.size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotMeasurableWarning)
        measured = tpr_at_fpr(labels, np.r_[pos, neg], fpr)
    # None: fewer than 1/fpr non-members (the resolution rule), else the same TPR exactly
    assert measured is None if neg.size < min_nonmembers(fpr) else tpr == measured


@settings(max_examples=100, deadline=None)
@given(scores_lists, scores_lists, st.lists(st.floats(0, 1), min_size=1, max_size=4, unique=True))
def test_transfer_is_fpr_at_calibrated_threshold(a, b, fprs) -> None:
    out = threshold_transfer(a, b, fprs=fprs)
    assert out == {f: fpr_at_threshold(b, threshold_at_fpr(a, f)) for f in fprs}


# ---------------------------------------------------------------- degenerate and bad input


def test_empty_sets_warn_and_return_nan() -> None:
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(threshold_at_fpr([], 0.1))
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(fpr_at_threshold([], 0.0))
    with pytest.warns(UndefinedMetricWarning, match="scores_b_nonmembers"):
        out = threshold_transfer(TEN, [], fprs=(0.01, 0.1))
    assert list(out) == [0.01, 0.1] and all(math.isnan(v) for v in out.values())


def test_nan_inputs_raise() -> None:
    with pytest.raises(ValueError, match="1 NaN"):
        threshold_at_fpr([0.1, np.nan], 0.1)
    with pytest.raises(ValueError, match="scores_b_nonmembers contain 2 NaN"):
        threshold_transfer(TEN, [np.nan, np.nan, 1.0])
    with pytest.raises(ConfigError, match="threshold is NaN"):
        fpr_at_threshold(TEN, math.nan)


def test_invalid_fpr_targets() -> None:
    with pytest.raises(ConfigError, match="fpr"):
        threshold_at_fpr(TEN, 1.5)
    with pytest.raises(ConfigError, match="sequence"):
        threshold_transfer(TEN, TEN, fprs=0.1)  # type: ignore[arg-type]


def test_too_many_infinite_nonmembers_raise() -> None:
    with pytest.raises(DataError, match=r"\+inf"):
        threshold_at_fpr([math.inf, math.inf, 0.0], 0.1)
    assert threshold_at_fpr([math.inf, 0.0, 1.0], 0.5) == np.nextafter(1.0, np.inf)


def test_transfer_interval_estimate_resolution_and_width() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(size=300) + 0.5
    interval = transfer_interval(a, b, 0.05, n_resamples=300, seed=1)
    assert interval is not None
    assert interval.estimate == threshold_transfer(a, b, fprs=(0.05,))[0.05]
    assert interval.low <= interval.estimate <= interval.high
    assert interval == transfer_interval(a, b, 0.05, n_resamples=300, seed=1)  # seeded
    with pytest.warns(NotMeasurableWarning, match="at least 400 non-members .4 false positives"):
        assert transfer_interval(a[:50], b, 0.01) is None
