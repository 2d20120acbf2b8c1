"""Review item 13: a run folder evaluated before curves were recorded has its ROC bands re-drawn
resampling what its table resampled: whole documents in a ``--unit document`` run (they were
re-drawn resampling texts while the caption called them the table's intervals), and no curve at
all when the documents cannot be recovered."""

from __future__ import annotations

import numpy as np

from imprint.data import Sample
from imprint.documents.split import DOC_ID
from imprint.evaluation.results import RunMetrics
from imprint.metrics.bootstrap import Interval, MetricSummary
from imprint.report.writer import _curves


def _metrics(unit: str) -> tuple[RunMetrics, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    labels = np.array([(i // 4) % 2 for i in range(40)])  # a document (4 texts) has one label
    scores = {"loss": rng.normal(size=40) + labels}
    nan = Interval(float("nan"), float("nan"), float("nan"))
    # a row as an older folder's metrics.json gives it: no curve recorded beside it
    row = MetricSummary(auc=nan, tpr_at_fpr={}, n_members=20, n_nonmembers=20, n_resamples=50,
                        confidence=0.95, seed=0, resamples=unit)  # fmt: skip
    return RunMetrics(attacks={"loss": row}), labels, scores


def test_a_documents_run_is_redrawn_resampling_documents():
    metrics, labels, scores = _metrics("documents")
    samples = [Sample(f"s{i}", f"t{i}", int(labels[i]), meta={DOC_ID: f"d{i // 4}"})
               for i in range(40)]  # fmt: skip
    curves = _curves(labels, scores, metrics, samples)
    assert curves["loss"].resamples == "documents"


def test_no_band_is_drawn_when_the_documents_cannot_be_recovered():
    metrics, labels, scores = _metrics("documents")
    samples = [Sample(f"s{i}", f"t{i}", int(labels[i])) for i in range(40)]
    assert _curves(labels, scores, metrics, samples) == {}


def test_a_texts_run_is_still_redrawn_resampling_texts():
    metrics, labels, scores = _metrics("texts")
    samples = [Sample(f"s{i}", f"t{i}", int(labels[i])) for i in range(40)]
    assert _curves(labels, scores, metrics, samples)["loss"].resamples == "texts"
