"""Turn a run's metrics into a Markdown table, a self-contained HTML page and a rich table."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from imprint.report.evaluate import BLIND_NAME, blind_description

TPR_KEYS = ("tpr@0.1%", "tpr@1%", "tpr@5%", "tpr@10%")


def fmt(cell: dict[str, Any] | None) -> str:
    """'0.734 [0.681, 0.790]' for an interval dict; 'n/a' when undefined."""
    if not cell or cell.get("estimate") is None:
        return "n/a"
    return f"{cell['estimate']:.3f} [{cell['low']:.3f}, {cell['high']:.3f}]"


def metric_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """Rows: attack, AUC, TPR at each FPR bound; the blind baseline first."""
    rows = []
    blind = metrics.get("blind")
    if blind and "auc" in blind:
        rows.append([BLIND_NAME, fmt(blind["auc"]), *("-" for _ in TPR_KEYS)])
    suite = metrics.get("blind_suite")
    if suite and "auc" in suite:
        name = f"blind, strongest: {suite['strongest']} (no model, selection-adjusted CI)"
        rows.append([name, fmt(suite["auc"]), *(fmt(suite.get(k)) for k in TPR_KEYS)])
    for name, row in metrics["attacks"].items():
        rows.append([name, fmt(row["auc"]), *(fmt(row.get(k)) for k in TPR_KEYS)])
    return rows


HEADER = ["attack", "AUC [95% CI]", *(f"TPR@{k[4:]}FPR" for k in TPR_KEYS)]


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def breakdown_rows(metrics: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """AUC per attack (rows) and breakdown group (columns)."""
    groups = metrics["breakdown"]["groups"]
    names = list(metrics["attacks"])
    header = ["attack", *groups]
    rows = [[n, *(fmt(g[n]["auc"]) if n in g else "n/a" for g in groups.values())] for n in names]
    return header, rows


def render_markdown(metrics: dict[str, Any], manifest: dict[str, Any], plots: list[str]) -> str:
    cfg = manifest["config"]
    data = manifest["data"]
    parts = [
        "# imprint membership inference report",
        f"Model `{cfg['model']}` on data `{cfg['data']}`: {data['evaluated']} samples evaluated "
        f"({metrics_counts(metrics)}), {sum(data['dropped'].values())} dropped.",
    ]
    if metrics["warnings"]:
        parts.append("\n".join(f"> **Warning:** {w}" for w in metrics["warnings"]))
    parts += [
        "## Attacks",
        "Higher score = more likely member. Intervals: 95 % stratified "
        f"bootstrap, {cfg['n_bootstrap']} resamples, seed {cfg['seed']}. "
        + blind_description(metrics),
        _md_table(HEADER, metric_rows(metrics)),
    ]
    if "breakdown" in metrics:
        header, rows = breakdown_rows(metrics)
        parts += [f"## AUC by `{metrics['breakdown']['field']}`", _md_table(header, rows)]
    if data["dropped"]:
        parts += [
            "## Dropped samples",
            _md_table(["reason", "count"], [[k, str(v)] for k, v in data["dropped"].items()]),
        ]
    usage = [(n, m["usage"]) for n, m in manifest.get("models", {}).items() if m.get("usage")]
    if usage:
        parts += [
            "## Queries",
            _md_table(["model", *USAGE_FIELDS], [[n, *_usage_cells(u)] for n, u in usage]),
        ]
    parts += ["## Plots", *(f"![{p}]({p})" for p in plots)]
    return "\n\n".join(parts) + "\n"


USAGE_FIELDS = ["requests", "cached", "retries", "failed", "prompt_tokens", "completion_tokens"]


def _usage_cells(usage: dict[str, Any]) -> list[str]:
    """A text backend's counters; retries as ``reason: count`` (what the run survived)."""
    cells = []
    for key in USAGE_FIELDS:
        value = usage.get(key, "")
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in sorted(value.items())) or "0"
        cells.append(str(value))
    return cells


def metrics_counts(metrics: dict[str, Any]) -> str:
    first = next(iter(metrics["attacks"].values()), None)
    if not first:
        return "no attacks"
    return f"{first['n_members']} members, {first['n_nonmembers']} non-members"


def render_html(markdown_text: str, out: Path, plots: list[str]) -> str:
    """A self-contained page (plots embedded as base64): opens offline, no external assets."""
    body = []
    for block in markdown_text.split("\n\n"):
        if block.startswith("|"):
            body.append(_html_table(block))
        elif block.startswith("#"):
            level = len(block) - len(block.lstrip("#"))
            body.append(f"<h{level}>{html.escape(block.lstrip('# '))}</h{level}>")
        elif block.startswith("!["):
            continue
        else:
            body.append(f"<p>{_inline(block)}</p>")
    for plot in plots:
        data = base64.b64encode((out / plot).read_bytes()).decode()
        body.append(
            f'<figure><img alt="{plot}" src="data:image/png;base64,{data}">'
            f"<figcaption>{plot}</figcaption></figure>"
        )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
        "img{max-width:100%}p.warn{background:#fff3cd;padding:8px}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>imprint report</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _inline(text: str) -> str:
    escaped = html.escape(text).replace("&gt; **Warning:**", "<b>Warning:</b>")
    return escaped.replace("\n", "<br>")


def _html_table(block: str) -> str:
    lines = [line.strip("|").split("|") for line in block.splitlines() if not line.startswith("|-")]
    head = "".join(f"<th>{html.escape(c.strip())}</th>" for c in lines[0])
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c.strip())}</td>" for c in line) + "</tr>"
        for line in lines[1:]
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def rich_table(metrics: dict[str, Any]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="membership inference (higher score = member)")
    for h in HEADER:
        table.add_column(h)
    for row in metric_rows(metrics):
        table.add_row(*(escape(cell) for cell in row))
    return table
