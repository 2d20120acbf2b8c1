"""A suite of model-less ("blind") membership classifiers, cross-validated honestly.

If a classifier that never sees the model separates members from non-members, the benchmark
measures a distribution shift, not membership (Meeus et al. 2024, SoK; Das, Zhang and Tramèr
2024, "Blind Baselines Beat Membership Inference Attacks for Foundation Models"). The suite:

- ``sok_bag_of_words``: the SoK random forest on 1-gram counts (configuration of
  :mod:`imprint.diagnostics.blind`); its own 80/20 x 5 protocol AUC is reported alongside.
- ``tfidf_logreg``: TF-IDF over word 1-3 grams + logistic regression, C chosen by an inner
  3-fold cross-validation on the training fold only.
- ``date_detector``: whether the text mentions a year/date and the latest one
  (:mod:`imprint.diagnostics.dates`), fed to a logistic regression that learns the direction.
- ``greedy_ngrams``: a greedy n-gram decision list (:mod:`imprint.diagnostics.greedy`).

Protocol: stratified K-fold (seeded); every classifier is fitted on K-1 folds and scores the
held-out fold, so each sample gets exactly one out-of-fold score from a model that never saw
it. AUC and TPR at low FPR, with stratified bootstrap intervals, come from
:func:`imprint.metrics.bootstrap_metrics` on those out-of-fold scores. Higher score = member.

Choosing the strongest of m classifiers on the same scores favours whichever got lucky, so every
classifier also gets a Bonferroni-adjusted interval (level 1 - 0.05/m, ``adjusted``): the m
intervals then hold together with >= 95 % probability, and so does the one of the classifier
picked afterwards. Claims about "the strongest" (report row, warning, demo) use it. The SoK
protocol's 80/20 x 5 split AUCs are a *spread* (mean, sd), reported as such, never as an interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from imprint.diagnostics import blind as sok
from imprint.diagnostics.blind_verdict import BlindVerdict, blind_verdict
from imprint.diagnostics.dates import find_dates
from imprint.diagnostics.greedy import fit_greedy_ngrams
from imprint.errors import ConfigError, DataError
from imprint.metrics import DEFAULT_FPR_BOUNDS, MetricSummary, bootstrap_metrics
from imprint.metrics.bootstrap import fpr_key
from imprint.metrics.cv_interval import widen_auc

__all__ = [
    "BASELINES",
    "BlindSuiteResult",
    "blind_suite_warning",
    "measured_dict",
    "run_blind_suite",
    "selected_summary",
    "selection_rule",
    "strongest_blind",
    "suite_verdict",
]

TOP_K = 10
#: the coverage every claim about the strongest classifier keeps after the Bonferroni adjustment
FAMILY_CONFIDENCE = 0.95
SPREAD_KIND = "spread of the SoK protocol's 80/20 split AUCs (mean, sd), not a confidence interval"
# A fold fit returns test scores and {feature: signed weight} (positive = member direction).
FoldFit = Callable[[list[str], NDArray[np.int64], list[str], int], tuple[NDArray, dict[str, float]]]


@dataclass(frozen=True)
class BlindSuiteResult:
    """One blind classifier's out-of-fold evaluation.

    ``summary`` holds AUC and TPR at each FPR bound with bootstrap intervals (None if the
    classifier failed, then ``error`` says why); ``scores`` (shape (n,)) the out-of-fold scores;
    ``top_features`` ``(feature, weight)`` pairs, weight > 0 pointing to members, strongest
    first; ``protocol_auc`` the SoK protocol's ``(mean, std)`` AUC where it applies and
    ``protocol_aucs`` its split AUCs (a spread, not an interval); ``adjusted`` the same metrics
    with Bonferroni intervals at level ``1 - (1 - FAMILY_CONFIDENCE) / m`` for m classifiers;
    ``folds`` (shape (n,)) each text's test fold, which the attacks' paired comparison with
    ``scores`` needs (:func:`imprint.diagnostics.blind_verdict.attack_beats_text`).
    """

    name: str
    description: str
    summary: MetricSummary | None
    scores: NDArray[np.float64] = field(repr=False)
    top_features: tuple[tuple[str, float], ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    protocol_auc: tuple[float, float] | None = None
    error: str | None = None
    protocol_aucs: tuple[float, ...] = ()
    adjusted: MetricSummary | None = None
    folds: NDArray[np.int64] | None = field(default=None, repr=False)

    @property
    def auc(self) -> float:
        """Out-of-fold AUC (NaN if the classifier failed)."""
        return self.summary.auc.estimate if self.summary is not None else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``auc``, ``tpr@1%``... as ``{estimate, low, high}``, features, config."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.summary is not None:
            out.update(measured_dict(self.summary))
        out["top_features"] = [[f, w] for f, w in self.top_features]
        if self.protocol_auc is not None:
            out["protocol_auc"] = {
                "mean": self.protocol_auc[0],
                "std": self.protocol_auc[1],
                "aucs": list(self.protocol_aucs),
                "kind": SPREAD_KIND,
            }
        if self.adjusted is not None:
            out["adjusted"] = measured_dict(self.adjusted)
        out["config"] = self.config
        if self.error:
            out["error"] = self.error
        return out


def _rank(weights: dict[str, float], k: int = TOP_K) -> tuple[tuple[str, float], ...]:
    ranked = sorted(weights.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:k]
    return tuple((f, float(w)) for f, w in ranked)


def _fit_sok(train: list[str], y: NDArray, test: list[str], seed: int):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(min_df=sok.MIN_DF)
    try:
        x = vec.fit_transform(train)
    except ValueError as exc:
        raise DataError(f"no word occurs in >= {sok.MIN_DF:.0%} of training texts") from exc
    forest = RandomForestClassifier(
        n_estimators=sok.N_ESTIMATORS,
        max_depth=sok.MAX_DEPTH,
        min_samples_leaf=sok.MIN_SAMPLES_LEAF,
        n_jobs=1,  # folds run one after another; a busy machine gains little from threads
        random_state=seed,
    )
    forest.fit(x, y)
    scores = forest.predict_proba(vec.transform(test))[:, list(forest.classes_).index(1)]
    present = (x > 0).toarray()
    direction = np.sign(present[y == 1].mean(0) - present[y == 0].mean(0))
    names = vec.get_feature_names_out()
    weights = forest.feature_importances_ * direction
    return scores, {str(f): float(w) for f, w in zip(names, weights, strict=True) if w}


def _fit_tfidf(train: list[str], y: NDArray, test: list[str], seed: int):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV

    vec = TfidfVectorizer(ngram_range=(1, 3), min_df=2, sublinear_tf=True)
    try:
        x = vec.fit_transform(train)
    except ValueError as exc:
        raise DataError("no word 1-3 gram occurs in two or more training texts") from exc
    inner = max(2, min(3, int(np.bincount(y).min())))
    model = LogisticRegressionCV(
        Cs=[0.1, 1.0, 10.0, 100.0], cv=inner, scoring="roc_auc", solver="liblinear"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y)
    scores = model.predict_proba(vec.transform(test))[:, list(model.classes_).index(1)]
    coef = model.coef_.ravel() * (1 if model.classes_[1] == 1 else -1)
    names = vec.get_feature_names_out()
    return scores, {str(f): float(c) for f, c in zip(names, coef, strict=True) if c}


def _date_features(texts: Sequence[str]) -> tuple[NDArray, list[tuple[int, ...]]]:
    found = [find_dates(t) for t in texts]
    latest = np.array([d.latest if d.latest is not None else np.nan for d in found])
    return latest, [d.years for d in found]


def _fit_dates(train: list[str], y: NDArray, test: list[str], seed: int):
    from sklearn.linear_model import LogisticRegression

    latest, years = _date_features(train)
    has = ~np.isnan(latest)
    centre = float(np.nanmean(latest)) if has.any() else 0.0
    scale = float(np.nanstd(latest)) if has.sum() > 1 else 1.0
    scale = scale or 1.0

    def design(values: NDArray) -> NDArray:
        present = ~np.isnan(values)
        z = np.where(present, (values - centre) / scale, 0.0)
        return np.column_stack([present.astype(float), z])

    model = LogisticRegression(max_iter=1000).fit(design(latest), y)
    test_latest, _ = _date_features(test)
    scores = model.predict_proba(design(test_latest))[:, list(model.classes_).index(1)]
    # features: the years whose mention most shifts the member rate (train fold only)
    members, nonmembers = max(1, int(y.sum())), max(1, int((1 - y).sum()))
    counts: dict[int, list[int]] = {}
    for doc_years, label in zip(years, y, strict=True):
        for year in set(doc_years):
            counts.setdefault(year, [0, 0])[int(label)] += 1
    weights = {}
    for year, (c0, c1) in counts.items():
        if c0 + c1 >= 3:
            weights[str(year)] = math.log((c1 + 0.5) / members) - math.log((c0 + 0.5) / nonmembers)
    slope = float(model.coef_.ravel()[1]) * (1 if model.classes_[1] == 1 else -1)
    weights["<later date>"] = slope
    return scores, weights


def _fit_greedy(train: list[str], y: NDArray, test: list[str], seed: int):
    fitted = fit_greedy_ngrams(train, y)
    weights = {g: r - 0.5 for g, r in zip(fitted.ngrams, fitted.rates, strict=True)}
    return fitted.score(test), weights


#: name -> (description, fold fit)
BASELINES: dict[str, tuple[str, FoldFit]] = {
    "sok_bag_of_words": (
        "SoK random forest on 1-gram counts (500 trees, depth 2, min 10 per leaf, min_df 5 %)",
        _fit_sok,
    ),
    "tfidf_logreg": (
        "TF-IDF over word 1-3 grams + logistic regression (C by inner 3-fold CV)",
        _fit_tfidf,
    ),
    "date_detector": (
        "latest year/date mentioned (and whether any) -> logistic regression",
        _fit_dates,
    ),
    "greedy_ngrams": (
        "greedy n-gram decision list (word 1-3 grams, Das et al. 2024 style)",
        _fit_greedy,
    ),
}


def _validate(texts: Sequence[str], labels: Sequence[int], n_folds: int) -> NDArray[np.int64]:
    if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2:
        raise ConfigError(f"n_folds must be an integer >= 2, got {n_folds!r}")
    if len(texts) != len(labels):
        raise DataError(f"{len(texts)} texts but {len(labels)} labels; pass one label per text")
    if any(not isinstance(t, str) for t in texts):
        raise DataError("every text must be a string; convert or drop the others first")
    y = np.asarray(labels)
    if y.ndim != 1 or not np.isin(y, (0, 1)).all():
        raise DataError("labels must be 0 (non-member) and 1 (member)")
    counts = np.bincount(y.astype(np.int64), minlength=2)
    if counts.min() < n_folds:
        raise DataError(
            f"{n_folds}-fold cross-validation needs at least {n_folds} texts per class; got "
            f"{counts[1]} members and {counts[0]} non-members. Add texts or lower n_folds"
        )
    return y.astype(np.int64)


def _one_baseline(
    name: str,
    texts: list[str],
    y: NDArray[np.int64],
    folds: list[tuple[NDArray, NDArray]],
    *,
    seed: int,
    n_bootstrap: int,
    fpr_bounds: Sequence[float],
    groups: NDArray | None = None,
) -> BlindSuiteResult:
    description, fit = BASELINES[name]
    scores = np.full(y.size, np.nan)
    summed: dict[str, float] = {}
    try:
        for i, (train, test) in enumerate(folds):
            fold_scores, weights = fit(
                [texts[j] for j in train], y[train], [texts[j] for j in test], seed + i
            )
            scores[test] = fold_scores
            for f, w in weights.items():
                summed[f] = summed.get(f, 0.0) + w / len(folds)
    except (DataError, ValueError) as err:
        return BlindSuiteResult(name, description, None, scores, error=str(err))
    summary = bootstrap_metrics(
        y, scores, n_resamples=n_bootstrap, seed=seed, fpr_bounds=fpr_bounds, groups=groups,
        resamples="texts" if groups is None else "documents",
    )  # fmt: skip
    # the bootstrap holds the fold models fixed: widen the AUC for training variability
    summary = widen_auc(summary, y, scores, [test for _, test in folds])
    fold_of = np.empty(y.size, dtype=np.int64)
    for i, (_, test) in enumerate(folds):
        fold_of[test] = i
    return BlindSuiteResult(name, description, summary, scores, _rank(summed), folds=fold_of)


def run_blind_suite(
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    seed: int = 0,
    n_folds: int = 5,
    n_bootstrap: int = 1000,
    fpr_bounds: Sequence[float] = DEFAULT_FPR_BOUNDS,
    baselines: Sequence[str] | None = None,
    sok_protocol: bool = True,
    groups: Sequence[Any] | None = None,
) -> list[BlindSuiteResult]:
    """Run every blind classifier (or those named in ``baselines``) with out-of-fold scores.

    ``texts`` and ``labels`` have shape (n,), 1 = member. Folds come from
    ``StratifiedKFold(n_folds, shuffle=True, random_state=seed)``, the same for every
    classifier. ``sok_protocol`` also runs :func:`imprint.diagnostics.blind.blind_baseline`
    (80/20 x 5) for the SoK entry's ``protocol_auc``. A classifier that cannot be fitted gets
    ``summary=None`` and an ``error``; bad input raises :class:`DataError`. ``groups``
    (shape (n,), e.g. each sequence's document) keeps a group's texts on one side of every fold
    (``StratifiedGroupKFold``) and makes every interval resample whole groups; the SoK 80/20
    protocol, which splits texts, is then not run.
    """
    y = _validate(texts, labels, n_folds)
    names = list(BASELINES) if baselines is None else list(baselines)
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise ConfigError(f"unknown blind baseline(s) {unknown}; choose from {list(BASELINES)}")
    text_list = list(texts)
    group_arr = None if groups is None else np.asarray([str(g) for g in groups])
    folds = _folds(y, group_arr, n_folds, seed)
    results = []
    kw: dict[str, Any] = {"seed": seed, "n_bootstrap": n_bootstrap, "fpr_bounds": fpr_bounds}
    for name in names:
        result = _one_baseline(name, text_list, y, folds, groups=group_arr, **kw)
        config = {"n_folds": n_folds, "seed": seed, "n_bootstrap": n_bootstrap}
        result = replace(result, config=config)
        if name == "sok_bag_of_words" and sok_protocol and result.error is None and groups is None:
            result = _with_protocol(result, text_list, y, seed=seed)
        results.append(result)
    return _with_adjusted(results, y, groups=group_arr, folds=folds, **kw)


def _folds(
    y: NDArray[np.int64], groups: NDArray | None, n_folds: int, seed: int
) -> list[tuple[NDArray, NDArray]]:
    """Stratified folds over texts, or over groups (a group's texts on one side) when given."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is None:
        splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(y.size), y))
    per_class = [np.unique(groups[y == c]).size for c in (1, 0)]
    if min(per_class) < n_folds:
        raise DataError(
            f"{n_folds}-fold cross-validation over documents needs at least {n_folds} documents "
            f"per class; got {per_class[0]} member and {per_class[1]} non-member documents. Add "
            "documents or lower n_folds"
        )
    grouped = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return list(grouped.split(np.zeros(y.size), y, groups))


def _with_protocol(
    result: BlindSuiteResult, texts: list[str], y: NDArray[np.int64], *, seed: int
) -> BlindSuiteResult:
    """The SoK entry plus the spread of its own protocol's split AUCs (80/20 x 5)."""
    try:
        ref = sok.blind_baseline(texts, y.tolist(), seed=seed)
    except DataError:
        return result
    return replace(result, protocol_auc=(ref.auc_mean, ref.auc_std), protocol_aucs=ref.aucs)


def _with_adjusted(
    results: list[BlindSuiteResult],
    y: NDArray[np.int64],
    *,
    seed: int,
    n_bootstrap: int,
    fpr_bounds: Sequence[float],
    groups: NDArray | None = None,
    folds: list[tuple[NDArray, NDArray]] | None = None,
) -> list[BlindSuiteResult]:
    """Each fitted classifier's Bonferroni interval over the m fitted: level 1 - 0.05/m. The
    same seed draws the same resamples, so only the quantiles differ from ``summary``; with
    ``folds`` the AUC is widened as ``summary``'s (:func:`widen_auc`)."""
    fitted = [r for r in results if r.summary is not None]
    level = 1 - (1 - FAMILY_CONFIDENCE) / max(1, len(fitted))
    out = []
    for r in results:
        if r.summary is not None:
            adjusted = bootstrap_metrics(
                y, r.scores, n_resamples=n_bootstrap, seed=seed, fpr_bounds=fpr_bounds,
                confidence=level, groups=groups, resamples=r.summary.resamples,
            )  # fmt: skip
            if folds is not None:
                adjusted = widen_auc(adjusted, y, r.scores, [test for _, test in folds])
            r = replace(r, adjusted=adjusted, config={**r.config, "adjusted_confidence": level})
        out.append(r)
    return out


def measured_dict(summary: MetricSummary) -> dict[str, Any]:
    """``summary.to_dict()`` with each TPR@t its non-members cannot resolve (fewer than 4/t)
    written as ``{estimate: None, ..., not_measurable: why}``: no number stands in for it."""
    out = summary.to_dict()
    for bound, reason in summary.unresolved().items():
        out[fpr_key(bound)] = {
            "estimate": None,
            "low": None,
            "high": None,
            "not_measurable": reason,
        }
    return out


def strongest_blind(results: Sequence[BlindSuiteResult]) -> BlindSuiteResult | None:
    """The classifier with the highest out-of-fold AUC (None if every one failed)."""
    ok = [r for r in results if r.summary is not None and not math.isnan(r.auc)]
    return max(ok, key=lambda r: r.auc) if ok else None


def selected_summary(
    results: Sequence[BlindSuiteResult],
) -> tuple[BlindSuiteResult, MetricSummary, int] | None:
    """The strongest classifier, the metrics any claim about it must use, and m (classifiers it
    was chosen from): its Bonferroni-adjusted intervals when m > 1, its own 95 % ones when the
    choice was fixed in advance (m = 1)."""
    best = strongest_blind(results)
    if best is None or best.summary is None:
        return None
    m = sum(r.summary is not None for r in results)
    return best, (best.adjusted if m > 1 and best.adjusted else best.summary), m


def suite_verdict(results: Sequence[BlindSuiteResult]) -> BlindVerdict | None:
    """The three-state blind verdict (:func:`imprint.diagnostics.blind_verdict.blind_verdict`)
    of the strongest classifier's selection-adjusted AUC interval; None if none was fitted."""
    selected = selected_summary(results)
    if selected is None:
        return None
    best, summary, m = selected
    return blind_verdict(
        summary.auc, classifier=best.name, n_classifiers=m, confidence=summary.confidence
    )


def blind_suite_warning(results: Sequence[BlindSuiteResult]) -> str | None:
    """The run warning: the verdict's reason when its state is ``shift`` (the strongest
    classifier's selection-adjusted interval lies above 0.5), with its TPR at 1 % FPR and most
    telling features; None in the other states (:func:`suite_verdict`)."""
    verdict = suite_verdict(results)
    selected = selected_summary(results)
    if verdict is None or selected is None or verdict.state != "shift":
        return None
    best, summary, _ = selected
    tpr = summary.tpr_at_fpr.get(0.01)
    tpr_text = f" TPR {tpr.estimate:.1%} at 1 % FPR." if tpr is not None else ""
    if 0.01 in summary.tpr_at_fpr and summary.unresolved((0.01,)):
        counted = summary.n_nonmember_units or summary.n_nonmembers
        unit = f"non-member {summary.resamples or 'groups'}"
        what = "non-members" if summary.n_nonmember_units is None else unit
        tpr_text = f" TPR at 1 % FPR not measurable with {counted} {what}."
    words = ", ".join(repr(f) for f, _ in best.top_features[:5])
    hint = f" Most telling features: {words}." if words else ""
    return verdict.reason + tpr_text + hint


def selection_rule(m: int) -> str:
    """How the strongest of ``m`` classifiers was picked and the level its intervals keep."""
    return (
        f"strongest of {m} by out-of-fold AUC; Bonferroni interval at level "
        f"1 - {1 - FAMILY_CONFIDENCE:g}/{m}"
    )
