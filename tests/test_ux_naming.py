"""Issue 24, naming: scikit-learn-style metric names, --model-args, one-line CLI errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from imprint import metrics
from imprint.metrics import roc_auc_score


def test_roc_auc_score_is_the_area_from_labels_and_scores():
    labels = np.array([1, 1, 0, 0, 1, 0])
    scores = np.array([0.9, 0.4, 0.5, 0.1, 0.8, 0.3])
    # brute force: P(member outscores non-member), ties 1/2
    pairs = [(m, n) for m in scores[labels == 1] for n in scores[labels == 0]]
    expected = sum(1.0 if m > n else 0.5 if m == n else 0.0 for m, n in pairs) / len(pairs)
    assert roc_auc_score(labels, scores) == pytest.approx(expected)
    assert "roc_auc_score" in metrics.__all__


def test_auc_is_a_deprecated_alias_that_warns():
    labels, scores = [1, 0, 1, 0], [0.7, 0.2, 0.4, 0.5]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = metrics.auc(labels, scores)
    assert value == roc_auc_score(labels, scores)
    assert any(
        issubclass(w.category, FutureWarning) and "roc_auc_score" in str(w.message) for w in caught
    )
