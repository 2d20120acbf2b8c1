"""Write a run folder: manifest.json, scores.parquet, metrics.json, plots, report.md/.html."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import platform
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.errors import ConfigError
from imprint.evaluation.curves import RocCurve, roc_with_band
from imprint.evaluation.dropped import dropped_samples
from imprint.evaluation.results import BlindSuiteMetrics, RunMetrics, RunWarning
from imprint.formats import FORMAT_VERSION
from imprint.outdir import check_out_dir, discard, mark_output, publish, staging_dir
from imprint.report.blind_band import forest_inputs, said_after_verdict, verdict_lines
from imprint.report.cells import by_auc
from imprint.report.exposed import exposed_texts
from imprint.report.plots import plot_auc_forest, plot_roc, plot_score_histograms
from imprint.report.provenance import provenance
from imprint.report.render import (
    metrics_counts,
    render_html,
    render_markdown,
    resampled_units,
    rich_table,
)

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
    """Any value as plain JSON: dataclasses, paths, numpy values, tuples, and the column types a
    Parquet or hub dataset brings into ``meta``: dates and times as ISO 8601 text, durations as
    seconds, decimals as exact text, bytes as text when they are UTF-8 (else ``base64:...``).
    Anything else becomes its ``str``, so writing a run never fails on a value's type."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {  # a field's metadata "to_json" shapes what is recorded (a masked password)
            f.name: to_jsonable(f.metadata.get("to_json", _same)(getattr(value, f.name)))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset | np.ndarray):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return _special_to_json(value)


def _same(value: Any) -> Any:
    return value


def _special_to_json(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode("ascii")
    return str(value)  # Decimal (exact), Path, and any other object


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


def write_plots(
    out: Path, samples: Sequence[Sample], scores: dict[str, np.ndarray], metrics: RunMetrics
) -> list[str]:
    """forest.png, roc.png and histograms.png, drawn from what the evaluation measured (the
    curves and bands of ``metrics.roc``; a folder evaluated before curves were recorded gets
    them from the same evaluation code, with the columns' own seed and resample count)."""
    labels = np.array([s.label for s in samples])
    curves = _curves(labels, scores, metrics, samples)
    aucs = {name: row.auc for name, row in metrics.attacks.items()}
    plots = []
    suite = metrics.blind_suite
    if aucs:
        units = resampled_units(metrics)
        resamples = "resampling " + " and ".join(units) if units else "resampled unit not recorded"
        note = f"95 % bootstrap intervals, {resamples}"
        # the band, its state and the filled markers: the recorded verdict, never re-decided
        plot_auc_forest(aucs, out / "forest.png", interval_note=note, **forest_inputs(metrics))
        plots.append("forest.png")
    if curves:
        blind = None
        if isinstance(suite, BlindSuiteMetrics) and metrics.blind_roc is not None:
            blind = (suite.strongest, metrics.blind_roc, suite.selected.auc)
        plot_roc(curves, out / "roc.png", aucs=aucs, blind=blind)
        plots.append("roc.png")
    if scores:
        ordered = {c: scores[c] for c in by_auc(aucs) if c in scores}
        ordered.update({c: v for c, v in scores.items() if c not in ordered})
        plot_score_histograms(ordered, labels, out / "histograms.png")
        plots.append("histograms.png")
    return plots


def _curves(
    labels: np.ndarray,
    scores: dict[str, np.ndarray],
    metrics: RunMetrics,
    samples: Sequence[Sample] = (),
) -> dict[str, RocCurve]:
    """The recorded curves; a folder evaluated before curves were recorded gets them from the
    same code, resampling what its table resampled (documents: each sample's document, read
    from the samples); a column whose unit cannot be recovered gets no curve rather than a band
    that is not its table's interval."""
    from imprint.evaluation.evaluate import recorded_documents

    curves = {c: v for c, v in metrics.roc.items() if c in metrics.attacks}
    for name, values in scores.items():
        row = metrics.attacks.get(name)
        if name in curves or row is None:
            continue
        unit = "texts" if row.resamples in (None, "", "samples") else row.resamples
        groups = recorded_documents(samples, len(labels)) if unit == "documents" else None
        if unit not in ("texts", "documents") or (unit == "documents" and groups is None):
            continue
        found = roc_with_band(
            labels,
            np.asarray(values, dtype=float),
            seed=row.seed,
            n_bootstrap=row.n_resamples,
            groups=groups,
            resamples=unit,
        )
        if found is not None:
            curves[name] = found
    return curves


def write_run(
    out: Path,
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    metrics: RunMetrics,
    manifest: dict[str, Any],
    *,
    console: Any = None,
    overwrite: bool = False,
    extra: Callable[[Path], None] | None = None,
) -> None:
    """Write every artefact of a run into ``out`` and print the table to ``console``;
    ``extra(folder)`` writes more files into the staged folder before it is published (the
    per-token scores), so they appear with the rest or not at all.

    ``metrics`` is the evaluation step's result (:func:`imprint.evaluation.evaluate_scores`); this
    only writes and renders it.

    The files are written into a hidden sibling folder renamed to ``out`` at the end (see
    :mod:`imprint.outdir`): ``out`` is a whole run or left as it was. An earlier run there is
    replaced with ``overwrite``, or when its manifest's config equals ``manifest["config"]``.
    """
    if not isinstance(metrics, RunMetrics):
        raise ConfigError(
            f"write_run takes the RunMetrics that evaluate_scores returns, not a "
            f"{type(metrics).__name__}; for a metrics.json dict use RunMetrics.from_dict(data)"
        )
    if metrics.samples is None:  # metrics.json's counts and the report's: the manifest's
        metrics = dataclasses.replace(metrics, samples=dropped_samples(manifest))
    config = to_jsonable(manifest.get("config"))  # the same config again reuses ``out``
    config = config if isinstance(config, dict) else None
    out = check_out_dir(Path(out), overwrite=overwrite, config=config)
    staged = staging_dir(out)
    try:
        _write_files(staged, samples, scores, metrics, manifest)
        if extra is not None:
            extra(staged)
        mark_output(staged, "run")
        publish(staged, out, overwrite=overwrite, config=config)
    finally:
        discard(staged)  # nothing left after a successful publish; the debris of a failed one
    if console is not None:
        _print_results(console, metrics, out)


def _print_results(console: Any, metrics: RunMetrics, out: Path) -> None:
    """The run's results on the terminal (also with --quiet): tables, the blind verdict, the
    warnings and the report's path, lines wrapped at spaces (paths whole); with jsonl also a
    ``warning`` event per warning and a ``result`` event naming the report."""
    from imprint.report.terminal import event, print_wrapped

    console.print(rich_table(metrics))
    if metrics.samples is not None and metrics.samples.total:  # the report's opening line
        print_wrapped(console, metrics.samples.summary(metrics_counts(metrics)))
    if metrics.documents is not None:
        from imprint.report.documents import document_rich_table

        console.print(document_rich_table(metrics.documents))
    verdict, lines = metrics.verdict(), verdict_lines(metrics)  # the verdict in every state
    after = [(w, said_after_verdict(verdict, w.message)) for w in metrics.warnings]
    for line in lines[:1]:
        print_wrapped(console, line)
    for warning, rest in after:  # the shift warning under the verdict's line, not its words
        if rest is not None:
            _warn(console, warning, rest)
    for line in lines[1:]:
        print_wrapped(console, line)
    for warning, rest in after:
        if rest is None:
            _warn(console, warning, warning.message)
    report = out / "report.html"
    event("result", kind="run", path=str(out), report=str(report))
    print_wrapped(console, f"report: {report}")


def _warn(console: Any, warning: RunWarning, shown: str) -> None:
    """``warning: shown`` on the terminal; with jsonl a ``warning`` event with the whole
    message (an event stands alone)."""
    from imprint.report.terminal import event, print_wrapped

    event("warning", message=warning.message, kind=warning.kind)
    print_wrapped(console, shown, label="warning:", style="bold yellow")


def _write_files(
    folder: Path,
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    metrics: RunMetrics,
    manifest: dict[str, Any],
) -> None:
    """The run's files in ``folder``."""
    manifest = to_jsonable({**manifest, "versions": package_versions()})
    manifest = {"provenance": provenance(manifest), **manifest}  # a re-render keeps its own
    manifest = {"format_version": FORMAT_VERSION, **manifest}  # manifest.schema.json
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    metrics_json = json.dumps(to_jsonable(metrics.to_dict()), indent=2)
    (folder / "metrics.json").write_text(metrics_json + "\n")
    write_scores(folder / "scores.parquet", samples, scores)
    plots = write_plots(folder, samples, scores, metrics)
    exposed = exposed_texts(samples, scores, metrics)
    markdown = render_markdown(metrics, manifest, plots, exposed)
    (folder / "report.md").write_text(markdown, encoding="utf-8")
    (folder / "report.html").write_text(
        render_html(metrics, manifest, folder, plots, exposed), encoding="utf-8"
    )
