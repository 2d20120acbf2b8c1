"""Reports: rendering what the evaluation step (:mod:`imprint.evaluation`) measured into a run
folder (plots, Markdown/HTML, metrics.json) and the terminal (rich tables, progress bars)."""

from imprint.report.progress import ProgressFactory
from imprint.report.render import render_markdown, rich_table
from imprint.report.writer import package_versions, to_jsonable, write_run

__all__ = [
    "ProgressFactory",
    "package_versions",
    "render_markdown",
    "rich_table",
    "to_jsonable",
    "write_run",
]
