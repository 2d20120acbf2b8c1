"""The evaluation step of a run: every figure and warning, computed once, as :class:`RunMetrics`.

Score columns get bootstrap intervals; the blind (model-less) suite is fitted here and only here
(once per run: each classifier once per fold, the SoK protocol's splits once); breakdown groups
and warnings follow. The report stage (:mod:`imprint.report`) only renders what this returns.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.diagnostics.blind_suite import (
    SPREAD_KIND,
    BlindSuiteResult,
    blind_suite_warning,
    run_blind_suite,
    selected_summary,
    selection_rule,
)
from imprint.diagnostics.blind_verdict import NO_SHIFT_MARGIN, compare_with_text
from imprint.errors import DataError
from imprint.evaluation.columns import as_column
from imprint.evaluation.comparisons import run_comparisons
from imprint.evaluation.curves import RocCurve, roc_with_band
from imprint.evaluation.degenerate import degenerate_warnings
from imprint.evaluation.interval_warnings import interval_warnings
from imprint.evaluation.results import (
    BlindClassifierMetrics,
    BlindFailure,
    BlindSuiteMetrics,
    Breakdown,
    RunMetrics,
    RunWarning,
    Selection,
    SkippedGroup,
    Spread,
)
from imprint.metrics import (
    DEFAULT_FPR_BOUNDS,
    MetricSummary,
    UndefinedMetricWarning,
    bootstrap_metrics,
    min_nonmembers,
)

SKIPPED_GROUP = "needs members and non-members"


def column_metrics(
    labels: np.ndarray,
    scores: np.ndarray,
    *,
    n_bootstrap: int,
    seed: int,
    groups: np.ndarray | None = None,
) -> MetricSummary:
    """Bootstrap metrics of one score column; NaN scores are excluded and counted, not hidden.
    With ``groups`` (each sample's document) whole documents are resampled: sequences of one
    document are correlated, and resampling them one by one gives intervals far too narrow."""
    finite = ~np.isnan(scores)
    unit = "texts" if groups is None else "documents"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # reported as a run warning
        summary = bootstrap_metrics(
            labels[finite],
            scores[finite],
            n_resamples=n_bootstrap,
            seed=seed,
            groups=None if groups is None else groups[finite],
            resamples=unit,
        )
    return mark_unmeasurable(as_column(summary, n_nan=int((~finite).sum())))


def mark_unmeasurable(column: MetricSummary) -> MetricSummary:
    """``column`` with each TPR@t that its non-members cannot resolve marked not measurable,
    with the reason (the one rule of :mod:`imprint.metrics.resolution`; non-member documents
    count when the column resampled documents, texts in folders that did not record them)."""
    reasons = column.unresolved()
    # no number may stand in for an unmeasurable one
    tprs = {b: None if b in reasons else v for b, v in column.tpr_at_fpr.items()}
    return replace(column, tpr_at_fpr=tprs, not_measurable=reasons)


def _classifier_row(result: BlindSuiteResult, unit: str) -> BlindClassifierMetrics:
    """One fitted (or failed) blind classifier as the run records it: every TPR@t its
    non-members cannot resolve marked not measurable, intervals naming what they resample."""

    def fix(summary: MetricSummary | None) -> MetricSummary | None:
        if summary is None:
            return None
        return replace(mark_unmeasurable(as_column(summary)), resamples=unit)

    protocol = None
    if result.protocol_auc is not None:
        mean, std = result.protocol_auc
        protocol = Spread(mean, std, result.protocol_aucs, SPREAD_KIND)
    return BlindClassifierMetrics(
        name=result.name,
        description=result.description,
        summary=fix(result.summary),
        top_features=result.top_features,
        config=result.config,
        protocol=protocol,
        adjusted=fix(result.adjusted),
        error=result.error,
        warning=blind_suite_warning([result]),
    )


def evaluate_blind(
    texts: Sequence[str],
    labels: np.ndarray,
    *,
    seed: int,
    n_bootstrap: int,
    groups: np.ndarray | None = None,
    unit: str | None = None,
    baselines: Sequence[str] | None = None,
) -> tuple[BlindClassifierMetrics | BlindFailure, BlindSuiteMetrics | BlindFailure]:
    """Fit the blind suite once: (the SoK forest's row, the suite). The SoK row's ``auc`` is the
    95 % bootstrap interval of its pooled out-of-fold scores (a classifier fixed in advance, so
    no selection adjustment) and its protocol's 80/20 split AUCs a ``protocol`` spread; the
    suite's strongest classifier carries the Bonferroni intervals any claim about it needs
    (:func:`~imprint.diagnostics.blind_suite.selected_summary`). ``groups`` (each text's
    document) keeps documents whole in folds and resamples; ``unit`` names what the intervals
    resample (default "texts", or "documents" with ``groups``); ``baselines`` the classifiers
    (default all). Unusable input gives :class:`BlindFailure` (why) for both."""
    blind, suite, _, _ = _fit_blind(texts, labels, seed=seed, n_bootstrap=n_bootstrap,
                                    groups=groups, unit=unit, baselines=baselines)  # fmt: skip
    return blind, suite


def evaluate_blind_scores(
    texts: Sequence[str], labels: np.ndarray, *, seed: int, n_bootstrap: int
) -> tuple[
    BlindClassifierMetrics | BlindFailure,
    BlindSuiteMetrics | BlindFailure,
    BlindSuiteResult | None,
]:
    """:func:`evaluate_blind` plus the strongest classifier (None when nothing was fitted),
    whose out-of-fold ``scores`` and ``folds`` (each shape (n,)) an attack is compared with,
    paired, on the same texts (:func:`imprint.diagnostics.blind_verdict.attack_beats_text`)."""
    blind, suite, _, best = _fit_blind(texts, labels, seed=seed, n_bootstrap=n_bootstrap,
                                       groups=None, unit=None)  # fmt: skip
    return blind, suite, best


#: the blind curve's band is a plain bootstrap of the classifier picked as the best of the suite
BLIND_CURVE_NOTE = "not selection-adjusted: the strongest blind classifier's own curve"


def _fit_blind(
    texts: Sequence[str],
    labels: np.ndarray,
    *,
    seed: int,
    n_bootstrap: int,
    groups: np.ndarray | None,
    unit: str | None,
    baselines: Sequence[str] | None = None,
) -> tuple[
    BlindClassifierMetrics | BlindFailure,
    BlindSuiteMetrics | BlindFailure,
    RocCurve | None,
    BlindSuiteResult | None,
]:
    """:func:`evaluate_blind`, plus the strongest classifier's ROC with its band (from its
    out-of-fold scores, resampled as the attacks' columns are), for the report's dashed curve,
    and that classifier (its out-of-fold scores and folds, for the attacks' paired comparison
    with them)."""
    unit = unit or ("texts" if groups is None else "documents")
    try:
        results = run_blind_suite(
            list(texts),
            labels.tolist(),
            seed=seed,
            n_bootstrap=n_bootstrap,
            baselines=baselines,
            groups=None if groups is None else groups.tolist(),
        )
    except DataError as err:
        return BlindFailure(str(err)), BlindFailure(str(err)), None, None
    selected = selected_summary(results)
    if selected is None:
        errors = "; ".join(f"{r.name}: {r.error}" for r in results)
        failure = BlindFailure(f"no blind baseline could be fitted ({errors})")
        return failure, failure, None, None
    best, summary, m = selected
    curve = roc_with_band(labels, np.asarray(best.scores, dtype=float), n_bootstrap=n_bootstrap,
                          seed=seed, groups=groups, resamples=unit)  # fmt: skip
    if curve is not None:  # the chosen classifier's own curve: its AUC alone is adjusted
        curve = replace(curve, note=BLIND_CURVE_NOTE)
    rows = {r.name: _classifier_row(r, unit) for r in results}
    suite = BlindSuiteMetrics(
        strongest=best.name,
        selected=replace(mark_unmeasurable(as_column(summary)), resamples=unit),
        auc_unadjusted=None if best.summary is None else best.summary.auc,
        selection=Selection(m, summary.confidence, selection_rule(m)),
        warning=blind_suite_warning(results),
        baselines=rows,
    )
    sok = rows.get("sok_bag_of_words")
    if sok is None:
        return BlindFailure("not run"), suite, curve, best
    if sok.summary is None:
        return BlindFailure(sok.error or "not fitted"), suite, curve, best
    return replace(sok, adjusted=None), suite, curve, best


def evaluate_scores(
    samples: Sequence[Sample], scores: dict[str, np.ndarray], *, config: Any
) -> RunMetrics:
    """Every figure of a run: per score column, blind baselines (when ``config.blind``), per
    breakdown group (``config.breakdown``, a meta field), every pair of score columns compared
    on the same samples (:mod:`.comparisons`), and the warnings they call for.
    ``config`` supplies ``n_bootstrap``, ``seed``, ``blind`` and ``breakdown``."""
    labels = np.array([s.label for s in samples])
    kwargs: dict[str, Any] = {"n_bootstrap": config.n_bootstrap, "seed": config.seed}
    kwargs["groups"] = document_groups(samples, config)
    attacks = {c: column_metrics(labels, v, **kwargs) for c, v in scores.items()}
    unit = "texts" if kwargs["groups"] is None else "documents"
    curves = {c: roc_with_band(labels, v, **kwargs, resamples=unit) for c, v in scores.items()}
    blind: BlindClassifierMetrics | BlindFailure | None = None
    suite: BlindSuiteMetrics | BlindFailure | None = None
    blind_curve = best = None
    if config.blind:
        texts = [s.text for s in samples]
        blind, suite, blind_curve, best = _fit_blind(
            texts, labels, seed=config.seed, n_bootstrap=config.n_bootstrap,
            groups=kwargs["groups"], unit=None,
        )  # fmt: skip
    breakdown = None
    if config.breakdown:
        breakdown = breakdown_metrics(samples, scores, config.breakdown, **kwargs)
    compared = run_comparisons(samples, scores, **kwargs)  # every pair, on the same samples
    metrics = RunMetrics(attacks, (), blind, suite, breakdown, NO_SHIFT_MARGIN,
                         comparisons=compared)  # fmt: skip
    metrics = replace(metrics, roc=_drawn(curves), blind_roc=blind_curve)
    if isinstance(suite, BlindSuiteMetrics) and best is not None:
        oof = np.asarray(best.scores, dtype=float)
        text = compare_with_text(labels, scores, oof, blind=suite.strongest,
                                 groups=kwargs["groups"], folds=best.folds)  # fmt: skip
        metrics = replace(metrics, blind_verdict=suite.verdict(), text_comparisons=text)
    found = run_warnings(metrics, int((labels == 0).sum())) + tuple(degenerate_warnings(scores))
    return replace(metrics, warnings=found)


def _drawn(curves: dict[str, RocCurve | None]) -> dict[str, RocCurve]:
    """The columns that have a curve (both classes scored)."""
    return {c: v for c, v in curves.items() if v is not None}


def document_groups(samples: Sequence[Sample], config: Any) -> np.ndarray | None:
    """Each sample's document in a ``--unit document`` run (its sequences are resampled
    together), else None (every text is its own unit)."""
    if getattr(config, "documents", None) is None:
        return None
    from imprint.documents.split import DOC_ID

    return np.array([str(s.meta[DOC_ID]) for s in samples])


def recorded_documents(samples: Sequence[Sample], n: int) -> np.ndarray | None:
    """Each sample's document as a ``--unit document`` run recorded it, or None when any of
    the ``n`` samples lacks one (a folder read back, whose run config is not at hand)."""
    from imprint.documents.split import DOC_ID

    ids = [s.meta.get(DOC_ID) if s.meta else None for s in samples]
    if len(ids) != n or any(i is None for i in ids):
        return None
    return np.array([str(i) for i in ids])


def run_warnings(metrics: RunMetrics, n_nonmembers: int) -> tuple[RunWarning, ...]:
    """The warnings ``metrics`` call for, each with its kind."""
    out: list[RunWarning] = []
    blind, suite = metrics.blind, metrics.blind_suite
    # the blind warning comes from the strongest model-less classifier (SoK forest included)
    message = (suite.warning if isinstance(suite, BlindSuiteMetrics) else None) or (
        blind.warning if isinstance(blind, BlindClassifierMetrics) else None
    )
    if message:
        out.append(RunWarning("blind_not_at_chance", message))
    for name, fitted in (("SoK blind baseline", blind), ("blind suite", suite)):
        if isinstance(fitted, BlindFailure):
            out.append(RunWarning("blind_not_computed", f"{name} not computed: {fitted.error}"))
    for column, row in metrics.attacks.items():
        if row.n_nan:
            out.append(
                RunWarning(
                    "unscored_samples",
                    f"{column}: {row.n_nan} samples had no defined score and were left out",
                )
            )
    return tuple(out + _class_warnings(metrics, n_nonmembers) + interval_warnings(metrics))


def _class_warnings(metrics: RunMetrics, n_nonmembers: int) -> list[RunWarning]:
    """Figures that are undefined or unmeasurable because a class is missing or too small."""
    out = []
    loosest = max(DEFAULT_FPR_BOUNDS)
    # where documents are resampled the rule counts non-member documents
    units = [r.n_nonmember_units for r in metrics.attacks.values() if r.n_nonmember_units]
    counted, what = (min(units), "non-member documents") if units else (n_nonmembers, "non-members")
    if 0 < counted < min_nonmembers(loosest):
        out.append(
            RunWarning(
                "few_nonmembers",
                f"only {counted} {what}: no TPR@FPR figure is measurable (even an "
                f"FPR of {loosest * 100:g} % needs at least {min_nonmembers(loosest)}); add "
                f"{what}",
            )
        )
    for column, row in metrics.attacks.items():
        missing = [
            w for w, n in (("member", row.n_members), ("non-member", row.n_nonmembers)) if not n
        ]
        if missing:
            out.append(
                RunWarning(
                    "single_class",
                    f"{column}: no {' and no '.join(missing)} has a defined score, so its AUC "
                    "and TPR are undefined",
                )
            )
    if metrics.breakdown is not None:
        out += _skipped_groups(metrics.breakdown)
    return out


def _skipped_groups(breakdown: Breakdown, *, shown: int = 10) -> list[RunWarning]:
    """One warning naming the breakdown groups left unscored (the first ``shown`` of them)."""
    skipped = [(g, v.n) for g, v in breakdown.groups.items() if isinstance(v, SkippedGroup)]
    if not skipped:
        return []
    names = ", ".join(f"{g!r} ({n} sample{'s' * (n != 1)})" for g, n in skipped[:shown])
    more = f" and {len(skipped) - shown} more" if len(skipped) > shown else ""
    return [
        RunWarning(
            "single_class",
            f"breakdown by {breakdown.field}: {len(skipped)} group(s) lack members or "
            f"non-members and are not scored: {names}{more}",
        )
    ]


def breakdown_metrics(
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    field: str,
    *,
    n_bootstrap: int,
    seed: int,
    groups: np.ndarray | None = None,
) -> Breakdown:
    """Metrics per value of ``meta[field]``; groups lacking a class are reported, not scored.
    ``groups``: each sample's document, resampled whole (see :func:`column_metrics`)."""
    values = [str(s.meta.get(field, "(missing)")) for s in samples]
    labels = np.array([s.label for s in samples])
    groups_out: dict[str, dict[str, MetricSummary] | SkippedGroup] = {}
    for group in sorted(set(values), key=_natural):
        mask = np.array([v == group for v in values])
        if len(set(labels[mask])) < 2:
            groups_out[group] = SkippedGroup(SKIPPED_GROUP, int(mask.sum()))
            continue
        docs = None if groups is None else groups[mask]
        groups_out[group] = {
            c: column_metrics(
                labels[mask], v[mask], n_bootstrap=n_bootstrap, seed=seed, groups=docs
            )
            for c, v in scores.items()
        }
    return Breakdown(field, groups_out)


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
