"""DUCI's interval is cut to [0, 1]; an interval that lies wholly outside [0, 1] must not be cut to
one point that reads as certainty (issue 37: no false certainty)."""

from __future__ import annotations

import numpy as np

from imprint.cli.duci import describe
from imprint.documents.duci import duci


def _target_beyond_references(seed: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every document trained on by a target that learnt far more than its 8 references (their
    member shift 1.0, the target's 4.0): the debiased estimate lies far above 1."""
    rng = np.random.default_rng(seed)
    base, refs, member = _references(rng, 200, 8)
    target = base + 4.0 + rng.normal(0, 0.7, base.size)
    return target, refs, member


def _references(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, ...]:
    """(document difficulty, k reference models' scores, their membership): references in
    complementary pairs, each trained on a random half, member shift 1.0."""
    base = rng.normal(0, 1, n)
    member = np.zeros((k, n), dtype=int)
    for j in range(0, k, 2):
        half = rng.permutation(n) < n // 2
        member[j], member[j + 1] = half, ~half
    refs = np.stack([base + 1.0 * member[j] + rng.normal(0, 0.7, n) for j in range(k)])
    return base, refs, member


def test_interval_wholly_above_one_is_flagged_not_shown_as_certain() -> None:
    target, refs, member = _target_beyond_references()
    result = duci(target, refs, member, n_bootstrap=300, seed=0)
    assert result.estimate > 1.2
    assert result.interval == (1.0, 1.0)  # cut to the range, where the truth lies
    assert not result.reliable
    assert result.uncut_interval[0] > 1.0
    lines = "\n".join(describe(result, 8, 100))
    assert "lies wholly above 100 %" in lines
    assert "reference models do not calibrate" in lines


def test_interval_inside_range_keeps_its_uncut_limits() -> None:
    rng = np.random.default_rng(1)
    n, k = 60, 4
    base, refs, member = _references(rng, n, k)
    trained = rng.permutation(n) < n // 2
    result = duci(base + 1.0 * trained + rng.normal(0, 0.7, n), refs, member, n_bootstrap=300)
    lo, hi = result.uncut_interval
    assert lo <= 1.0 and hi >= 0.0
    assert result.interval == (max(lo, 0.0), min(hi, 1.0))
    assert "lies wholly" not in "\n".join(describe(result, k, 100))
