"""The demo's canary claim: the x1 and x8 groups must be told apart by non-overlapping
intervals, and the default groups are large enough for that to be possible."""

from __future__ import annotations

from typing import Any

import numpy as np

from imprint.game.demo import DEMO_DEFAULTS, _checks, _separation
from imprint.metrics.binary import auc as auc_of
from imprint.metrics.bootstrap import bootstrap_metrics


def auc(estimate: float, low: float, high: float) -> dict[str, float]:
    return {"estimate": estimate, "low": low, "high": high}


def figure(canaries: list[dict[str, float]]) -> dict[str, Any]:
    chance, found = auc(0.5, 0.4, 0.6), auc(0.8, 0.7, 0.9)
    return {
        "blind": chance,
        "blind_strongest": chance,
        "blind_strongest_name": "tfidf",
        "warnings": [],
        "attacks": {"loss": found},
        "groups": {},
        "canary_reps": [1, 3, 8],
        "canary_auc": {"loss": canaries},
    }


def claim(checks: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [c for c in checks if "tells x8 from x1" in c["claim"]]
    return found


def test_an_ordered_but_overlapping_trend_is_not_claimed():
    # the review's figures with 4 canaries per group: the order rises, the intervals overlap
    fig = figure([auc(0.625, 0.188, 1.0), auc(0.812, 0.5, 1.0), auc(1.0, 1.0, 1.0)])
    checks = _checks({"e2": fig}, [2], shift=False)
    trend = [c for c in checks if "rises with canary repetitions" in c["claim"]]
    assert trend and trend[0]["passed"]  # the order alone passes ...
    assert not claim(checks)["passed"]  # ... but x1 and x8 are not told apart
    assert "x1: 0.625 [0.188, 1.000]; x8: 1.000 [1.000, 1.000]" in claim(checks)["value"]


def test_separated_intervals_pass_and_touching_ones_do_not():
    apart = figure([auc(0.6, 0.45, 0.78), auc(0.8, 0.6, 0.95), auc(0.97, 0.9, 1.0)])
    assert claim(_separation(apart, "e2"))["passed"]
    touching = figure([auc(0.6, 0.45, 0.9), auc(0.8, 0.6, 0.95), auc(0.97, 0.9, 1.0)])
    assert not claim(_separation(touching, "e2"))["passed"]
    missing = figure([None, auc(0.8, 0.6, 0.95), auc(0.97, 0.9, 1.0)])  # type: ignore[list-item]
    assert not claim(_separation(missing, "e2"))["passed"]


def test_no_claim_without_two_canary_groups():
    fig = figure([auc(0.97, 0.9, 1.0)])
    fig["canary_reps"] = [8]
    assert _separation(fig, "e2") == []


def weak_group(k: int) -> tuple[np.ndarray, np.ndarray]:
    """k members and k non-members whose AUC is the smallest grid value >= 0.625 (the review's
    x1 figure): members are the non-members' evenly spaced scores shifted up."""
    labels = np.r_[np.ones(k), np.zeros(k)]
    for shift in np.arange(0.5, k, 1.0):
        scores = np.r_[np.arange(k) + shift, np.arange(k, dtype=float)]
        if auc_of(labels, scores) >= 0.625:
            return labels, scores
    raise AssertionError("unreachable")


def upper_end(k: int) -> float:
    labels, scores = weak_group(k)
    return bootstrap_metrics(labels, scores, fpr_bounds=(0.1,)).auc.high


def test_default_canary_groups_can_separate_a_weak_group_from_a_perfect_one():
    """A perfectly detected group's interval is [1, 1]; a once-seen group at AUC ~0.63 must end
    below 1 for the two to separate. At 4 per group (the old default) resamples of 4 vs 4 are
    often perfectly ordered, so its interval reaches 1 and no sizing of the effect can help."""
    k = DEMO_DEFAULTS["canaries_per_repetition"]
    ones = np.r_[np.ones(k), np.zeros(k)]
    assert bootstrap_metrics(ones, ones, fpr_bounds=(0.1,)).auc.low == 1.0
    assert upper_end(4) == 1.0
    assert upper_end(k) < 0.99
