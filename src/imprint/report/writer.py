"""Write a run folder: manifest.json, scores.parquet, metrics.json, plots, report.md/.html."""

from __future__ import annotations

import dataclasses
import json
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.metrics import roc_curve
from imprint.report.plots import plot_roc, plot_score_histograms
from imprint.report.render import render_html, render_markdown, rich_table

_PACKAGES = ("llm-imprint", "torch", "transformers", "numpy", "scipy", "scikit-learn", "pyarrow")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def to_jsonable(value: Any) -> Any:
    """Dataclasses, paths, numpy scalars and tuples into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_scores(path: Path, samples: Sequence[Sample], scores: dict[str, np.ndarray]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, Any] = {
        "id": [s.id for s in samples],
        "label": [s.label for s in samples],
        "text": [s.text for s in samples],
        "meta": [json.dumps(to_jsonable(s.meta)) for s in samples],
    }
    columns.update({name: np.asarray(v, dtype=float) for name, v in scores.items()})
    pq.write_table(pa.table(columns), path)


def write_plots(out: Path, samples: Sequence[Sample], scores: dict[str, np.ndarray]) -> list[str]:
    labels = np.array([s.label for s in samples])
    curves = {}
    for name, values in scores.items():
        finite = ~np.isnan(values)
        if len(set(labels[finite])) == 2:
            fpr, tpr, _ = roc_curve(labels[finite], values[finite])
            from imprint.metrics import auc

            curves[name] = (fpr, tpr, auc(labels[finite], values[finite]))
    plots = []
    if curves:
        plot_roc(curves, out / "roc.png")
        plots.append("roc.png")
    if scores:
        plot_score_histograms(scores, labels, out / "histograms.png")
        plots.append("histograms.png")
    return plots


def write_run(
    out: Path,
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    metrics: dict[str, Any],
    manifest: dict[str, Any],
    *,
    console: Any = None,
) -> None:
    """Write every artefact of a run into ``out`` and print the table to ``console``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = to_jsonable({**manifest, "versions": package_versions()})
    metrics = to_jsonable(metrics)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    write_scores(out / "scores.parquet", samples, scores)
    plots = write_plots(out, samples, scores)
    markdown = render_markdown(metrics, manifest, plots)
    (out / "report.md").write_text(markdown)
    (out / "report.html").write_text(render_html(markdown, out, plots))
    if console is not None:
        console.print(rich_table(metrics))
        for warning in metrics["warnings"]:
            console.print(f"[bold yellow]warning:[/] {warning}")
        console.print(f"report: {out / 'report.html'}")
