"""Shi et al. 2023 (Min-K% Prob, book-level detection): a document's score is the fraction of its
sequences whose MIA score passes a threshold; the threshold is tuned on a training split of
documents and applied to the others.

``fraction_above(scores, doc_index, t)[d] = #{i in d : scores[i] > t} / #{i in d : scores[i]
finite}``; a document without a finite sequence score gets NaN. Higher = member, as the sequence
scores are. The threshold is the candidate (a quantile of the training documents' sequence
scores) whose fractions give the training documents the highest AUC; among equal AUCs the median
candidate, so a flat stretch does not push the threshold to an extreme.
"""

from __future__ import annotations

import numpy as np

from imprint.documents.folds import document_sides, sequence_folds
from imprint.metrics import auc

__all__ = ["N_CANDIDATES", "fraction_above", "shi_scores", "tune_threshold"]

#: Thresholds tried: this many quantiles of the training sequence scores (0 % to 100 %).
N_CANDIDATES = 101


def fraction_above(
    scores: np.ndarray, doc_index: np.ndarray, threshold: float, n_docs: int
) -> np.ndarray:
    """Per document, the fraction of its finite sequence scores above ``threshold``: shape
    (n_docs,). ``scores`` and ``doc_index`` have shape (n_sequences,)."""
    scores, doc_index = np.asarray(scores, dtype=float), np.asarray(doc_index)
    finite = np.isfinite(scores)
    above = np.bincount(doc_index[finite], weights=scores[finite] > threshold, minlength=n_docs)
    counted = np.bincount(doc_index[finite], minlength=n_docs).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, above / np.maximum(counted, 1), np.nan)


def tune_threshold(
    scores: np.ndarray, doc_index: np.ndarray, doc_labels: np.ndarray, train_docs: np.ndarray
) -> float:
    """The threshold that best separates the ``train_docs`` by :func:`fraction_above` (AUC);
    ``doc_labels`` has shape (n_docs,), ``train_docs`` holds document positions."""
    scores, doc_index = np.asarray(scores, dtype=float), np.asarray(doc_index)
    n_docs = len(doc_labels)
    rows = np.isin(doc_index, train_docs) & np.isfinite(scores)
    if not rows.any():
        return float("nan")
    candidates = np.unique(np.quantile(scores[rows], np.linspace(0, 1, N_CANDIDATES)))
    train_labels = np.asarray(doc_labels)[train_docs]
    if len(set(train_labels.tolist())) < 2:  # nothing to tune on: the median score
        return float(np.median(scores[rows]))
    aucs = []
    for t in candidates:
        fractions = fraction_above(scores[rows], doc_index[rows], t, n_docs)[train_docs]
        ok = np.isfinite(fractions)
        aucs.append(auc(train_labels[ok], fractions[ok]))
    values = np.asarray(aucs, dtype=float)
    if not np.isfinite(values).any():  # e.g. a class without a finite score
        return float(np.median(scores[rows]))
    best = np.flatnonzero(np.isclose(values, np.nanmax(values)))
    return float(candidates[best[len(best) // 2]])


def shi_scores(
    scores: np.ndarray,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    *,
    n_splits: int = 5,
    seed: int = 0,
) -> tuple[np.ndarray, list[float]]:
    """Out-of-fold document scores, shape (n_docs,), and the threshold of each fold: every
    document is scored with a threshold tuned on other documents only (grouped K-fold)."""
    doc_labels = np.asarray(doc_labels)
    seq_labels = doc_labels[np.asarray(doc_index)]
    out = np.full(len(doc_labels), np.nan)
    thresholds = []
    folds = sequence_folds(doc_index, seq_labels, n_splits=n_splits, seed=seed)
    for train_docs, test_docs in document_sides(doc_index, folds):
        t = tune_threshold(scores, doc_index, doc_labels, train_docs)
        thresholds.append(t)
        out[test_docs] = fraction_above(scores, doc_index, t, len(doc_labels))[test_docs]
    return out, thresholds
