"""build-temporal's blind verdict per bucket: Bonferroni over the buckets of one call, and its
family size under the null (a seeded simulation of buckets with no shift)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from imprint.data.temporal import Bucket, Row
from imprint.diagnostics import blind_suite, temporal_blind
from imprint.diagnostics.temporal_blind import blind_on_buckets, bucket_confidence
from imprint.metrics import bootstrap_metrics
from imprint.metrics.cv_interval import widen_auc

WHEN = datetime(2020, 1, 1, tzinfo=UTC)


def _no_signal(train: list[str], y: np.ndarray, test: list[str], seed: int):
    """A blind classifier that learned nothing: i.i.d. scores, whatever its training fold (the
    worst case for size: no out-of-fold anti-correlation pulls its AUC under 0.5)."""
    rng = np.random.default_rng([seed, len(test), int(test[0].split()[-1])])
    return rng.normal(size=len(test)), {}


@pytest.fixture
def no_signal(monkeypatch):
    """The per-bucket path as build-temporal runs it, with a fast classifier in the forest's
    place (the forest takes about a second a bucket; the simulation needs hundreds)."""
    monkeypatch.setitem(blind_suite.BASELINES, temporal_blind.BASELINE, ("no signal", _no_signal))


def _buckets(rng: np.random.Generator, n_buckets: int, per_side: int) -> list[Bucket]:
    """Buckets of one pool, labels drawn at random: no shift on any bucket."""
    out = []
    for b in range(n_buckets):
        rows = tuple(
            Row(f"{b}-{i}", "sim", WHEN, f"text {int(rng.integers(10**9))}", int(i < per_side))
            for i in range(2 * per_side)
        )
        out.append(Bucket(words=32 * 2**b, rows=rows, available={}))
    return out


def test_each_bucket_is_read_at_the_bonferroni_level(no_signal):
    """Before: every bucket's interval was at 95 %, so with B buckets the warning ('a shift on
    any bucket') held at up to B x 2.5 %."""
    buckets = _buckets(np.random.default_rng(0), 4, 30)
    result = blind_on_buckets(buckets, seed=3, n_bootstrap=200)
    assert bucket_confidence(4) == pytest.approx(0.9875) and bucket_confidence(1) == 0.95
    for bucket in buckets:
        entry = result[bucket.words]
        assert entry["confidence"] == pytest.approx(0.9875)
        assert (entry["correction"], entry["n_buckets"], entry["family_confidence"]) == (
            "bonferroni", 4, 0.95,
        )  # fmt: skip
        assert entry["verdict"]["confidence"] == entry["confidence"]
        # the interval is the one summary path at that level: same resamples, same folds
        (suite,) = blind_suite.run_blind_suite(
            *bucket.texts_labels(), seed=3, n_bootstrap=200,
            baselines=(temporal_blind.BASELINE,), sok_protocol=False,
        )  # fmt: skip
        y = np.asarray(bucket.texts_labels()[1])
        at = bootstrap_metrics(y, suite.scores, n_resamples=200, seed=3, confidence=0.9875,
                               fpr_bounds=())  # fmt: skip
        folds = [np.flatnonzero(suite.folds == f) for f in np.unique(suite.folds)]
        auc = widen_auc(at, y, suite.scores, folds).auc
        assert (entry["low"], entry["high"]) == pytest.approx((auc.low, auc.high))
        plain = suite.summary.auc  # 95 %: never wider than the corrected interval
        assert entry["low"] <= plain.low and entry["high"] >= plain.high


def test_no_shift_on_any_bucket_is_claimed_at_most_at_the_family_level(no_signal):
    """Seeded simulation: 150 data sets of 4 null buckets (30 + 30 texts each). A false
    'shift' on any bucket must stay within the one-sided family level 2.5 % plus 3 binomial
    standard errors (0.063); measured 0 of 150 (the CV hull is conservative as well:
    0 of 1,600 null buckets at 95 % uncorrected, docs/guide/data.md)."""
    n_sets, n_buckets = 150, 4
    false_family = 0
    for r in range(n_sets):
        result = blind_on_buckets(
            _buckets(np.random.default_rng([7, r]), n_buckets, 30), seed=r, n_bootstrap=200
        )
        states = [e["verdict"]["state"] for e in result.values()]
        assert all(e["correction"] == "bonferroni" for e in result.values())
        false_family += any(s == "shift" for s in states)
    size = false_family / n_sets
    assert size <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / n_sets), size
