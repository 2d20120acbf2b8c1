"""Dataset inference (Maini et al. 2024, "LLM Dataset Inference"): was a *set* of documents
trained on? A statistical test, not a per-document guess.

Input: per-sequence MIA features (one column per attack score, higher = member) for a suspect
set and a validation set the model has certainly not seen, drawn from the same distribution.

1. Each set is split at random (``seed``) into two halves *of documents*.
2. On the first halves, the features are standardised and a linear combination is learned
   (logistic regression: suspect = 1, validation = 0).
3. On the second halves every sequence gets the combined score; with ``unit="document"`` the
   scores are averaged per document.
4. A one-sided Welch t-test (``scipy.stats.ttest_ind(equal_var=False, alternative="greater")``):
   H1 = the suspect half scores higher. ``p < alpha`` (0.05) flags the suspect set as trained on.

Why documents are the test's unit by default: sequences of one document are not independent (a
topic, a style), so a t-test over sequences counts one document's evidence many times and flags
unseen sets too often. Averaging per document restores independent units; ``unit="sequence"`` is
the paper's own test, right when the sequences are independent paragraphs.

A false-positive check runs the same test with two disjoint unseen sets (suspect = unseen):
p should be >= alpha. :func:`p_value_curve` repeats the test on subsets of ``n`` documents per
set to show how many documents a decision needs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from imprint.errors import ConfigError, DataError

__all__ = [
    "ALPHA",
    "MIN_DOCS",
    "CurvePoint",
    "DatasetInference",
    "dataset_inference",
    "documents_needed",
    "p_value_curve",
    "welch_greater",
]

ALPHA = 0.05
#: Documents per set: two per half, the fewest a Welch t-test can use.
MIN_DOCS = 4
Unit = Literal["document", "sequence"]


@dataclass(frozen=True)
class DatasetInference:
    """One test: p-value, t statistic, the decision at ``alpha``, the sets' sizes (documents and
    sequences with finite features), the learned weights per feature (on standardised features)."""

    p_value: float
    statistic: float
    flagged: bool
    alpha: float
    unit: str
    n_suspect_docs: int
    n_validation_docs: int
    n_suspect_seqs: int
    n_validation_seqs: int
    weights: dict[str, float] = field(default_factory=dict)
    dropped_seqs: int = 0

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def welch_greater(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(t, p) of the one-sided Welch t-test H1: mean(a) > mean(b)."""
    from scipy.stats import ttest_ind

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # zero variance: p is NaN, handled below
        result = ttest_ind(a, b, equal_var=False, alternative="greater")
    t, p = float(result.statistic), float(result.pvalue)
    if not np.isfinite(p):  # both halves constant: no evidence either way unless means differ
        diff = float(np.mean(a) - np.mean(b))
        t, p = (np.inf, 0.0) if diff > 0 else (0.0 if diff == 0 else -np.inf, 1.0)
    return t, p


def _halves(groups: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Row masks of two halves of the documents in ``groups`` (shape (n_rows,))."""
    docs = rng.permutation(np.unique(groups))
    first = docs[: len(docs) // 2]
    mask = np.isin(groups, first)
    return mask, ~mask


def _finite_rows(
    x: np.ndarray, groups: np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray, int]:
    x, groups = np.asarray(x, dtype=np.float64), np.asarray(groups)
    if x.ndim != 2 or len(x) != len(groups):
        raise DataError(
            f"{name}: features must have shape (n_sequences, n_features) with one document id "
            f"per sequence; got {x.shape} and {len(groups)} ids"
        )
    keep = np.isfinite(x).all(axis=1)
    x, groups = x[keep], groups[keep]
    n_docs = len(np.unique(groups))
    if n_docs < MIN_DOCS:
        raise DataError(
            f"dataset inference needs at least {MIN_DOCS} documents per set (two per half for "
            f"the t-test); the {name} set has {n_docs} with finite features. Add documents"
        )
    return x, groups, int((~keep).sum())


def _per_document(scores: np.ndarray, groups: np.ndarray, unit: Unit) -> np.ndarray:
    if unit == "sequence":
        return scores
    _, inverse = np.unique(groups, return_inverse=True)
    return np.bincount(inverse, weights=scores) / np.bincount(inverse)


def dataset_inference(
    suspect: np.ndarray,
    validation: np.ndarray,
    suspect_docs: np.ndarray,
    validation_docs: np.ndarray,
    *,
    feature_names: list[str] | None = None,
    alpha: float = ALPHA,
    unit: Unit = "document",
    seed: int = 0,
) -> DatasetInference:
    """The test of the module docstring. ``suspect`` (n_s, F) and ``validation`` (n_v, F) are
    per-sequence features (higher = member); ``*_docs`` give each row's document id. Rows with a
    non-finite feature are left out and counted (``dropped_seqs``)."""
    from sklearn.linear_model import LogisticRegression

    if unit not in ("document", "sequence"):
        raise ConfigError(f"unit must be 'document' or 'sequence', got {unit!r}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")
    xs, gs, drop_s = _finite_rows(suspect, suspect_docs, "suspect")
    xv, gv, drop_v = _finite_rows(validation, validation_docs, "validation")
    rng = np.random.default_rng([seed, 14])
    s_fit, s_test = _halves(gs, rng)
    v_fit, v_test = _halves(gv, rng)
    fit = np.concatenate([xs[s_fit], xv[v_fit]])
    mean, std = fit.mean(axis=0), fit.std(axis=0)
    std[std == 0] = 1.0  # a constant feature gets weight 0 from the fit
    labels = np.concatenate([np.ones(s_fit.sum()), np.zeros(v_fit.sum())])
    model = LogisticRegression(max_iter=1000).fit((fit - mean) / std, labels)
    w = model.coef_[0]
    a = _per_document(((xs[s_test] - mean) / std) @ w, gs[s_test], unit)
    b = _per_document(((xv[v_test] - mean) / std) @ w, gv[v_test], unit)
    t, p = welch_greater(a, b)
    names = feature_names or [f"f{i}" for i in range(len(w))]
    return DatasetInference(
        p_value=p,
        statistic=t,
        flagged=bool(p < alpha),
        alpha=alpha,
        unit=unit,
        n_suspect_docs=len(np.unique(gs)),
        n_validation_docs=len(np.unique(gv)),
        n_suspect_seqs=len(gs),
        n_validation_seqs=len(gv),
        weights={n: float(x) for n, x in zip(names, w, strict=True)},
        dropped_seqs=drop_s + drop_v,
    )


@dataclass(frozen=True)
class CurvePoint:
    """The test on ``n_docs`` documents per set, repeated on ``repeats`` random subsets."""

    n_docs: int
    median_p: float
    flagged_rate: float
    repeats: int


def _subset(groups: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return np.isin(groups, rng.choice(np.unique(groups), size=n, replace=False))


def p_value_curve(
    suspect: np.ndarray,
    validation: np.ndarray,
    suspect_docs: np.ndarray,
    validation_docs: np.ndarray,
    *,
    sizes: list[int] | None = None,
    repeats: int = 20,
    alpha: float = ALPHA,
    unit: Unit = "document",
    seed: int = 0,
) -> list[CurvePoint]:
    """p-value against set size: for each ``n`` (documents per set; default 4, 6, 8, ... up to
    the smaller set), the median p and the share of ``repeats`` random subsets flagged."""
    n_max = min(len(np.unique(suspect_docs)), len(np.unique(validation_docs)))
    sizes = sizes or list(range(MIN_DOCS, n_max + 1, 2)) or [n_max]
    rng = np.random.default_rng([seed, 15])
    points = []
    for n in sizes:
        if not MIN_DOCS <= n <= n_max:
            raise ConfigError(f"curve size {n} is outside [{MIN_DOCS}, {n_max}] documents per set")
        ps = []
        for r in range(repeats):
            ms, mv = (
                _subset(np.asarray(suspect_docs), n, rng),
                _subset(np.asarray(validation_docs), n, rng),
            )
            result = dataset_inference(
                np.asarray(suspect)[ms],
                np.asarray(validation)[mv],
                np.asarray(suspect_docs)[ms],
                np.asarray(validation_docs)[mv],
                alpha=alpha,
                unit=unit,
                seed=seed * 1000 + r,
            )
            ps.append(result.p_value)
        points.append(
            CurvePoint(n, float(np.median(ps)), float(np.mean(np.array(ps) < alpha)), repeats)
        )
    return points


def documents_needed(curve: list[CurvePoint], alpha: float = ALPHA) -> int | None:
    """The smallest set size whose median p is below ``alpha`` (and stays below for every larger
    size measured); None when no size reaches it."""
    needed = None
    for point in sorted(curve, key=lambda c: c.n_docs, reverse=True):
        if point.median_p < alpha:
            needed = point.n_docs
        else:
            break
    return needed
