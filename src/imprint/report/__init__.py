"""Reports: metrics with intervals, the blind baseline, plots, run folders."""

from imprint.report.evaluate import evaluate_scores
from imprint.report.progress import ProgressFactory
from imprint.report.render import render_markdown, rich_table
from imprint.report.writer import package_versions, to_jsonable, write_run

__all__ = [
    "ProgressFactory",
    "evaluate_scores",
    "package_versions",
    "render_markdown",
    "rich_table",
    "to_jsonable",
    "write_run",
]
