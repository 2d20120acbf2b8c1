"""Meeus et al.'s document features and forest against the authors' code
(computationalprivacy/document-level-membership-inference: ``simple_agg_feat_extraction``,
``histogram_feats``, ``train_RandomForest``), each value computed here by hand."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.documents import MeeusSettings, aggregate_features, histogram_features, meeus_scores
from imprint.documents.meeus import DEVIATIONS, _edges, _features, feature_names
from imprint.errors import ConfigError


def test_aggregates_are_the_authors_simple_agg_with_count() -> None:
    v = np.array([3.0, -1.0, 0.5, 2.0, 7.0])
    # the authors' columns: mean, min, max, std, count, then the nine percentiles
    theirs = [v.mean(), v.min(), v.max(), v.std(), len(v)]
    theirs += [np.percentile(v, q) for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)]
    ours = dict(zip(feature_names("agg"), aggregate_features(v), strict=True))
    order = ["mean", "min", "max", "std", "count", "p1", "p5", "p10", "p25", "p50", "p75"]
    assert [ours[k] for k in [*order, "p90", "p95", "p99"]] == pytest.approx(theirs)
    assert ours["count"] == 5.0


def test_histogram_spans_the_training_range_in_1000_bins() -> None:
    train = np.array([0.0, 2.5, 10.0])
    edges = _edges(train, 1000)
    np.testing.assert_allclose(edges, np.histogram(train, bins=1000)[1])  # min to max
    doc = np.array([0.0, 0.004, 5.0, 9.995, 10.0])
    shares = histogram_features(doc, edges)
    # np.histogram's density times the bin width (0.01) is the share per bin
    density = np.histogram(doc, edges, density=True)[0]
    np.testing.assert_allclose(shares, density * 0.01)
    assert shares[0] == 0.4 and shares[500] == 0.2 and shares[999] == 0.4
    # a test value outside the training range counts in the end bin (the authors drop it)
    assert histogram_features(np.array([-3.0, 12.0]), edges)[[0, 999]].tolist() == [0.5, 0.5]


def test_feature_sets_are_one_or_the_other_by_default() -> None:
    assert MeeusSettings() == MeeusSettings("agg", 1000, 500, 5, 3)  # the authors' defaults
    assert len(feature_names("agg")) == 14 and len(feature_names("hist")) == 1000
    assert len(feature_names("both", 10)) == 24
    values = [np.array([0.0, 1.0, 2.0]), np.array([4.0])]
    edges = _edges(np.concatenate(values), 4)
    got = {f: _features(values, np.array([0, 1]), edges, f).shape for f in ("agg", "hist", "both")}
    assert got == {"agg": (2, 14), "hist": (2, 4), "both": (2, 18)}
    for bad in ({"features": "all"}, {"n_bins": 0}, {"max_depth": 0}, {"min_leaf": True}):
        with pytest.raises(ConfigError, match="Meeus"):
            MeeusSettings(**bad)  # type: ignore[arg-type]
    assert len(DEVIATIONS) >= 3


def test_the_forest_is_the_authors_and_its_settings_matter(monkeypatch) -> None:
    import sklearn.ensemble

    made: list[dict] = []

    class Recording(sklearn.ensemble.RandomForestClassifier):
        def __init__(self, **kwargs) -> None:  # type: ignore[no-untyped-def]
            made.append(kwargs)
            super().__init__(**kwargs)

    rng = np.random.default_rng(0)
    n_docs = 24
    doc_labels = np.arange(n_docs) % 2
    doc_index = np.repeat(np.arange(n_docs), 3)
    seq_values = [rng.normal(size=30) * (1.6 if doc_labels[d] else 1.0) for d in doc_index]
    kw = {"n_splits": 3, "seed": 0}
    with monkeypatch.context() as patch:
        patch.setattr(sklearn.ensemble, "RandomForestClassifier", Recording)
        default = meeus_scores(seq_values, doc_index, doc_labels, **kw)  # type: ignore[arg-type]
    want = {"n_estimators": 500, "max_depth": 5, "min_samples_leaf": 3}
    assert len(made) == 3 and all(m.items() >= want.items() for m in made)
    # depth 5 and 3 documents per leaf: a forest of stumps-to-depth-5 gives other probabilities
    # than unlimited trees with single-document leaves
    deep = MeeusSettings(max_depth=None, min_leaf=1)
    other = meeus_scores(seq_values, doc_index, doc_labels, settings=deep, **kw)  # type: ignore[arg-type]
    assert default.shape == (n_docs,) and not np.allclose(default, other)
    hist = MeeusSettings(features="hist", n_bins=50, n_trees=50)
    assert np.isfinite(meeus_scores(seq_values, doc_index, doc_labels, settings=hist, **kw)).all()  # type: ignore[arg-type]
