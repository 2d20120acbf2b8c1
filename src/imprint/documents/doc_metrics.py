"""Document-level figures with intervals resampled over documents.

- :func:`mean_per_document`: the plainest aggregation, a document's mean sequence score.
- :func:`document_summary`: AUC and TPR at low FPR of one score per document, with the
  stratified bootstrap of :mod:`imprint.metrics` (one row per document, so it resamples
  documents).
- :func:`paired_bootstrap`: sequence-level and document-level AUC of the same attack on the
  *same* resampled documents (a member document drawn twice brings all its sequences twice), and
  their difference. Sequences of a document are correlated, so an interval that resamples
  sequences one by one is too narrow; this one resamples what is independent. The document
  scores are held fixed (a learned aggregation is not refitted per resample).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from imprint.metrics import Interval, MetricSummary, bootstrap_metrics
from imprint.metrics.bootstrap import DEFAULT_FPR_BOUNDS

__all__ = [
    "PairedAuc",
    "bootstrap_counts",
    "document_summary",
    "mean_per_document",
    "paired_bootstrap",
    "weighted_auc",
]

_CHUNK_ELEMENTS = 1 << 20


def bootstrap_counts(
    pools: Sequence[np.ndarray], n_resamples: int, n_docs: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap counts per document, shape (n_resamples, n_docs), int64: each pool's documents
    (index arrays) drawn with replacement, as many as it holds (pools by class: the stratified
    bootstrap; one pool of all: the plain one). Shared by the document figures, Shi et al.'s
    fold summary and DUCI."""
    counts = np.zeros((n_resamples, n_docs), dtype=np.int64)
    rows = np.arange(n_resamples)[:, None]
    for pool in pools:
        if pool.size:
            draws = pool[rng.integers(0, pool.size, size=(n_resamples, pool.size))]
            np.add.at(counts, (np.broadcast_to(rows, draws.shape), draws), 1)
    return counts


def mean_per_document(scores: np.ndarray, doc_index: np.ndarray, n_docs: int) -> np.ndarray:
    """Per document, the mean of its finite sequence scores (NaN when it has none): (n_docs,)."""
    scores, doc_index = np.asarray(scores, dtype=float), np.asarray(doc_index)
    finite = np.isfinite(scores)
    total = np.bincount(doc_index[finite], weights=scores[finite], minlength=n_docs)
    counted = np.bincount(doc_index[finite], minlength=n_docs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)


def document_summary(
    doc_labels: np.ndarray, doc_scores: np.ndarray, *, n_resamples: int = 1000, seed: int = 0
) -> MetricSummary:
    """Bootstrap AUC and TPR@FPR of one score per document (NaN scores left out)."""
    labels, scores = np.asarray(doc_labels), np.asarray(doc_scores, dtype=float)
    finite = np.isfinite(scores)
    return bootstrap_metrics(
        labels[finite],
        scores[finite],
        n_resamples=n_resamples,
        seed=seed,
        fpr_bounds=DEFAULT_FPR_BOUNDS,
        resamples="documents",  # one row per document
    )


def weighted_auc(
    is_member: np.ndarray, levels: np.ndarray, weights: np.ndarray, n_levels: int
) -> np.ndarray:
    """AUC per row of ``weights`` (shape (c, n)): row r counts sample i ``weights[r, i]`` times.
    ``levels`` (shape (n,)) are the scores' ranks among the distinct scores; ties count 1/2."""
    c = weights.shape[0]
    offsets = (np.arange(c) * n_levels)[:, None]

    def histogram(mask: np.ndarray) -> np.ndarray:
        flat = np.bincount(
            (levels[mask][None, :] + offsets).ravel(),
            weights=weights[:, mask].ravel(),
            minlength=c * n_levels,
        )
        return flat.reshape(c, n_levels)

    h_pos, h_neg = histogram(is_member), histogram(~is_member)
    below = np.cumsum(h_neg, axis=1) - h_neg
    pairs = h_pos.sum(axis=1) * h_neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(h_pos * (below + h_neg / 2), axis=1) / pairs


@dataclass(frozen=True)
class PairedAuc:
    """Sequence-level and document-level AUC with document-bootstrap intervals, and the gain."""

    sequence: Interval
    document: Interval
    gain: Interval  # document - sequence, per resample
    n_resamples: int


def _interval(estimate: float, values: np.ndarray, confidence: float) -> Interval:
    values = values[np.isfinite(values)]
    if not values.size or not np.isfinite(estimate):
        return Interval(float("nan"), float("nan"), float("nan"))
    low, high = np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(float(estimate), float(low), float(high))


def paired_bootstrap(
    seq_scores: np.ndarray,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    doc_scores: np.ndarray,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedAuc:
    """See the module docstring. Documents are resampled with replacement within each class
    (member and non-member counts kept); NaN scores are left out."""
    seq_scores, doc_index = np.asarray(seq_scores, dtype=float), np.asarray(doc_index)
    doc_labels, doc_scores = np.asarray(doc_labels), np.asarray(doc_scores, dtype=float)
    n_docs = len(doc_labels)
    seq_ok, doc_ok = np.isfinite(seq_scores), np.isfinite(doc_scores)
    if not seq_ok.any() or not doc_ok.any():
        nan = Interval(float("nan"), float("nan"), float("nan"))
        return PairedAuc(nan, nan, nan, n_resamples)
    s_member = doc_labels[doc_index[seq_ok]] == 1
    s_docs = doc_index[seq_ok]
    s_levels = np.unique(seq_scores[seq_ok], return_inverse=True)[1]
    d_levels = np.unique(doc_scores[doc_ok], return_inverse=True)[1]
    d_member = doc_labels[doc_ok] == 1
    members, others = np.flatnonzero(doc_labels == 1), np.flatnonzero(doc_labels == 0)
    rng = np.random.default_rng(seed)
    seq_aucs, doc_aucs = [], []
    chunk = max(1, _CHUNK_ELEMENTS // max(len(s_docs), n_docs, 1))
    for start in range(0, n_resamples, chunk):
        c = min(chunk, n_resamples - start)
        counts = bootstrap_counts((members, others), c, n_docs, rng).astype(np.float64)
        seq_aucs.append(
            weighted_auc(s_member, s_levels, counts[:, s_docs], int(s_levels.max()) + 1)
        )
        doc_aucs.append(
            weighted_auc(d_member, d_levels, counts[:, doc_ok], int(d_levels.max()) + 1)
        )
    seq_boot, doc_boot = np.concatenate(seq_aucs), np.concatenate(doc_aucs)
    ones = np.ones((1, n_docs))
    seq_auc = float(weighted_auc(s_member, s_levels, ones[:, s_docs], int(s_levels.max()) + 1)[0])
    doc_auc = float(weighted_auc(d_member, d_levels, ones[:, doc_ok], int(d_levels.max()) + 1)[0])
    return PairedAuc(
        sequence=_interval(seq_auc, seq_boot, confidence),
        document=_interval(doc_auc, doc_boot, confidence),
        gain=_interval(doc_auc - seq_auc, doc_boot - seq_boot, confidence),
        n_resamples=n_resamples,
    )
