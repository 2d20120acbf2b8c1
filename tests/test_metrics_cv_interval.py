"""Tests for imprint.metrics.cv_interval: the corrected cross-validation t interval (Nadeau &
Bengio 2003) and its hull with the bootstrap interval of out-of-fold scores."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from imprint.calibration.baselines import null_texts
from imprint.diagnostics.blind_suite import run_blind_suite
from imprint.metrics import auc, bootstrap_metrics
from imprint.metrics.cv_interval import (
    CV_METHOD,
    corrected_cv_interval,
    fold_aucs,
    widen_auc,
)


def test_fold_aucs_are_within_fold_aucs() -> None:
    rng = np.random.default_rng(0)
    y = np.tile([1, 0], 20)
    s = rng.normal(size=40) + y
    folds = [np.arange(k, 40, 5) for k in range(5)]
    values, ratio = fold_aucs(y, s, folds)
    assert values.tolist() == [auc(y[f], s[f]) for f in folds]
    assert ratio == 8 / 32


def test_corrected_interval_matches_formula() -> None:
    values = np.array([0.4, 0.55, 0.6, 0.45, 0.5])
    got = corrected_cv_interval(0.5, values, 0.25, 0.95)
    half = stats.t.ppf(0.975, 4) * math.sqrt((1 / 5 + 0.25) * values.var(ddof=1))
    assert (got.low, got.high) == (0.5 - half, 0.5 + half)
    assert math.isnan(corrected_cv_interval(0.5, values[:1], 0.25, 0.95).low)


def test_widen_never_narrows_and_names_method() -> None:
    rng = np.random.default_rng(1)
    y = np.tile([1, 0], 30)
    s = rng.normal(size=60)
    summary = bootstrap_metrics(y, s, n_resamples=200, fpr_bounds=())
    wide = widen_auc(summary, y, s, [np.arange(k, 60, 5) for k in range(5)])
    assert wide.auc.low <= summary.auc.low and wide.auc.high >= summary.auc.high
    assert wide.auc.estimate == summary.auc.estimate and wide.method == CV_METHOD


def test_blind_out_of_fold_interval_covers_under_the_null() -> None:
    """Greedy n-grams on null texts: the pooled out-of-fold bootstrap interval alone covered
    0.5 in 0.902 of 400 sets (BCa; 0.890 percentile); widened it must cover at 95 % within
    3 binomial s.e. of 80 sets."""
    hits, bootstrap_hits = [], []
    for i in range(80):
        rng = np.random.default_rng([5, i])
        texts = null_texts(rng, 60)
        labels = rng.permutation(np.arange(60) % 2).tolist()
        (res,) = run_blind_suite(
            texts, labels, seed=i, n_bootstrap=100, baselines=["greedy_ngrams"], sok_protocol=False
        )
        assert res.summary is not None and res.summary.method == CV_METHOD
        hits.append(res.summary.auc.low <= 0.5 <= res.summary.auc.high)
        alone = bootstrap_metrics(labels, res.scores, n_resamples=100, seed=i, fpr_bounds=())
        bootstrap_hits.append(alone.auc.low <= 0.5 <= alone.auc.high)
    assert np.mean(hits) >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 80)
    assert sum(hits) > sum(bootstrap_hits)  # the bootstrap alone misses more often
