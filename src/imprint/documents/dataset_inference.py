"""Dataset inference (Maini et al. 2024, "LLM Dataset Inference"): was a *set* of documents
trained on? A statistical test, not a per-document guess.

Input: per-sequence MIA features (one column per attack score, higher = member) for a suspect
set and a validation set the model has certainly not seen, drawn from the same distribution.

1. Each set is split at random (``seed``) into two halves *of documents*.
2. Outliers clipped per feature by the authors' rule (``clip=0.05``: the ``int(n * 0.05 / 2)``
   lowest values set to the highest of them, the same at the top; :func:`clip_outliers`),
   with bounds from the fit halves' rows, applied to every row (``clip_from="set"``: each
   whole set by its own rows, as the authors place it).
3. On the first halves, the features are standardised and a linear combination is learned the
   authors' way: a linear model, binary cross-entropy, full-batch Adam (lr 0.01, 1,000 steps),
   no penalty (:func:`fit_linear`; suspect = 1, validation = 0).
4. On the second halves every sequence gets the combined score; with ``unit="document"`` the
   scores are averaged per document.
5. A one-sided Welch t-test (``scipy.stats.ttest_ind(equal_var=False, alternative="greater")``):
   H1 = the suspect half scores higher. ``p < alpha`` (0.05) flags the suspect set.

Why documents are the test's unit by default: sequences of one document are not independent (a
topic, a style), so a t-test over sequences counts one document's evidence many times and flags
unseen sets too often. Averaging per document restores independent units; ``unit="sequence"`` is
the paper's own test, right when the sequences are independent paragraphs. Every difference from
the authors' code is in :data:`DEVIATIONS`.

A false-positive check runs the same test with two disjoint unseen sets (suspect = unseen):
p should be >= alpha. :func:`p_value_curve` repeats the test on subsets of ``n`` documents per
set to show how many documents a decision needs; :mod:`imprint.documents.di_verdict` turns the
three into one verdict (trained on / not detected / inconclusive).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from imprint.errors import ConfigError, DataError

__all__ = [
    "ALPHA",
    "CLIP",
    "DEVIATIONS",
    "MIN_DOCS",
    "CurvePoint",
    "DatasetInference",
    "clip_outliers",
    "dataset_inference",
    "documents_needed",
    "curve_sizes",
    "fit_linear",
    "p_value_curve",
    "welch_greater",
]

ALPHA = 0.05
#: Documents per set: two per half, the fewest a Welch t-test can use.
MIN_DOCS = 4
#: The authors' outlier share (``remove_frac`` in their ``linear_di.py``): 2.5 % per tail.
CLIP = 0.05
#: The authors' training of the linear combination (``linear_di.py``: Adam, lr 0.01, 1,000 epochs).
ADAM_LR, ADAM_STEPS = 0.01, 1000
#: Where imprint's dataset inference differs from the authors' code, one sentence each.
DEVIATIONS = (
    "the test unit is the per-document mean of the combined score (the authors test sequences): "
    "sequences of one document are correlated and a test over them flags unseen sets too often; "
    "unit='sequence' gives theirs",
    "Welch's t-test (unequal variances) where the authors use Student's (equal variances): "
    "the size holds when the two halves' spreads differ",
    "the linear model starts at zero weights (the authors: PyTorch's random initialisation), so "
    "the fit is the same for every seed",
    "features are standardised with the fit halves' pooled mean and deviation (the authors: the "
    "whole suspect set's), so nothing fitted has seen a test half",
    "outliers are clipped with bounds from the fit halves' rows pooled, applied to every row "
    "(the authors: each whole set by its own rows, clip_from='set'): with set bounds the test "
    "halves shape what the fit learns, and with heavy-tailed scores the size grew to 0.18 at "
    "alpha 0.05 in simulation (0.02 with fit bounds)",
    "a set with fewer than 40 rows is left as it is (k = int(n * 0.05 / 2) = 0, where the "
    "authors' code fails; their rule changes nothing at k = 1 either, under 80 rows)",
)
Unit = Literal["document", "sequence"]
ClipFrom = Literal["fit", "set"]


@dataclass(frozen=True)
class DatasetInference:
    """One test: p-value, t statistic, the decision at ``alpha``, the sets' sizes (documents and
    sequences with finite features), the learned weights per feature (on standardised features),
    the outlier share clipped (``clip``, 0 = none) and how the combination was fitted."""

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
    clip: float = CLIP
    clip_from: str = "fit"
    combiner: str = f"linear, cross-entropy, Adam lr {ADAM_LR}, {ADAM_STEPS} steps, no penalty"

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


def _bounds(x: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Per column of ``x``: the k-th smallest and k-th largest value, k = int(n * fraction / 2)
    (the authors' count); None when k = 0."""
    k = int(len(x) * fraction / 2)
    if k == 0:
        return None
    ordered = np.sort(x, axis=0)
    return ordered[k - 1], ordered[len(x) - k]


def clip_outliers(x: np.ndarray, fraction: float = CLIP) -> np.ndarray:
    """The authors' outlier clipping (``remove_outliers(..., outliers="clip")``), per column of
    ``x`` (n, F): with ``k = int(n * fraction / 2)``, the k smallest values are set to the k-th
    smallest and the k largest to the k-th largest (so k - 1 per tail change; none for k <= 1:
    fewer than 80 rows at the default 0.05)."""
    x = np.array(x, dtype=np.float64)
    bounds = _bounds(x, fraction)
    return x if bounds is None else np.clip(x, *bounds)


def _clipped(
    xs: np.ndarray, xv: np.ndarray, fit_rows: np.ndarray, clip: float, clip_from: ClipFrom
) -> tuple[np.ndarray, np.ndarray]:
    """Both sets clipped: ``"set"`` each set by its own rows (the authors'), ``"fit"`` both by
    bounds from the fit halves' rows pooled (``fit_rows``), so no test row shapes them."""
    if clip_from == "set":
        return clip_outliers(xs, clip), clip_outliers(xv, clip)
    bounds = _bounds(fit_rows, clip)
    return (xs, xv) if bounds is None else (np.clip(xs, *bounds), np.clip(xv, *bounds))


def fit_linear(
    x: np.ndarray, y: np.ndarray, *, lr: float = ADAM_LR, steps: int = ADAM_STEPS
) -> tuple[np.ndarray, float]:
    """(weights, bias) of a linear model fitted the authors' way (``linear_di.train_model``):
    mean binary cross-entropy on all rows at once, Adam (beta 0.9 / 0.999, eps 1e-8, as
    PyTorch's), ``steps`` steps from zero, no penalty. ``x`` (n, F), ``y`` (n,) in {0, 1}."""
    from scipy.special import expit

    design = np.column_stack([np.asarray(x, dtype=np.float64), np.ones(len(x))])
    target = np.asarray(y, dtype=np.float64)
    theta, m, v = (np.zeros(design.shape[1]) for _ in range(3))
    for t in range(1, steps + 1):
        grad = design.T @ (expit(design @ theta) - target) / len(target)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        theta -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return theta[:-1], float(theta[-1])


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
    clip: float = CLIP,
    clip_from: ClipFrom = "fit",
) -> DatasetInference:
    """The test of the module docstring. ``suspect`` (n_s, F) and ``validation`` (n_v, F) are
    per-sequence features (higher = member); ``*_docs`` give each row's document id. Rows with a
    non-finite feature are left out and counted (``dropped_seqs``); then outliers are clipped
    (``clip``: the share of rows per feature, half per tail; 0 turns it off) with bounds from
    the fit halves (``clip_from="fit"``) or, as the authors do, from each whole set (``"set"``:
    the bounds then depend on the test halves too, and with heavy tails the test's size grows
    far past alpha; :mod:`imprint.documents.di_calibration` measures it)."""
    if unit not in ("document", "sequence"):
        raise ConfigError(f"unit must be 'document' or 'sequence', got {unit!r}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")
    if isinstance(clip, bool) or not 0 <= clip < 1:
        raise ConfigError(f"clip must be a share in [0, 1), got {clip!r} (the authors: 0.05)")
    if clip_from not in ("fit", "set"):
        raise ConfigError(f"clip_from must be 'fit' or 'set' (the authors'), got {clip_from!r}")
    xs, gs, drop_s = _finite_rows(suspect, suspect_docs, "suspect")
    xv, gv, drop_v = _finite_rows(validation, validation_docs, "validation")
    rng = np.random.default_rng([seed, 14])
    s_fit, s_test = _halves(gs, rng)
    v_fit, v_test = _halves(gv, rng)
    xs, xv = _clipped(xs, xv, np.concatenate([xs[s_fit], xv[v_fit]]), clip, clip_from)
    fit = np.concatenate([xs[s_fit], xv[v_fit]])
    mean, std = fit.mean(axis=0), fit.std(axis=0)
    std[std == 0] = 1.0  # a constant feature gets weight 0 from the fit
    labels = np.concatenate([np.ones(s_fit.sum()), np.zeros(v_fit.sum())])
    w, _ = fit_linear((fit - mean) / std, labels)
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
        clip=clip,
        clip_from=clip_from,
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


def curve_sizes(n_max: int) -> list[int]:
    """The power table's sizes: 4, 6, 8, ... to 24, then about 25 % apart (even), and ``n_max``
    itself, so a large set costs tens of sizes, not hundreds."""
    sizes = list(range(MIN_DOCS, min(n_max, 24) + 1, 2))
    n = 24
    while (n := 2 * round(n * 1.25 / 2)) < n_max:
        sizes.append(n)
    return sorted({*sizes, n_max}) if n_max >= MIN_DOCS else [n_max]


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
    clip: float = CLIP,
    clip_from: ClipFrom = "fit",
) -> list[CurvePoint]:
    """p-value against set size: for each ``n`` (documents per set; default
    :func:`curve_sizes` up to the smaller set), the median p and the share of ``repeats`` random
    subsets flagged."""
    n_max = min(len(np.unique(suspect_docs)), len(np.unique(validation_docs)))
    sizes = sizes or curve_sizes(n_max)
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
                clip=clip,
                clip_from=clip_from,
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
