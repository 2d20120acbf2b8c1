"""Run warnings for figures the bootstrap cannot carry (issue 37): an interval whose resamples
collapsed to one value (replaced by a score bound, :mod:`imprint.metrics.degenerate`) and ties
that decide a TPR@FPR threshold, in the Attacks table and in every breakdown group."""

from __future__ import annotations

from collections.abc import Iterator

from imprint.evaluation.results import RunMetrics, RunWarning, SkippedGroup
from imprint.metrics import MetricSummary
from imprint.metrics.bootstrap import fpr_key

__all__ = ["interval_warnings"]


def _columns(metrics: RunMetrics) -> Iterator[tuple[str, MetricSummary]]:
    """(where, summary) for every attack column and every breakdown group's column."""
    yield from metrics.attacks.items()
    breakdown = metrics.breakdown
    if breakdown is None:
        return
    for group, row in breakdown.groups.items():
        if not isinstance(row, SkippedGroup):
            yield from ((f"{column} in {breakdown.field}={group}", s) for column, s in row.items())


def interval_warnings(metrics: RunMetrics) -> list[RunWarning]:
    """One warning per score bound (figures with the same bound and reason share one, naming
    every place: the demo's canary groups gave 37 identical lines) and one per TPR threshold
    decided by ties."""
    out = []
    bounds: dict[tuple[str, str], list[str]] = {}  # (figure and interval, basis) -> places
    for where, summary in _columns(metrics):
        figures = [("AUC", summary.auc)]
        figures += [(fpr_key(b).upper(), iv) for b, iv in summary.tpr_at_fpr.items() if iv]
        for name, interval in figures:
            if interval.basis is not None:
                shown = f"{name} {interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
                bounds.setdefault((shown, interval.basis), []).append(where)
        tied = summary.tied_share
        share = "" if tied is None else f" ({tied:.0%} of this column's scores are tied)"
        for note in summary.tie_decides.values():
            out.append(RunWarning("ties_decide_threshold", f"{where}: {note}{share}"))
    for (shown, basis), places in bounds.items():
        if len(places) == 1:
            text = f"{places[0]}: {shown} is a score bound: {basis}"
        else:
            text = f"{len(places)} figures read {shown}, each a score bound: {basis}; "
            text += ", ".join(places)
        out.append(RunWarning("score_bound", text))
    return out
