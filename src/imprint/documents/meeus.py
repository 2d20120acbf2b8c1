"""Meeus et al. 2024 ("Did the neurons read your book?"): a meta-classifier over a document's
token probabilities, each normalised by how common the token is.

Per token t of a document: ``v_t = log p(x_t | x_<t) - log f(x_t)``, the log of the ratio of the
model's probability to the token's frequency in a reference corpus (Laplace-smoothed,
f(v) = (c(v) + 1) / (N + V), counted with the target's tokenizer): a rare token the model
predicts well says more than a common one. Per document, over all tokens of its sequences:

- aggregate features: mean, standard deviation, min, max and the 1/5/10/25/50/75/90/95/99th
  percentiles of v (:data:`AGGREGATES`);
- histogram features: the fraction of v in each of ``n_bins`` equal-width bins between the 1st
  and 99th percentile of the *training* documents' values (values outside go to the end bins).

A random forest (scikit-learn) on these features, cross-validated over documents (a grouped
K-fold: no document on both sides, the histogram edges fitted on the training side only), gives
each document its out-of-fold probability of being a member: higher = member.

Reference corpus: a named corpus, or by default the candidate sequences themselves, pooled. The
counts never see a label and are applied to every document alike (the same argument as DC-PDD's
default corpus, :mod:`imprint.attacks.dc_pdd`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from imprint.attacks.dc_pdd import count_tokens, smoothed_frequencies
from imprint.documents.folds import document_sides, sequence_folds
from imprint.errors import DataError

__all__ = [
    "AGGREGATES",
    "PERCENTILES",
    "aggregate_features",
    "feature_names",
    "histogram_features",
    "log_frequencies",
    "meeus_scores",
    "token_values",
]

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
AGGREGATES = ("mean", "std", "min", "max", *(f"p{q}" for q in PERCENTILES))
N_BINS = 10
N_TREES = 300


def log_frequencies(token_lists: Sequence[np.ndarray], vocab_size: int | None) -> np.ndarray:
    """log f(v) for every token id v, from the corpus ``token_lists`` (Laplace smoothing over
    ``V = max(vocab_size, largest id + 1)``): shape (V,)."""
    counts = count_tokens(token_lists)
    if counts.sum() == 0:
        raise DataError("the reference corpus of the Meeus features has no tokens")
    return np.log(smoothed_frequencies(counts, max(vocab_size or 0, len(counts))))


def token_values(token_ids: np.ndarray, logp: np.ndarray, log_freq: np.ndarray) -> np.ndarray:
    """``log p(x_t) - log f(x_t)`` per token: shape (T,)."""
    ids = np.asarray(token_ids, dtype=np.int64)
    if ids.size and ids.max() >= len(log_freq):
        raise DataError(
            f"token id {int(ids.max())} is outside the reference frequency table "
            f"({len(log_freq)} entries); count the corpus with the target's tokenizer"
        )
    return np.asarray(logp, dtype=np.float64) - log_freq[ids]


def aggregate_features(values: np.ndarray) -> np.ndarray:
    """The :data:`AGGREGATES` of one document's token values: shape (13,); NaN when empty."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return np.full(len(AGGREGATES), np.nan)
    return np.array([v.mean(), v.std(), v.min(), v.max(), *np.percentile(v, PERCENTILES)])


def histogram_features(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fraction of ``values`` per bin of ``edges`` (shape (n_bins + 1,)), the end bins open:
    shape (n_bins,), summing to 1 (NaN when empty)."""
    v = np.asarray(values, dtype=np.float64)
    n_bins = len(edges) - 1
    if v.size == 0:
        return np.full(n_bins, np.nan)
    bins = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, n_bins - 1)
    return np.bincount(bins, minlength=n_bins) / v.size


def feature_names(n_bins: int = N_BINS) -> list[str]:
    return [*AGGREGATES, *(f"hist{i}" for i in range(n_bins))]


def _edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    low, high = np.percentile(values, [1, 99]) if values.size else (0.0, 1.0)
    if not high > low:
        high = low + 1.0
    return np.linspace(low, high, n_bins + 1)


def _features(doc_values: Sequence[np.ndarray], docs: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.array(
        [
            np.concatenate(
                [aggregate_features(doc_values[d]), histogram_features(doc_values[d], edges)]
            )
            for d in docs
        ]
    )


def _per_document(
    seq_values: Sequence[np.ndarray], doc_index: np.ndarray, n_docs: int
) -> list[np.ndarray]:
    """All token values of each document, its sequences in order."""
    parts: list[list[np.ndarray]] = [[] for _ in range(n_docs)]
    for values, d in zip(seq_values, doc_index, strict=True):
        parts[int(d)].append(np.asarray(values, dtype=np.float64))
    return [np.concatenate(p) if p else np.zeros(0) for p in parts]


def meeus_scores(
    seq_values: Sequence[np.ndarray],
    doc_index: np.ndarray,
    doc_labels: np.ndarray,
    *,
    n_splits: int = 5,
    seed: int = 0,
    n_bins: int = N_BINS,
    n_trees: int = N_TREES,
) -> np.ndarray:
    """Out-of-fold member probabilities, shape (n_docs,). ``seq_values[i]`` holds the token
    values of sequence i (shape (T_i,)), ``doc_index[i]`` its document."""
    from sklearn.ensemble import RandomForestClassifier

    doc_index, doc_labels = np.asarray(doc_index), np.asarray(doc_labels)
    n_docs = len(doc_labels)
    doc_values = _per_document(seq_values, doc_index, n_docs)
    out = np.full(n_docs, np.nan)
    folds = sequence_folds(doc_index, doc_labels[doc_index], n_splits=n_splits, seed=seed)
    for train, test in document_sides(doc_index, folds):
        train = np.array([d for d in train if doc_values[d].size])  # a document without tokens
        test = np.array([d for d in test if doc_values[d].size])  # keeps its NaN score
        edges = _edges(np.concatenate([doc_values[d] for d in train]), n_bins)
        forest = RandomForestClassifier(n_estimators=n_trees, random_state=seed, n_jobs=1)
        forest.fit(_features(doc_values, train, edges), doc_labels[train])
        if test.size:
            member = list(forest.classes_).index(1) if 1 in forest.classes_ else None
            proba = forest.predict_proba(_features(doc_values, test, edges))
            out[test] = proba[:, member] if member is not None else 0.0
    return out
