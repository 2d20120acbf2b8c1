"""The demo's canary claim: x8 member canaries must score above x1 ones by an exact rank test
whose size is checked here; and the default groups' sizing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from imprint.game.demo import _checks, _separation, canary_member_scores


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
    (found,) = [c for c in checks if "scores x8 canaries above x1" in c["claim"]]
    return found


def with_members(fig: dict[str, Any], x1: list[float], x8: list[float]) -> dict[str, Any]:
    return {**fig, "canary_member_scores": {1: x1, 8: x8}}


def test_the_repetition_claim_is_an_exact_rank_test_of_member_canaries():
    # the measured demo (format 5): x1 detected at 0.812 [0.578, 1.0], so the detection
    # intervals touch x8's [1, 1]; yet every x8 member canary scores above every x1 one
    fig = figure([auc(0.812, 0.578, 1.0), auc(1.0, 1.0, 1.0), auc(1.0, 1.0, 1.0)])
    x1 = [-11.51, -11.09, -11.02, -10.88, -10.76, -10.63, -10.45, -10.42]
    x8 = [-9.14, -8.95, -8.82, -8.67, -8.39, -8.32, -8.28, -8.05]
    found = claim(_checks({"e2": with_members(fig, x1, x8)}, [2], shift=False))
    assert found["passed"]
    # complete separation of 8 vs 8: p = 1 / C(16, 8), by hand
    assert f"p = {1 / math.comb(16, 8):.2g}" in found["value"]
    assert "P(x8 > x1) = 1.000" in found["value"] and "x1: 0.812 [0.578, 1.000]" in found["value"]


def test_interleaved_groups_do_not_pass_and_missing_scores_fail():
    fig = figure([auc(0.6, 0.45, 0.78), auc(0.8, 0.6, 0.95), auc(0.97, 0.9, 1.0)])
    mixed = with_members(fig, [1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0])
    assert not claim(_separation(mixed, "e2"))["passed"]
    reversed_ = with_members(fig, [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0])
    assert not claim(_separation(reversed_, "e2"))["passed"]
    found = claim(_separation(fig, "e2"))  # no member scores: no claim can pass
    assert not found["passed"] and "missing" in found["value"]


def test_the_rank_test_holds_its_size_under_the_null():
    """Groups that differ in nothing: the claim passes in at most 5 % of 2,000 draws (+ 3 s.e.)."""
    rng = np.random.default_rng(0)
    fig = figure([auc(0.6, 0.45, 0.78), auc(0.8, 0.6, 0.95), auc(0.97, 0.9, 1.0)])
    n, passed = 2000, 0
    for _ in range(n):
        x1, x8 = rng.normal(size=8).tolist(), rng.normal(size=8).tolist()
        passed += claim(_separation(with_members(fig, x1, x8), "e2"))["passed"]
    assert passed / n <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_canary_member_scores_keeps_members_by_repetitions():
    from imprint.data.sample import Sample

    samples = [
        Sample("a", "t", 1, {"group": "canary x1"}),
        Sample("b", "t", 0, {"group": "canary x1"}),
        Sample("c", "t", 1, {"group": "canary x8"}),
        Sample("d", "t", 1, {"group": "natural"}),
        Sample("e", "t", 1, {"group": "canary x8"}),
    ]
    got = canary_member_scores(samples, [1.0, 2.0, 3.0, 4.0, float("nan")])
    assert got == {1: [1.0], 8: [3.0]}


def test_no_claim_without_two_canary_groups():
    fig = figure([auc(0.97, 0.9, 1.0)])
    fig["canary_reps"] = [8]
    assert _separation(fig, "e2") == []
