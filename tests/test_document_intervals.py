"""Issue 20: in a ``--unit document`` run every interval resamples documents (the main Attacks
table too), and every interval says in metrics.json and the report what it resamples."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from imprint.data import Sample
from imprint.documents.split import DOC_ID
from imprint.evaluation.evaluate import evaluate_scores
from imprint.evaluation.results import RunMetrics
from imprint.metrics import bootstrap_metrics
from imprint.report.render import resampling


def _sequences(n_docs: int = 24, per_doc: int = 6):
    rng = np.random.default_rng(0)
    docs = np.repeat(np.arange(n_docs), per_doc)
    labels = (docs % 2).astype(int)
    scores = rng.normal(size=n_docs)[docs] + rng.normal(size=docs.size) + 0.7 * labels
    samples = [
        Sample(id=f"d{d}-{i}", text=f"text {i}", label=int(labels[i]), meta={DOC_ID: f"d{d}"})
        for i, d in enumerate(docs)
    ]
    return samples, {"loss": scores}, labels, docs


def _config(documents: object | None) -> SimpleNamespace:
    return SimpleNamespace(
        n_bootstrap=300, seed=4, blind=False, breakdown=None, documents=documents
    )


def test_document_run_attacks_table_resamples_documents() -> None:
    samples, scores, labels, _ = _sequences()
    metrics = evaluate_scores(samples, scores, config=_config(documents=object()))
    column = metrics.attacks["loss"]
    names = np.array([s.meta[DOC_ID] for s in samples])
    grouped = bootstrap_metrics(labels, scores["loss"], n_resamples=300, seed=4, groups=names)
    assert column.resamples == "documents"
    assert (column.auc.low, column.auc.high) == (grouped.auc.low, grouped.auc.high)
    plain = bootstrap_metrics(labels, scores["loss"], n_resamples=300, seed=4)
    assert (column.auc.low, column.auc.high) != (plain.auc.low, plain.auc.high)
    out = metrics.to_dict()
    assert out["attacks"]["loss"]["resamples"] == "documents"
    again = RunMetrics.from_dict(out)
    assert again.attacks["loss"].resamples == "documents"
    assert resampling(metrics).startswith("resampling documents")


def test_sequence_run_resamples_texts() -> None:
    samples, scores, labels, _ = _sequences()
    metrics = evaluate_scores(samples, scores, config=_config(documents=None))
    column = metrics.attacks["loss"]
    plain = bootstrap_metrics(labels, scores["loss"], n_resamples=300, seed=4)
    assert column.resamples == "texts"
    assert (column.auc.low, column.auc.high) == (plain.auc.low, plain.auc.high)
    assert resampling(metrics) == "resampling texts"


def test_breakdown_in_a_document_run_resamples_documents() -> None:
    samples, scores, labels, docs = _sequences()
    samples = [
        Sample(s.id, s.text, s.label, {**s.meta, "half": str(int(docs[i]) < 12)})
        for i, s in enumerate(samples)
    ]
    config = _config(documents=object())
    config.breakdown = "half"
    metrics = evaluate_scores(samples, scores, config=config)
    assert metrics.breakdown is not None
    for group in metrics.breakdown.groups.values():
        assert group["loss"].resamples == "documents"


def test_shi_fold_summary_is_the_pair_weighted_mean_of_fold_aucs() -> None:
    from imprint.documents.shi import shi_fold_scores, shi_fold_summary
    from imprint.metrics import auc

    _, scores, _, docs = _sequences(n_docs=30)
    doc_labels = np.arange(30) % 2
    folds = shi_fold_scores(scores["loss"], docs, doc_labels, n_splits=3, seed=1)
    pairs = np.array([f.labels.sum() * (f.labels.size - f.labels.sum()) for f in folds])
    want = np.dot(pairs / pairs.sum(), [auc(f.labels, f.scores) for f in folds])
    got = shi_fold_summary(scores["loss"], docs, doc_labels, n_splits=3, seed=1, n_resamples=200)
    assert got.auc.estimate == pytest.approx(want)
    assert got.auc.low <= got.auc.estimate <= got.auc.high
    assert got.resamples == "documents" and got.n_members + got.n_nonmembers == 30
    # 5 non-member documents per fold cannot resolve 10 %: None and a reason naming the folds
    assert got.tpr_at_fpr[0.1] is None and "per fold" in got.not_measurable[0.1]


def test_document_rows_state_that_they_resample_documents() -> None:
    from imprint.documents import document_summary
    from imprint.evaluation.columns import as_column
    from imprint.evaluation.document_results import DocumentRow
    from imprint.metrics import Interval

    labels, scores = np.array([1, 0] * 10), np.linspace(0, 1, 20)
    metrics = as_column(document_summary(labels, scores, n_resamples=50))
    row = DocumentRow("loss", "mean", metrics, Interval(0.6, 0.5, 0.7), Interval(0.1, 0.0, 0.2))
    out = row.to_dict()
    assert out["metrics"]["resamples"] == "documents" and out["paired_resamples"] == "documents"
    assert DocumentRow.from_dict(out, "row").metrics.resamples == "documents"
    # and which interval: BCa, through metrics.json and back
    assert out["metrics"]["method"] == "bca"
    assert DocumentRow.from_dict(out, "row").metrics.method == "bca"


def _brute_threshold(scores, doc_index, doc_labels, train_docs) -> float:
    """Shi et al.'s tuning one candidate at a time (the loop tune_threshold vectorises)."""
    from imprint.documents.shi import N_CANDIDATES, fraction_above
    from imprint.metrics import auc

    rows = np.isin(doc_index, train_docs) & np.isfinite(scores)
    candidates = np.unique(np.quantile(scores[rows], np.linspace(0, 1, N_CANDIDATES)))
    labels = np.asarray(doc_labels)[train_docs]
    values = []
    for t in candidates:
        fractions = fraction_above(scores[rows], doc_index[rows], t, len(doc_labels))[train_docs]
        ok = np.isfinite(fractions)
        values.append(auc(labels[ok], fractions[ok]))
    best = np.flatnonzero(np.isclose(values, np.nanmax(values)))
    return float(candidates[best[len(best) // 2]])


@pytest.mark.parametrize("seed", range(12))
def test_vectorised_threshold_tuning_matches_the_loop(seed: int) -> None:
    from imprint.calibration.sequences import clustered_sequences
    from imprint.documents.shi import tune_threshold

    rng = np.random.default_rng(seed)
    n_docs = int(rng.integers(6, 30))
    _, scores, docs = clustered_sequences(rng, n_docs, mu=float(rng.uniform(0, 1)), tau=1.0)
    if seed % 3 == 0:
        scores = np.round(scores)  # ties
    if seed % 4 == 0:
        scores[rng.random(scores.size) < 0.1] = np.nan  # unscored sequences
    doc_labels = np.arange(n_docs) % 2
    train = rng.choice(n_docs, size=n_docs // 2 + 2, replace=False)
    if len(set(doc_labels[train].tolist())) < 2:
        train = np.arange(4)
    got = tune_threshold(scores, docs, doc_labels, train)
    assert got == _brute_threshold(scores, docs, doc_labels, train)
