"""Table cells shared by the run report and its document section: intervals and TPR@FPR."""

from __future__ import annotations

import math
from collections.abc import Mapping

from imprint.metrics import Interval, MetricSummary

__all__ = ["NOT_MEASURABLE", "by_auc", "fmt", "tpr_cell"]

NOT_MEASURABLE = "not measurable"


def fmt(interval: Interval | None) -> str:
    """'0.734 [0.681, 0.790]' for an interval; 'n/a' when it is missing or undefined (NaN);
    '(score bound)' after one whose bootstrap collapsed (the run warning says why)."""
    if interval is None or math.isnan(interval.estimate):
        return "n/a"
    shown = f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
    return shown + (" (score bound)" if interval.basis else "")


def tpr_cell(column: MetricSummary, bound: float) -> str:
    """A TPR@FPR cell: its interval, or 'not measurable' (the reason goes in a note)."""
    if bound in column.not_measurable:
        return NOT_MEASURABLE
    return fmt(column.tpr(bound))


def by_auc(aucs: Mapping[str, Interval]) -> list[str]:
    """Names by AUC estimate, highest first; undefined (NaN) last; ties keep their order."""

    def key(name: str) -> tuple[bool, float]:
        value = aucs[name].estimate
        return (math.isnan(value), 0.0 if math.isnan(value) else -value)

    return sorted(aucs, key=key)
