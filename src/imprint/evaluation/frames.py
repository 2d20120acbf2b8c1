"""A run's figures as one long pandas table: a row per score column x figure.

pandas is imported here, when a table is asked for, never at ``import imprint``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from imprint.metrics import Interval, MetricSummary
from imprint.metrics.bootstrap import fpr_key

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FRAME_COLUMNS", "metrics_frame", "summary_rows"]

#: the columns of :func:`metrics_frame`, in order
FRAME_COLUMNS = ("attack", "metric", "estimate", "low", "high", "method", "unit",
                 "n_members", "n_nonmembers", "not_measurable", "basis")  # fmt: skip


def summary_rows(name: str, summary: MetricSummary) -> list[dict[str, Any]]:
    """The rows of one score column: its AUC, then each TPR@FPR bound in its order (a bound
    the non-members cannot resolve has NaN figures and ``not_measurable`` says why)."""
    figures: list[tuple[str, Interval | None, str | None]] = [("auc", summary.auc, None)]
    for bound in summary.tpr_at_fpr:
        reason = summary.not_measurable.get(bound)
        figures.append((fpr_key(bound), summary.tpr(bound), reason))
    return [
        {
            "attack": name,
            "metric": metric,
            "estimate": math.nan if interval is None else interval.estimate,
            "low": math.nan if interval is None else interval.low,
            "high": math.nan if interval is None else interval.high,
            "method": summary.method,  # how the interval was read from the resamples
            "unit": summary.resamples,  # what the bootstrap resampled: texts, documents
            "n_members": summary.n_members,
            "n_nonmembers": summary.n_nonmembers,
            "not_measurable": reason,
            # what the interval rests on instead of the resamples (a collapsed bootstrap's
            # score bound), or None
            "basis": None if interval is None else interval.basis,
        }
        for metric, interval, reason in figures
    ]


def metrics_frame(attacks: Mapping[str, MetricSummary], suite: object = None) -> pd.DataFrame:
    """Every attack's figures (:func:`summary_rows`), then the strongest model-less (blind)
    classifier's (``suite``, a run's ``blind_suite``) as ``attack`` = ``"blind (strongest:
    NAME)"`` with its selection-adjusted intervals, when the run fitted one."""
    import pandas as pd

    from imprint.evaluation.blind_results import BlindSuiteMetrics

    rows = [row for name, m in attacks.items() for row in summary_rows(name, m)]
    if isinstance(suite, BlindSuiteMetrics):
        rows += summary_rows(f"blind (strongest: {suite.strongest})", suite.selected)
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
