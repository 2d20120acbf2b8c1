"""The document-level evaluation of a run (``--unit document``).

Computed once, after the sequence-level evaluation, from the same sequence scores:

- per attack column, document scores by two aggregations: the mean of a document's sequence
  scores and Shi et al.'s thresholded fraction (threshold tuned out of fold, over documents);
- Meeus et al.'s meta-classifier on frequency-normalised token probabilities (the target's plain
  log-prob pass, taken during scoring: :func:`imprint.documents.run_hook.document_signals`);
- for each: AUC and TPR at low FPR with a bootstrap over documents, and the sequence-level AUC
  of the same attack on the same resampled documents, with the gain between them;
- the blind bag-of-words baseline fitted on whole documents;
- dataset inference (Maini et al.): the member documents against the non-member documents, a
  false-positive check with two disjoint halves of the non-members, and the p-value against the
  number of documents per set.

:func:`evaluate_documents` returns a :class:`~imprint.evaluation.document_results.DocumentMetrics`
(the ``documents`` entry of ``metrics.json``); :mod:`imprint.report.documents` renders it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.documents import (
    DOC_ID,
    DocumentSplit,
    dataset_inference,
    document_summary,
    documents_needed,
    log_frequencies,
    mean_per_document,
    meeus_scores,
    p_value_curve,
    paired_bootstrap,
    token_values,
)
from imprint.documents.dataset_inference import MIN_DOCS
from imprint.documents.di_verdict import verdict
from imprint.documents.meeus import meeus_test_folds
from imprint.documents.run_hook import DocumentSignals
from imprint.documents.shi import shi_fold_summary
from imprint.errors import DataError
from imprint.evaluation.columns import as_column
from imprint.evaluation.document_results import DocumentMetrics, DocumentRow
from imprint.metrics import DEFAULT_FPR_BOUNDS, Interval, MetricSummary, UndefinedMetricWarning
from imprint.metrics.cv_interval import widen_auc

__all__ = ["dataset_section", "evaluate_documents"]

MEEUS = "meeus (token probability / corpus frequency, random forest)"
BLIND = "blind (bag-of-words on whole documents, no model)"
#: Dataset-inference features: score columns finite for at least this share of sequences.
MIN_FINITE_SHARE = 0.9


# -- evaluation ---------------------------------------------------------------------------------


def _doc_layout(
    split: DocumentSplit, samples: Sequence[Sample]
) -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """(documents still scored, per-sample document position, document labels): attack set-up
    may have taken some sequences as shots, so documents are read from the scored samples."""
    present = {s.meta[DOC_ID] for s in samples}
    documents = [d for d in split.documents if d.id in present]
    where = {d.id: i for i, d in enumerate(documents)}
    doc_index = np.array([where[s.meta[DOC_ID]] for s in samples], dtype=np.int64)
    return documents, doc_index, np.array([d.label for d in documents])


def _row(
    attack: str | None,
    aggregation: str,
    doc_labels: np.ndarray,
    doc_scores: np.ndarray,
    seq: tuple[np.ndarray, np.ndarray] | None,
    *,
    n_bootstrap: int,
    seed: int,
    test_folds: list[np.ndarray] | None = None,
) -> DocumentRow:
    """One row; ``test_folds`` (a learned aggregation's held-out documents per fold) widens
    the AUC interval for training variability (:mod:`imprint.metrics.cv_interval`)."""
    from imprint.evaluation.evaluate import mark_unmeasurable

    summary = document_summary(doc_labels, doc_scores, n_resamples=n_bootstrap, seed=seed)
    if test_folds is not None:
        summary = widen_auc(summary, doc_labels, doc_scores, test_folds)
    n_nan = int((~np.isfinite(doc_scores)).sum())
    metrics = mark_unmeasurable(as_column(summary, n_nan=n_nan))
    if seq is None:
        return DocumentRow(attack, aggregation, metrics)
    paired = paired_bootstrap(
        seq[0], seq[1], doc_labels, doc_scores, n_resamples=n_bootstrap, seed=seed
    )
    return DocumentRow(attack, aggregation, metrics, paired.sequence, paired.gain)


def _shi_row(
    attack: str,
    seq: tuple[np.ndarray, np.ndarray],
    doc_labels: np.ndarray,
    mean: np.ndarray,
    *,
    n_splits: int,
    n_bootstrap: int,
    seed: int,
) -> DocumentRow:
    """Shi et al.'s row: figures within each fold, averaged (pooled fold scores are biased
    under the null, see :mod:`imprint.documents.shi`); the sequence AUC beside it, no gain (the
    fold average has no single document score to pair)."""
    summary = shi_fold_summary(
        seq[0], seq[1], doc_labels, n_splits=n_splits, seed=seed, n_resamples=n_bootstrap
    )
    paired = paired_bootstrap(seq[0], seq[1], doc_labels, mean, n_resamples=n_bootstrap, seed=seed)
    n_nan = len(doc_labels) - summary.n_members - summary.n_nonmembers
    metrics = as_column(summary, n_nan=n_nan)
    return DocumentRow(attack, "shi (per fold, averaged)", metrics, paired.sequence, None)


def evaluate_documents(
    split: DocumentSplit,
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    *,
    config: Any,
    signals: DocumentSignals,
) -> DocumentMetrics:
    """Every document-level figure of a run (``config``: n_bootstrap, seed, blind, documents;
    ``signals``: what the aggregators took from scoring, :func:`~imprint.documents.run_hook.
    document_signals`)."""
    documents, doc_index, doc_labels = _doc_layout(split, samples)
    kw = {"n_bootstrap": config.n_bootstrap, "seed": config.seed}
    options, notes = config.documents, list[str]()
    rows: dict[str, DocumentRow] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # NaN rows are reported as such
        if config.blind:
            rows[BLIND] = _blind_row(documents, doc_labels, notes, **kw)
        for column, values in scores.items():
            seq = (values, doc_index)
            mean = mean_per_document(values, doc_index, len(documents))
            rows[f"{column}: mean"] = _row(column, "mean", doc_labels, mean, seq, **kw)
            rows[f"{column}: shi"] = _shi_row(
                column, seq, doc_labels, mean, n_splits=options.n_splits, **kw
            )
        meeus = _meeus(signals, doc_index, doc_labels, config, notes)
        if meeus is not None:
            folds = meeus_test_folds(
                doc_index, doc_labels, n_splits=config.documents.n_splits, seed=config.seed
            )
            rows[MEEUS] = _row(None, "meeus", doc_labels, meeus, None, test_folds=folds, **kw)
    dataset = _dataset(scores, doc_index, doc_labels, options, config.seed, notes)
    return DocumentMetrics(
        n_documents=len(documents),
        n_members=int((doc_labels == 1).sum()),
        n_nonmembers=int((doc_labels == 0).sum()),
        n_sequences=len(samples),
        rows=rows,
        dataset=dataset,
        notes=tuple(notes),
    )


def _blind_row(
    documents: list[Sample],
    doc_labels: np.ndarray,
    notes: list[str],
    *,
    n_bootstrap: int,
    seed: int,
) -> DocumentRow:
    from imprint.evaluation.blind_results import BlindClassifierMetrics
    from imprint.evaluation.evaluate import evaluate_blind

    texts = [d.text for d in documents]
    sok, _ = evaluate_blind(texts, doc_labels, seed=seed, n_bootstrap=n_bootstrap, unit="documents")
    if isinstance(sok, BlindClassifierMetrics) and sok.summary is not None:
        return DocumentRow(None, "blind", sok.summary)
    notes.append(f"document-level blind baseline not computed: {sok.error}")
    nan = Interval(math.nan, math.nan, math.nan)
    empty = MetricSummary(nan, {b: nan for b in DEFAULT_FPR_BOUNDS}, 0, 0, n_bootstrap, 0.95, seed,
                          resamples=None, method=None)  # fmt: skip
    return DocumentRow(None, "blind", empty)


def _meeus(
    signals: DocumentSignals,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    config: Any,
    notes: list[str],
) -> np.ndarray | None:
    """Meeus et al.'s out-of-fold document scores, or None (with a note) when scoring did not
    give the target's plain log-prob pass (no attack planned it, or a text-only target)."""
    if signals.token_stats is None:
        notes.append(signals.missing or "Meeus et al. not computed")
        return None
    log_f = log_frequencies([s.token_ids for s in signals.token_stats], signals.vocab_size)
    values = [token_values(s.token_ids, s.logp, log_f) for s in signals.token_stats]
    options = config.documents
    return meeus_scores(
        values,
        doc_index,
        doc_labels,
        n_splits=options.n_splits,
        seed=config.seed,
        settings=options.meeus,
    )


def dataset_section(
    scores: dict[str, np.ndarray],
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    *,
    options: Any,
    seed: int,
) -> tuple[dict[str, Any], list[str]]:
    """Dataset inference as a document run reports it (members vs non-members, the
    false-positive check, the power table, the verdict) and its notes: the one code path the
    demo shares with the report."""
    notes: list[str] = []
    return _dataset(scores, doc_index, doc_labels, options, seed, notes), notes


def _features(scores: dict[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """Score columns finite for >= MIN_FINITE_SHARE of the sequences, as (names, (n, F))."""
    names = [c for c, v in scores.items() if np.isfinite(v).mean() >= MIN_FINITE_SHARE]
    if not names:
        return [], np.zeros((0, 0))
    return names, np.column_stack([np.asarray(scores[c], dtype=float) for c in names])


def _dataset(
    scores: dict[str, np.ndarray],
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    options: Any,
    seed: int,
    notes: list[str],
) -> dict[str, Any]:
    """Dataset inference: members vs non-members, the two-halves false-positive check, the
    p-value against documents per set and the verdict of the three (``options``: alpha, clip,
    power, effect_auc); parts the data cannot support are left out with a note."""
    names, x = _features(scores)
    if not names:
        notes.append("dataset inference not run: no score column is finite for 90 % of sequences")
        return {}
    member = doc_labels[doc_index] == 1
    alpha = options.alpha
    kw: dict[str, Any] = {"alpha": alpha, "seed": seed, "clip": options.di_clip}
    kw["clip_from"] = options.di_clip_from
    out: dict[str, Any] = {"features": names}
    try:
        test = dataset_inference(
            x[member], x[~member], doc_index[member], doc_index[~member], feature_names=names, **kw
        )
        out["members_vs_nonmembers"] = test.to_dict()
        curve = p_value_curve(x[member], x[~member], doc_index[member], doc_index[~member], **kw)
        out["curve"] = [asdict(p) for p in curve]
        out["documents_needed"] = documents_needed(curve, alpha)
    except DataError as err:
        notes.append(f"dataset inference not run: {err}")
        return out
    out["false_positive_check"] = _false_positive(x, doc_index, doc_labels, names, kw, notes)
    out["verdict"] = verdict(
        test,
        out["false_positive_check"],
        curve,
        power=options.di_power,
        effect_auc=options.di_effect_auc,
    ).to_dict()
    return out


def _false_positive(
    x: np.ndarray,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    names: list[str],
    kw: dict[str, Any],
    notes: list[str],
) -> dict[str, Any] | None:
    """The test with two disjoint halves of the non-member documents (both unseen); ``kw``:
    alpha, seed, clip."""
    unseen = np.flatnonzero(doc_labels == 0)
    if len(unseen) < 2 * MIN_DOCS:
        notes.append(
            f"false-positive check not run: it splits the non-member documents into two sets of "
            f"at least {MIN_DOCS}; this run has {len(unseen)}"
        )
        return None
    half = np.random.default_rng([kw["seed"], 16]).permutation(unseen)[: len(unseen) // 2]
    a = np.isin(doc_index, half)
    b = (doc_labels[doc_index] == 0) & ~a
    try:  # rows with non-finite features are dropped inside: a half can still be too small
        test = dataset_inference(x[a], x[b], doc_index[a], doc_index[b], feature_names=names, **kw)
    except DataError as err:
        notes.append(f"false-positive check not run: {err}")
        return None
    return test.to_dict()
