"""Reports: the evaluation step (typed metrics with intervals, blind baselines, warnings), then
rendering them: plots, run folders, Markdown/HTML and the terminal table."""

from imprint.report.evaluate import evaluate_scores
from imprint.report.progress import ProgressFactory
from imprint.report.render import render_markdown, rich_table
from imprint.report.results import RunMetrics, RunWarning, WarningKind, read_metrics
from imprint.report.writer import package_versions, to_jsonable, write_run

__all__ = [
    "ProgressFactory",
    "RunMetrics",
    "RunWarning",
    "WarningKind",
    "evaluate_scores",
    "package_versions",
    "read_metrics",
    "render_markdown",
    "rich_table",
    "to_jsonable",
    "write_run",
]
