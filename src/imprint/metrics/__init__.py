"""Membership metrics: ROC, AUC, TPR at low FPR, bootstrap intervals, threshold transfer.

Labels are 1 for members and 0 for non-members; a higher score always means "more likely a
member" (attacks flip signs, metrics never do). Single-class input gives an
:class:`UndefinedMetricWarning` and NaN rather than an exception; NaN scores are an error. A
TPR at an FPR the non-members cannot resolve (fewer than 4/t) is None with its reason
(:class:`NotMeasurableWarning`, ``MetricSummary.not_measurable``), as in every report.
"""

from imprint.metrics.binary import (
    NotMeasurableWarning,
    UndefinedMetricWarning,
    auc,
    confusion_at_thresholds,
    roc_auc_score,
    roc_curve,
    tpr_at_fpr,
)
from imprint.metrics.bootstrap import (
    DEFAULT_FPR_BOUNDS,
    Interval,
    MetricSummary,
    bootstrap_metrics,
)
from imprint.metrics.paired import delong_test, paired_bootstrap
from imprint.metrics.pairwise import PairedComparisons, PairedDifference, compare_scores
from imprint.metrics.resolution import min_nonmembers, unresolvable, unresolvable_reason
from imprint.metrics.transfer import (
    fpr_at_threshold,
    threshold_at_fpr,
    threshold_transfer,
    transfer_interval,
)

__all__ = [
    "DEFAULT_FPR_BOUNDS",
    "Interval",
    "MetricSummary",
    "NotMeasurableWarning",
    "PairedComparisons",
    "PairedDifference",
    "UndefinedMetricWarning",
    "auc",
    "bootstrap_metrics",
    "compare_scores",
    "confusion_at_thresholds",
    "delong_test",
    "fpr_at_threshold",
    "min_nonmembers",
    "paired_bootstrap",
    "roc_auc_score",
    "roc_curve",
    "threshold_at_fpr",
    "threshold_transfer",
    "tpr_at_fpr",
    "transfer_interval",
    "unresolvable",
    "unresolvable_reason",
]
