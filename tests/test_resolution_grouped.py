"""The resolution rule counts non-member documents where the bootstrap resamples documents
(issue 37 item 7, found by the independent check): 16 documents x 5 texts per class at
TPR@5 % covered 0.860-0.883 while the rule, counting 80 texts, admitted it."""

from __future__ import annotations

import numpy as np

from imprint.evaluation.columns import as_column, summary_from_dict
from imprint.evaluation.curves import RocCurve, roc_with_band
from imprint.evaluation.evaluate import mark_unmeasurable
from imprint.metrics import bootstrap_metrics
from imprint.study.tables import Entry


def _documents(n_docs: int, per_doc: int = 5, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    doc = np.repeat(np.arange(2 * n_docs), per_doc)
    labels = (doc < n_docs).astype(int)
    scores = labels + rng.normal(0, 2, 2 * n_docs)[doc] + rng.normal(size=doc.size)
    return labels, scores, doc


def _grouped(n_docs: int = 16):  # type: ignore[no-untyped-def]
    labels, scores, doc = _documents(n_docs)
    return bootstrap_metrics(
        labels, scores, n_resamples=100, fpr_bounds=(0.05, 0.1), groups=doc, resamples="documents"
    )


def test_80_nonmember_texts_in_16_documents_do_not_resolve_5_percent() -> None:
    summary = _grouped()
    assert summary.n_nonmembers == 80 and summary.n_nonmember_units == 16
    assert summary.tpr(0.05) is None and summary.tpr(0.1) is None
    reason = summary.not_measurable[0.05]
    assert "at least 80 non-member documents" in reason and "there are 16" in reason
    labels, scores, _ = _documents(16)  # the same texts resampled one by one: 80 resolve 5 %
    assert bootstrap_metrics(labels, scores, n_resamples=100, fpr_bounds=(0.05,)).tpr(0.05)


def test_80_nonmember_documents_resolve_5_percent() -> None:
    labels, scores, doc = _documents(80, per_doc=2)
    summary = bootstrap_metrics(labels, scores, n_resamples=100, fpr_bounds=(0.05,), groups=doc)
    assert summary.n_nonmember_units == 80 and summary.tpr(0.05) is not None


def test_metrics_json_keeps_the_unit_count_and_old_files_count_texts() -> None:
    """mark_unmeasurable re-derives the reasons from metrics.json: with the recorded count of
    non-member documents it refuses 5 %; a file written before it was recorded counts texts."""
    data = as_column(_grouped()).to_dict()
    assert data["n_nonmember_units"] == 16
    read = mark_unmeasurable(summary_from_dict(data, "metrics.json"))
    assert read.tpr(0.05) is None and "non-member documents" in read.not_measurable[0.05]
    assert "non-member documents" in (Entry.of(read, 0.05).tpr_note or "")
    old = {k: v for k, v in data.items() if k != "n_nonmember_units"}
    old["tpr@5%"] = {"estimate": 0.2, "low": 0.1, "high": 0.3}
    assert mark_unmeasurable(summary_from_dict(old, "metrics.json")).tpr(0.05) is not None


def test_roc_band_and_shading_count_nonmember_documents() -> None:
    from imprint.report.roc_plots import _check

    labels, scores, doc = _documents(16)
    curve = roc_with_band(labels, scores, n_bootstrap=50, seed=0, groups=doc,
                          resamples="documents")  # fmt: skip
    assert curve is not None and curve.n_nonmember_units == 16
    again = RocCurve.from_dict(curve.to_dict(), "roc")
    assert again.n_nonmember_units == 16
    assert _check({"loss": again}) == (80, 80, (16, "non-member documents"))
    # the band holds no figure at an FPR below 4 / 16 documents
    low = [f for f, t in zip(curve.fpr, curve.tpr, strict=True) if f < 0.25]
    assert low and all(np.isnan(t) for f, t in zip(curve.fpr, curve.tpr, strict=True) if f < 0.25)


def test_grouped_tpr_edge_covers_and_the_text_count_did_not() -> None:
    """Quick variant of the suite's grouped_tpr_edge rows (300 data sets each): at 80
    non-member documents the document bootstrap covers; at 16 (80 texts, the old count) it
    does not."""
    from imprint.calibration.edges import rows_grouped_tpr_edge

    low, high, old = rows_grouped_tpr_edge(300, 5, b=400)  # the suite: 1,000 resamples
    assert low.passed and high.passed, (low, high)
    assert "80 + 80 documents" in high.figure
    assert old.method.startswith("OLD") and not old.expect_pass and not old.passed, old


def test_a_unit_count_outside_1_to_n_nonmembers_is_refused_naming_the_field() -> None:
    import pytest

    from imprint.errors import DataError

    data = as_column(_grouped()).to_dict()
    for bad in (0, -3, 81, 10**9):
        with pytest.raises(DataError, match=r"metrics\.json\.n_nonmember_units: expected"):
            summary_from_dict({**data, "n_nonmember_units": bad}, "metrics.json")
    labels, scores, doc = _documents(16)
    curve = roc_with_band(labels, scores, n_bootstrap=20, seed=0, groups=doc)
    assert curve is not None
    with pytest.raises(DataError, match=r"roc\.n_nonmember_units: expected"):
        RocCurve.from_dict({**curve.to_dict(), "n_nonmember_units": 81}, "roc")


def test_a_document_run_warns_few_nonmember_documents() -> None:
    """40 non-member texts in 8 documents: 10 % resolves with the texts, not the documents."""
    from types import SimpleNamespace

    from imprint.data import Sample
    from imprint.evaluation import evaluate_scores

    labels, scores, doc = _documents(8)
    samples = [Sample(f"s{i}", f"text {i}", int(y), {"doc_id": f"d{d}"})
               for i, (y, d) in enumerate(zip(labels, doc, strict=True))]  # fmt: skip
    config = SimpleNamespace(n_bootstrap=50, seed=0, blind=False, breakdown=None, documents={})
    metrics = evaluate_scores(samples, {"loss": scores}, config=config)
    assert metrics.attacks["loss"].n_nonmember_units == 8
    assert metrics.attacks["loss"].tpr(0.1) is None
    few = [w.message for w in metrics.warnings if w.kind == "few_nonmembers"]
    assert few and few[0].startswith("only 8 non-member documents"), few
