"""Metrics for a run: score columns with intervals, the blind baseline, breakdowns, warnings."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.diagnostics import BLIND_WARN_DELTA, blind_suite_report
from imprint.metrics import DEFAULT_FPR_BOUNDS, UndefinedMetricWarning, bootstrap_metrics
from imprint.metrics.bootstrap import fpr_key

BLIND_NAME = "blind (bag-of-words, no model)"


def column_metrics(
    labels: np.ndarray, scores: np.ndarray, *, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """Bootstrap metrics of one score column; NaN scores are excluded and counted, not hidden."""
    finite = ~np.isnan(scores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        summary = bootstrap_metrics(
            labels[finite], scores[finite], n_resamples=n_bootstrap, seed=seed
        )
    out = mark_unmeasurable(summary.to_dict(), summary.n_nonmembers)
    out["n_nan"] = int((~finite).sum())
    return out


def min_nonmembers(max_fpr: float) -> int:
    """Non-members needed before one false positive is an FPR of at most ``max_fpr`` (1/t)."""
    return math.ceil(1 / max_fpr - 1e-9)  # 1e-9: 1 / 0.001 must give 1000, not 1001


def mark_unmeasurable(row: dict[str, Any], n_nonmembers: int) -> dict[str, Any]:
    """Replace each ``tpr@t%`` cell that ``n_nonmembers`` cannot resolve (fewer than 1/t) by
    ``{estimate: None, ..., "not_measurable": why}``: with fewer, the smallest non-zero FPR
    exceeds t, so the figure would only be the TPR at zero false positives."""
    for bound in DEFAULT_FPR_BOUNDS:
        key, need = fpr_key(bound), min_nonmembers(bound)
        if key in row and n_nonmembers < need:
            smallest = f"1/{n_nonmembers} = {100 / n_nonmembers:.2g} %" if n_nonmembers else "none"
            row[key] = {
                "estimate": None,
                "low": None,
                "high": None,
                "not_measurable": (
                    f"an FPR of {bound * 100:g} % needs at least {need} non-members; this "
                    f"evaluation has {n_nonmembers} (smallest non-zero FPR {smallest}), so the "
                    "figure would only be the TPR at zero false positives"
                ),
            }
    return row


def blind_metrics(suite: dict[str, Any]) -> dict[str, Any]:
    """The SoK forest's row, taken from the suite (``blind_suite_report``): ``auc`` is the 95 %
    stratified bootstrap interval of its pooled 5-fold out-of-fold scores (a classifier fixed in
    advance, so no selection adjustment); ``spread`` the mean and sd of its own protocol's 80/20
    split AUCs, labelled a spread, never an interval; ``warning`` the one it alone would give."""
    if "error" in suite:
        return {"error": suite["error"]}
    row = dict(suite["baselines"].get("sok_bag_of_words") or {"error": "not run"})
    if "error" in row:
        return {"error": row["error"]}
    row.pop("adjusted", None)
    row["spread"] = row.pop("protocol_auc", None)
    return row


def blind_description(metrics: dict[str, Any]) -> str:
    """How the report's blind rows were computed, with the SoK spread and the adjustment level."""
    spread = (metrics.get("blind") or {}).get("spread")
    selection = (metrics.get("blind_suite") or {}).get("selection")
    sok = "the SoK bag-of-words random forest (95 % bootstrap interval of its 5-fold out-of-fold "
    sok += "scores"
    if spread:
        sok += (
            f"; its {len(spread['aucs'])} 80/20 split AUCs spread {spread['mean']:.3f} +- "
            f"{spread['std']:.3f} sd, a spread and not an interval"
        )
    best = "the strongest of the model-less suite (SoK forest, TF-IDF logistic regression, date "
    best += "detector, greedy n-grams; 5-fold out-of-fold scores"
    if selection:
        best += (
            f"; chosen as the best of {selection['n_classifiers']} on these scores, so its "
            f"intervals are Bonferroni-adjusted to {selection['confidence']:.2%} and hold "
            "at 95 % despite the choice"
        )
    return (
        f"The blind rows never see the model: {sok}) and {best}). Attack AUCs near them "
        "measure the benchmark, not membership."
    )


def evaluate_scores(
    samples: Sequence[Sample], scores: dict[str, np.ndarray], *, config: Any
) -> dict[str, Any]:
    """The ``metrics.json`` content: per attack, per breakdown group, blind baseline, warnings."""
    labels = np.array([s.label for s in samples])
    kwargs = {"n_bootstrap": config.n_bootstrap, "seed": config.seed}
    metrics: dict[str, Any] = {
        "attacks": {c: column_metrics(labels, v, **kwargs) for c, v in scores.items()},
        "warnings": [],
    }
    if config.blind:
        suite = blind_suite_report(
            [s.text for s in samples],
            labels.tolist(),
            seed=config.seed,
            n_bootstrap=config.n_bootstrap,
        )
        metrics["blind"] = blind_metrics(suite)  # the SoK forest's row, from the same folds
        metrics["blind_suite"] = suite
        # the warning comes from the strongest model-less classifier (SoK forest included)
        warning = suite.get("warning") or metrics["blind"].get("warning")
        if warning:
            metrics["warnings"].append(warning)
        for name, row in (("SoK blind baseline", metrics["blind"]), ("blind suite", suite)):
            if "error" in row:
                metrics["warnings"].append(f"{name} not computed: {row['error']}")
    if config.breakdown:
        metrics["breakdown"] = breakdown_metrics(samples, scores, config.breakdown, **kwargs)
    for column, row in metrics["attacks"].items():
        if row["n_nan"]:
            metrics["warnings"].append(
                f"{column}: {row['n_nan']} samples had no defined score and were left out"
            )
    if isinstance(metrics.get("blind_suite"), dict):  # its out-of-fold scores cover every sample
        mark_unmeasurable(metrics["blind_suite"], int((labels == 0).sum()))
    metrics["blind_warn_delta"] = BLIND_WARN_DELTA
    return metrics


def breakdown_metrics(
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    field: str,
    *,
    n_bootstrap: int,
    seed: int,
) -> dict[str, Any]:
    """Metrics per value of ``meta[field]``; groups lacking a class are reported, not scored."""
    values = [str(s.meta.get(field, "(missing)")) for s in samples]
    labels = np.array([s.label for s in samples])
    out: dict[str, Any] = {"field": field, "groups": {}}
    for group in sorted(set(values), key=_natural):
        mask = np.array([v == group for v in values])
        if len(set(labels[mask])) < 2:
            out["groups"][group] = {"error": "needs members and non-members", "n": int(mask.sum())}
            continue
        out["groups"][group] = {
            c: column_metrics(labels[mask], v[mask], n_bootstrap=n_bootstrap, seed=seed)
            for c, v in scores.items()
        }
    return out


def _natural(text: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
