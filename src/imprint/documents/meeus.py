"""Meeus et al. 2024 ("Did the neurons read your book?"): a meta-classifier over a document's
token probabilities, each normalised by how common the token is. Defaults follow the authors'
code (``computationalprivacy/document-level-membership-inference``: ``main.py``,
``src/feature_extraction.py``, ``src/meta_classifier.py``); each difference is in
:data:`DEVIATIONS`.

Per token t of a document: ``v_t = log p(x_t | x_<t) - log f(x_t)``, the log of the ratio of the
model's probability to the token's frequency in a reference corpus (their ``norm_type='ratio'``,
with the opposite sign: a forest splits on thresholds, so a sign flip changes no prediction).
Per document, over all tokens of its sequences, one of two feature sets (``features``):

- ``"agg"`` (the authors' default, ``simple_agg``): mean, standard deviation, min, max, the
  token count and the 1/5/10/25/50/75/90/95/99th percentiles of v (:data:`AGGREGATES`);
- ``"hist"`` (their ``hist_1000``): the share of v in each of ``n_bins`` (1,000) equal-width
  bins spanning the *training* documents' values, min to max;
- ``"both"``: the two concatenated (imprint's earlier default, not the authors').

A random forest (scikit-learn; 500 trees of depth at most 5, at least 3 documents per leaf, as
theirs) on these features, cross-validated over documents (a grouped K-fold: no document on
both sides, the histogram edges fitted on the training side only), gives each document its
out-of-fold probability of being a member: higher = member.

Reference corpus: a named corpus, or by default the candidate sequences themselves, pooled. The
counts never see a label and are applied to every document alike (the same argument as DC-PDD's
default corpus, :mod:`imprint.attacks.dc_pdd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from imprint.attacks.dc_pdd import count_tokens, smoothed_frequencies
from imprint.documents.folds import document_sides, sequence_folds
from imprint.errors import ConfigError, DataError

__all__ = [
    "AGGREGATES",
    "DEVIATIONS",
    "PERCENTILES",
    "MeeusSettings",
    "aggregate_features",
    "feature_names",
    "histogram_features",
    "log_frequencies",
    "meeus_scores",
    "meeus_test_folds",
    "token_values",
]

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
AGGREGATES = ("mean", "std", "min", "max", "count", *(f"p{q}" for q in PERCENTILES))
Features = Literal["agg", "hist", "both"]
#: Where imprint's Meeus et al. differs from the authors' code, one sentence each.
DEVIATIONS = (
    "token frequencies are counted on all candidate texts, pooled without labels and "
    "Laplace-smoothed (the authors: the training folds' documents, an unseen token at half the "
    "rarest frequency), so one frequency table serves every fold",
    "histogram shares (the authors: np.histogram densities, the same up to the constant bin "
    "width), and a test value outside the training range counts in the end bin (the authors "
    "drop it)",
    "no min-max scaling of the features (the authors scale them; a forest's splits do not "
    "change) and the forest is seeded (the authors' is not)",
    "no logistic-regression meta-classifier (the authors fit one beside the forest)",
)


@dataclass(frozen=True)
class MeeusSettings:
    """The features (``agg`` / ``hist`` / ``both``), the histogram's bins and the forest:
    ``n_trees`` trees of depth at most ``max_depth`` (None: unlimited), ``min_leaf`` documents
    per leaf. Defaults: the authors' (``hist`` with their 1,000 bins when chosen)."""

    features: Features = "agg"
    n_bins: int = 1000
    n_trees: int = 500
    max_depth: int | None = 5
    min_leaf: int = 3

    def __post_init__(self) -> None:
        if self.features not in ("agg", "hist", "both"):
            raise ConfigError(
                f"Meeus features {self.features!r}: choose 'agg' (the authors' default), "
                "'hist' or 'both'"
            )
        for name in ("n_bins", "n_trees", "min_leaf", "max_depth"):
            value = getattr(self, name)
            if name == "max_depth" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Meeus {name} must be an integer >= 1, got {value!r}")


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
    """The :data:`AGGREGATES` of one document's token values: shape (14,); NaN when empty."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return np.full(len(AGGREGATES), np.nan)
    return np.array([v.mean(), v.std(), v.min(), v.max(), v.size, *np.percentile(v, PERCENTILES)])


def histogram_features(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fraction of ``values`` per bin of ``edges`` (shape (n_bins + 1,)), the end bins open:
    shape (n_bins,), summing to 1 (NaN when empty)."""
    v = np.asarray(values, dtype=np.float64)
    n_bins = len(edges) - 1
    if v.size == 0:
        return np.full(n_bins, np.nan)
    bins = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, n_bins - 1)
    return np.bincount(bins, minlength=n_bins) / v.size


def feature_names(features: Features = "agg", n_bins: int = 1000) -> list[str]:
    agg = list(AGGREGATES) if features in ("agg", "both") else []
    return agg + ([f"hist{i}" for i in range(n_bins)] if features in ("hist", "both") else [])


def _edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    """``n_bins`` equal-width bins from the smallest to the largest training value (as
    ``np.histogram(values, bins=n_bins)`` makes them)."""
    low, high = (values.min(), values.max()) if values.size else (0.0, 1.0)
    if not high > low:
        high = low + 1.0
    return np.linspace(low, high, n_bins + 1)


def _features(
    doc_values: Sequence[np.ndarray], docs: np.ndarray, edges: np.ndarray, features: Features
) -> np.ndarray:
    def one(v: np.ndarray) -> np.ndarray:
        parts = []
        if features in ("agg", "both"):
            parts.append(aggregate_features(v))
        if features in ("hist", "both"):
            parts.append(histogram_features(v, edges))
        return np.concatenate(parts)

    return np.array([one(doc_values[d]) for d in docs])


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
    settings: MeeusSettings | None = None,
) -> np.ndarray:
    """Out-of-fold member probabilities, shape (n_docs,). ``seq_values[i]`` holds the token
    values of sequence i (shape (T_i,)), ``doc_index[i]`` its document; ``settings`` the
    features and forest (default: the authors')."""
    from sklearn.ensemble import RandomForestClassifier

    cfg = settings or MeeusSettings()

    doc_index, doc_labels = np.asarray(doc_index), np.asarray(doc_labels)
    n_docs = len(doc_labels)
    doc_values = _per_document(seq_values, doc_index, n_docs)
    out = np.full(n_docs, np.nan)
    for train, test in _sides(doc_index, doc_labels, n_splits, seed):
        train = np.array([d for d in train if doc_values[d].size])  # a document without tokens
        test = np.array([d for d in test if doc_values[d].size])  # keeps its NaN score
        edges = _edges(np.concatenate([doc_values[d] for d in train]), cfg.n_bins)
        forest = RandomForestClassifier(
            n_estimators=cfg.n_trees,
            max_depth=cfg.max_depth,
            min_samples_leaf=cfg.min_leaf,
            random_state=seed,
            n_jobs=1,
        )
        forest.fit(_features(doc_values, train, edges, cfg.features), doc_labels[train])
        if test.size:
            member = list(forest.classes_).index(1) if 1 in forest.classes_ else None
            proba = forest.predict_proba(_features(doc_values, test, edges, cfg.features))
            out[test] = proba[:, member] if member is not None else 0.0
    return out


def _sides(
    doc_index: np.ndarray, doc_labels: np.ndarray, n_splits: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    folds = sequence_folds(doc_index, doc_labels[doc_index], n_splits=n_splits, seed=seed)
    return document_sides(doc_index, folds)


def meeus_test_folds(
    doc_index: np.ndarray, doc_labels: np.ndarray, *, n_splits: int = 5, seed: int = 0
) -> list[np.ndarray]:
    """The documents each fold of :func:`meeus_scores` holds out (same ``n_splits`` and
    ``seed``), for the per-fold AUCs of :func:`imprint.metrics.cv_interval.widen_auc`."""
    sides = _sides(np.asarray(doc_index), np.asarray(doc_labels), n_splits, seed)
    return [test for _, test in sides]
