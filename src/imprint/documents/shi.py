"""Shi et al. 2023 (Min-K% Prob, book-level detection): a document's score is the fraction of its
sequences whose MIA score passes a threshold; the threshold is tuned on a training split of
documents and applied to the others.

``fraction_above(scores, doc_index, t)[d] = #{i in d : scores[i] > t} / #{i in d : scores[i]
finite}``; a document without a finite sequence score gets NaN. Higher = member, as the sequence
scores are. The threshold is the candidate (a quantile of the training documents' sequence
scores) whose fractions give the training documents the highest AUC; among equal AUCs the median
candidate, so a flat stretch does not push the threshold to an extreme.

Two protocols over K folds of documents (thresholds tuned on the other folds):

- :func:`shi_fold_summary` (the run's ``shi`` row): AUC and TPR@FPR within each fold, averaged
  over folds. Each fold is the paper's own protocol (a threshold from other documents, figures
  on held-out ones), so under the null every fold's AUC has expectation 0.5, and so has the
  average.
- :func:`shi_scores` ("shi pooled"): the out-of-fold fractions pooled into one score per
  document. Fractions from different thresholds are not on one scale, and pooling them has a
  null AUC of about 0.515 (simulated, 1,000 null sets): a manufactured signal. Kept for the API
  and the calibration suite, not used in reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.documents.doc_metrics import bootstrap_counts
from imprint.documents.folds import document_sides, sequence_folds
from imprint.metrics import DEFAULT_FPR_BOUNDS, Interval, MetricSummary, min_nonmembers
from imprint.metrics.bootstrap import bca_interval, weighted_statistics
from imprint.metrics.cv_interval import widen_auc

__all__ = [
    "N_CANDIDATES",
    "ShiFold",
    "fraction_above",
    "shi_fold_scores",
    "shi_fold_summary",
    "shi_scores",
    "tune_threshold",
]

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
    ``doc_labels`` has shape (n_docs,), ``train_docs`` holds document positions. Every
    candidate is evaluated at once: fractions as a (candidates, documents) array, AUC per row
    from average ranks (ties count 1/2, as :func:`~imprint.metrics.auc`)."""
    from scipy.stats import rankdata

    scores, doc_index = np.asarray(scores, dtype=float), np.asarray(doc_index)
    rows = np.isin(doc_index, train_docs) & np.isfinite(scores)
    if not rows.any():
        return float("nan")
    candidates = np.unique(np.quantile(scores[rows], np.linspace(0, 1, N_CANDIDATES)))
    docs, local = np.unique(doc_index[rows], return_inverse=True)  # train docs with a score
    labels = np.asarray(doc_labels)[docs] == 1
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:  # nothing to tune on: the median score
        return float(np.median(scores[rows]))
    above = scores[rows][None, :] > candidates[:, None]  # (candidates, rows)
    counts = np.bincount(local, minlength=docs.size)
    order = np.argsort(local, kind="stable")
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    fractions = np.add.reduceat(above[:, order], starts, axis=1) / counts  # (candidates, docs)
    ranks = rankdata(fractions, axis=1)
    aucs = (ranks[:, labels].sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    best = np.flatnonzero(np.isclose(aucs, aucs.max()))
    return float(candidates[best[len(best) // 2]])


def shi_scores(
    scores: np.ndarray, doc_index: np.ndarray, doc_labels: np.ndarray, **folding: int
) -> tuple[np.ndarray, list[float]]:
    """Out-of-fold document scores, shape (n_docs,), and the threshold of each fold: every
    document is scored with a threshold tuned on other documents only (grouped K-fold; the
    folds of :func:`shi_fold_scores`, ``folding``: its ``n_splits`` and ``seed``). A document
    with no finite sequence score gets NaN."""
    folds = shi_fold_scores(scores, doc_index, doc_labels, **folding)
    out = np.full(len(doc_labels), np.nan)
    for fold in folds:
        out[fold.docs] = fold.scores
    return out, [fold.threshold for fold in folds]


@dataclass(frozen=True)
class ShiFold:
    """One fold's held-out documents (positions), their labels, Shi fractions and threshold."""

    docs: np.ndarray
    labels: np.ndarray
    scores: np.ndarray
    threshold: float


def shi_fold_scores(
    scores: np.ndarray,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    *,
    n_splits: int = 5,
    seed: int = 0,
) -> list[ShiFold]:
    """Per fold, the held-out documents scored with the threshold tuned on the other folds
    (documents with no finite sequence score left out)."""
    doc_labels = np.asarray(doc_labels)
    seq_labels = doc_labels[np.asarray(doc_index)]
    out = []
    folds = sequence_folds(doc_index, seq_labels, n_splits=n_splits, seed=seed)
    for train_docs, test_docs in document_sides(doc_index, folds):
        t = tune_threshold(scores, doc_index, doc_labels, train_docs)
        fractions = fraction_above(scores, doc_index, t, len(doc_labels))[test_docs]
        ok = np.isfinite(fractions)
        out.append(ShiFold(test_docs[ok], doc_labels[test_docs][ok], fractions[ok], t))
    return out


def _fold_average(
    folds: list[ShiFold], counts: np.ndarray, bounds: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Fold-averaged AUC, shape (c,), and TPR, shape (b, c), with document ``counts`` (shape
    (c, n_docs)): AUC weighted by each fold's member x non-member pairs, TPR by its members."""
    auc_sum = np.zeros(counts.shape[0])
    pair_sum = np.zeros(counts.shape[0])
    tpr_sum = np.zeros((len(bounds), counts.shape[0]))
    member_sum = np.zeros(counts.shape[0])
    for fold in folds:
        w = counts[:, fold.docs]
        a, t = weighted_statistics(fold.labels, fold.scores, w, bounds)
        n_pos = w[:, fold.labels == 1].sum(axis=1)
        pairs = n_pos * w[:, fold.labels == 0].sum(axis=1)
        ok = pairs > 0
        auc_sum[ok] += (pairs * a)[ok]
        pair_sum += pairs
        tpr_sum[:, ok] += (n_pos * t)[:, ok]
        member_sum[ok] += n_pos[ok]
    with np.errstate(invalid="ignore", divide="ignore"):
        return auc_sum / pair_sum, tpr_sum / member_sum


def _document_draws(doc_labels: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Bootstrap counts per document, shape (n_resamples, n_docs): documents drawn with
    replacement within each class (members, then non-members)."""
    pools = (np.flatnonzero(doc_labels == 1), np.flatnonzero(doc_labels != 1))
    return bootstrap_counts(pools, n_resamples, len(doc_labels), np.random.default_rng(seed))


def shi_fold_summary(
    scores: np.ndarray,
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    *,
    n_splits: int = 5,
    seed: int = 0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    fpr_bounds: tuple[float, ...] = DEFAULT_FPR_BOUNDS,
) -> MetricSummary:
    """Shi et al.'s document figures, averaged over folds (see the module docstring).

    AUC: per-fold AUCs weighted by their member x non-member pairs; TPR@t: per-fold TPRs
    weighted by their members. Intervals: documents resampled with replacement within each
    class (all folds together, a document keeping its fold and its fraction; thresholds held
    fixed), the fold average recomputed per resample; BCa intervals, the jackknife leaving
    out one document; the AUC's widened to the hull with the corrected cross-validation t
    interval over the fold AUCs (:mod:`imprint.metrics.cv_interval`). A bound is measurable
    only when every fold's non-members resolve it. ``scores``, ``doc_index``: shape (n_sequences,);
    ``doc_labels``: shape (n_docs,)."""
    doc_labels = np.asarray(doc_labels)
    folds = shi_fold_scores(scores, doc_index, doc_labels, n_splits=n_splits, seed=seed)
    folds = [f for f in folds if 0 < f.labels.sum() < f.labels.size]
    n_neg = [int((f.labels == 0).sum()) for f in folds]
    smallest = min(n_neg, default=0)
    reasons = {
        b: (
            f"the Shi et al. figure is averaged over folds and an FPR of {b * 100:g} % needs at "
            f"least {min_nonmembers(b)} non-members per fold; the smallest fold has {smallest}"
        )
        for b in fpr_bounds
        if smallest < min_nonmembers(b)
    }
    kept = tuple(b for b in fpr_bounds if b not in reasons)
    nan = Interval(float("nan"), float("nan"), float("nan"))
    tprs: dict[float, Interval | None] = {b: None for b in reasons}
    auc_interval = nan
    if folds:
        ones = np.ones((1, len(doc_labels)), dtype=np.int64)
        auc_est, tpr_est = _fold_average(folds, ones, kept)
        auc_boot, tpr_boot = _fold_average(
            folds, _document_draws(doc_labels, n_resamples, seed), kept
        )
        # BCa (Efron 1987): the jackknife leaves out one document at a time
        leave_one_out = 1 - np.eye(len(doc_labels), dtype=np.int64)
        auc_jack, tpr_jack = _fold_average(folds, leave_one_out, kept)
        unit_class = (doc_labels == 1).astype(np.int64)
        auc_interval = bca_interval(float(auc_est[0]), auc_boot, auc_jack, unit_class, confidence)
        for i, b in enumerate(kept):
            tprs[b] = bca_interval(
                float(tpr_est[i, 0]), tpr_boot[i], tpr_jack[i], unit_class, confidence
            )
    summary = MetricSummary(
        auc=auc_interval,
        tpr_at_fpr={b: tprs.get(b, nan) for b in fpr_bounds},
        n_members=sum(int(f.labels.sum()) for f in folds),
        n_nonmembers=sum(n_neg),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        not_measurable=reasons,
        resamples="documents",
        n_units=sum(f.labels.size for f in folds),
    )
    # thresholds held fixed ignore training variability: the hull with the corrected CV t over
    # the fold AUCs (each fold's training part: every other document)
    labels = np.concatenate([f.labels for f in folds]) if folds else np.zeros(0)
    ends = np.cumsum([0] + [f.labels.size for f in folds])
    tests = [np.arange(a, b) for a, b in zip(ends[:-1], ends[1:], strict=True)]
    scored = np.concatenate([f.scores for f in folds]) if folds else np.zeros(0)
    return widen_auc(summary, labels, scored, tests, n_units=len(doc_labels))
