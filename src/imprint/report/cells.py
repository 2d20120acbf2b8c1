"""Table cells shared by the run report and its document section: intervals and TPR@FPR."""

from __future__ import annotations

import math

from imprint.metrics import Interval, MetricSummary

__all__ = ["NOT_MEASURABLE", "fmt", "tpr_cell"]

NOT_MEASURABLE = "not measurable"


def fmt(interval: Interval | None) -> str:
    """'0.734 [0.681, 0.790]' for an interval; 'n/a' when it is missing or undefined (NaN)."""
    if interval is None or math.isnan(interval.estimate):
        return "n/a"
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def tpr_cell(column: MetricSummary, bound: float) -> str:
    """A TPR@FPR cell: its interval, or 'not measurable' (the reason goes in a note)."""
    if bound in column.not_measurable:
        return NOT_MEASURABLE
    return fmt(column.tpr(bound))
