"""Turn a run's metrics into a Markdown report, a self-contained HTML page and a rich table.

Both reports are rendered from the same blocks of plain text. Every piece of text is escaped for
its format (file names, model names, breakdown groups and drop reasons come from users' files):
Markdown gets HTML entities for ``< > &`` and backslashes before its own syntax (``|`` included,
so a group value cannot shift table columns); HTML gets :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

from imprint.evaluation.dropped import SHOWN_IDS, dropped_samples
from imprint.evaluation.results import BlindClassifierMetrics, BlindSuiteMetrics, RunMetrics
from imprint.metrics import MetricSummary
from imprint.report.blind_band import forest_caption, verdict_lines
from imprint.report.cells import TprColumns, by_auc, fmt
from imprint.report.comparisons import comparison_blocks
from imprint.report.documents import document_blocks
from imprint.report.exposed import ExposedTexts, exposed_blocks
from imprint.report.provenance import provenance_rows

BLIND_NAME = "blind (bag-of-words, no model)"

# A block of the report: (kind, payload) with kind h1/h2/h3 (text), p (text), warn (text),
# table ((header, rows) or (header, rows, html id)) or img (file name); all text unescaped.
Block = tuple[str, Any]

#: each plot the writer draws: (html id, alt text, caption); the alt text names what it shows
FIGURES = {
    "forest.png": (
        "plot-forest",
        "AUC forest plot: each column's AUC with its interval, the blind baseline's band",
        "AUC per column, highest on top, with its interval; the shaded band is the strongest "
        "blind baseline's interval (no model), labelled with its verdict; the paragraph below "
        "says which attacks beat the text by a paired test.",
    ),
    "roc.png": (
        "plot-roc",
        "ROC curves, log-log, step, with bootstrap bands and the blind baseline dashed",
        "Step ROC curves on log-log axes (n non-members); the shaded region below FPR = 4/n is "
        "not measurable (the tables' rule: 4 false positives allowed); bands are the bootstrap "
        "intervals of the table (what they resample is in the legend); the dashed curve is the "
        "strongest blind baseline (its AUC interval selection-adjusted; the curve, the chosen "
        "classifier's own, is not, and has no band).",
    ),
    "histograms.png": (
        "plot-histograms",
        "Score histograms: members and non-members per column",
        "Member and non-member scores per column (higher = member).",
    ),
}

_MD_SYNTAX = re.compile(r"([\\`*_{}\[\]|#~!])")


def md_escape(text: str) -> str:
    """``text`` as literal Markdown on one line: no HTML, emphasis, links, code or cell breaks."""
    one_line = " ".join(str(text).splitlines())
    entities = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SYNTAX.sub(r"\\\1", entities)


def tpr_rows(metrics: RunMetrics) -> list[MetricSummary]:
    """The rows whose TPR@FPR cells the Attacks table shows: the attacks and the blind suite's
    selected classifier (the SoK forest's row shows AUC only)."""
    rows = list(metrics.attacks.values())
    if isinstance(metrics.blind_suite, BlindSuiteMetrics):
        rows.append(metrics.blind_suite.selected)
    return rows


def attack_columns(metrics: RunMetrics) -> TprColumns:
    """The Attacks table's TPR@FPR columns: those some row can measure (one rule for the
    terminal table and both reports, :class:`~imprint.report.cells.TprColumns`)."""
    return TprColumns(tpr_rows(metrics))


def metric_rows(metrics: RunMetrics, columns: TprColumns | None = None) -> list[list[str]]:
    """Rows: attack, AUC, TPR at each shown FPR bound; the blind baselines first."""
    columns = columns or attack_columns(metrics)
    rows = []
    if isinstance(metrics.blind, BlindClassifierMetrics) and metrics.blind.summary:
        rows.append([BLIND_NAME, fmt(metrics.blind.summary.auc), *("-" for _ in columns.bounds)])
    suite = metrics.blind_suite
    if isinstance(suite, BlindSuiteMetrics):
        name = f"blind, strongest: {suite.strongest} (no model, selection-adjusted CI)"
        rows.append([name, fmt(suite.selected.auc), *columns.cells(suite.selected)])
    for name in by_auc({n: r.auc for n, r in metrics.attacks.items()}):
        row = metrics.attacks[name]
        rows.append([name, fmt(row.auc), *columns.cells(row)])
    return rows


def header(columns: TprColumns) -> list[str]:
    """The Attacks table's header for ``columns``."""
    return ["attack", "AUC [95% CI]", *columns.headers()]


def measurability_notes(metrics: RunMetrics, columns: TprColumns | None = None) -> list[str]:
    """Under the Attacks table: one line for the columns no row can measure (dropped), then
    why a shown column reads 'not measurable' in some rows (each reason once)."""
    columns = columns or attack_columns(metrics)
    dropped = [columns.note] if columns.note else []
    return dropped + columns.row_notes(tpr_rows(metrics))


def breakdown_rows(metrics: RunMetrics) -> tuple[list[str], list[list[str]]]:
    """AUC per attack (rows) and breakdown group (columns); 'n/a' for a group not scored."""
    assert metrics.breakdown is not None
    groups = metrics.breakdown.groups
    header = ["attack", *groups]
    rows = []
    for name in by_auc({n: r.auc for n, r in metrics.attacks.items()}):  # as the Attacks table
        cells = [
            fmt(g[name].auc) if isinstance(g, dict) and name in g else "n/a"
            for g in groups.values()
        ]
        rows.append([name, *cells])
    return header, rows


def blind_description(metrics: RunMetrics) -> str:
    """How the report's blind rows were computed, with the SoK spread and the adjustment level."""
    spread = metrics.blind.protocol if isinstance(metrics.blind, BlindClassifierMetrics) else None
    suite = metrics.blind_suite
    selection = suite.selection if isinstance(suite, BlindSuiteMetrics) else None
    sok = "the SoK bag-of-words random forest (95 % bootstrap interval of its 5-fold out-of-fold "
    sok += "scores"
    if spread:
        sok += (
            f"; its {len(spread.aucs)} 80/20 split AUCs spread {spread.mean:.3f} +- "
            f"{spread.std:.3f} sd, a spread and not an interval"
        )
    best = "the strongest of the model-less suite (SoK forest, TF-IDF logistic regression, date "
    best += "detector, greedy n-grams; 5-fold out-of-fold scores"
    if selection:
        best += (
            f"; chosen as the best of {selection.n_classifiers} on these scores, so its "
            f"intervals are Bonferroni-adjusted to {selection.confidence:.2%} and hold "
            "at 95 % despite the choice"
        )
    return (
        f"The blind rows never see the model: {sok}) and {best}). Attack AUCs near them "
        "measure the benchmark, not membership."
    )


def resampled_units(metrics: RunMetrics) -> list[str]:
    """What the Attacks table's intervals resample: the columns' ``resamples``, sorted."""
    return sorted({c.resamples for c in metrics.attacks.values() if c.resamples})


def resampling(metrics: RunMetrics) -> str:
    """What the Attacks table's intervals resample, in words (from the columns' ``resamples``)."""
    units = resampled_units(metrics)
    if units == ["documents"]:
        return (
            "resampling documents (a document's sequences are drawn together: they are correlated)"
        )
    if units:
        return "resampling " + " and ".join(units)
    return "resampled unit not recorded"


def low_end_note(metrics: RunMetrics) -> str:
    """What the TPR intervals' low ends rest on beyond the interval method, from the columns'
    recorded ``low_end`` (the words metrics.json has in each TPR cell), or "" where none."""
    said = sorted({v for c in metrics.attacks.values() for v in c.low_end.values()})
    return "".join(f"TPR@FPR intervals: {s}. " for s in said)


def report_blocks(
    metrics: RunMetrics,
    manifest: dict[str, Any],
    plots: list[str],
    exposed: list[ExposedTexts] | None = None,
) -> list[Block]:
    """The report's content in order, as plain-text blocks (see :data:`Block`)."""
    cfg = manifest["config"]
    dropped = dropped_samples(manifest)  # its ids; the counts are metrics.json's "samples"
    columns = attack_columns(metrics)
    blocks: list[Block] = [
        ("h1", "imprint membership inference report"),
        (
            "p",
            f"Model {cfg['model']} on data {cfg['data']}: "
            f"{dropped.summary(metrics_counts(metrics))}",
        ),  # fmt: skip
        *(("warn", w) for w in _warnings(metrics, manifest)),
    ]
    if manifest.get("provenance"):
        blocks += [("h2", "Provenance"),
                   ("table", (["what", "value"], provenance_rows(manifest["provenance"]),
                              "provenance"))]  # fmt: skip
    blocks += [
        ("h2", "Attacks"),
        (
            "p",
            "Higher score = more likely member; rows by AUC, highest first (blind rows first). "
            f"Intervals: 95 % stratified bootstrap, {cfg['n_bootstrap']} resamples, seed "
            f"{cfg['seed']}, {resampling(metrics)}. "
            + low_end_note(metrics)
            + blind_description(metrics),
        ),
        ("table", (header(columns), metric_rows(metrics, columns), "attacks")),
        *(("p", note) for note in measurability_notes(metrics, columns)),
        *_figure("forest.png", plots),
        *_blind_verdict(metrics, "forest.png" in plots),
        *_figure("roc.png", plots),
        *exposed_blocks(exposed or []),
    ]
    if metrics.breakdown is not None:
        blocks += [
            ("h2", f"AUC by {metrics.breakdown.field}"),
            ("table", breakdown_rows(metrics)),
        ]
    blocks += comparison_blocks(metrics.comparisons)
    if metrics.documents is not None:
        blocks += document_blocks(metrics.documents)
    if dropped.by_reason:
        header_ = ["reason", "count", f"ids (first {SHOWN_IDS})"]
        blocks += [("h2", "Dropped samples"), ("table", (header_, dropped.rows(), "dropped"))]
    usage = [(n, m["usage"]) for n, m in manifest.get("models", {}).items() if m.get("usage")]
    if usage:
        rows = [[n, *_usage_cells(u)] for n, u in usage]
        blocks += [("h2", "Queries"), ("table", (["model", *USAGE_FIELDS], rows))]
    rest = [p for p in plots if p not in ("forest.png", "roc.png")]
    return blocks + ([("h2", "Plots")] if rest else []) + [("img", p) for p in rest]


def _figure(name: str, plots: list[str]) -> list[Block]:
    if name not in plots:
        return []
    title = {"forest.png": "AUC with intervals", "roc.png": "ROC curves"}[name]
    return [("h2", title), ("img", name)]


def _blind_verdict(metrics: RunMetrics, drawn: bool) -> list[Block]:
    """The forest plot's caption (the blind verdict and the attacks that beat the text), or
    without the plot the same verdict as a paragraph."""
    if drawn:
        return [("p", forest_caption(metrics))]
    lines = verdict_lines(metrics)
    return [("p", " ".join(lines))] if lines else []


def _warnings(metrics: RunMetrics, manifest: dict[str, Any]) -> list[str]:
    """The evaluation's warnings, then the manifest's (the run stage's, e.g. a reference model
    identical to the target), each once."""
    found = [w.message for w in metrics.warnings]
    for item in manifest.get("warnings") or []:
        message = item.get("message") if isinstance(item, dict) else item
        if message and str(message) not in found:
            found.append(str(message))
    return found


def render_markdown(
    metrics: RunMetrics,
    manifest: dict[str, Any],
    plots: list[str],
    exposed: list[ExposedTexts] | None = None,
) -> str:
    """report.md: every text escaped, so names from users' files stay literal text."""
    parts = []
    for kind, payload in report_blocks(metrics, manifest, plots, exposed):
        if kind in ("h1", "h2", "h3"):
            parts.append("#" * int(kind[1]) + " " + md_escape(payload))
        elif kind == "warn":
            parts.append(f"> **Warning:** {md_escape(payload)}")
        elif kind == "table":
            parts.append(_md_table(*payload[:2]))
        elif kind == "img":
            alt = FIGURES.get(payload, ("", payload, ""))[1]
            parts.append(f"![{md_escape(alt)}]({payload})")
        else:
            parts.append(md_escape(payload))
    return "\n\n".join(parts) + "\n"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(md_escape(c) for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])


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


def metrics_counts(metrics: RunMetrics) -> str:
    first = next(iter(metrics.attacks.values()), None)
    if not first:
        return "no attacks"
    return f"{first.n_members} members, {first.n_nonmembers} non-members"


def render_html(
    metrics: RunMetrics,
    manifest: dict[str, Any],
    out: Path,
    plots: list[str],
    exposed: list[ExposedTexts] | None = None,
) -> str:
    """A self-contained page (plots in ``out`` embedded as base64): opens offline, no external
    assets; every text is HTML-escaped. Figures and the main tables carry ids (``plot-roc``,
    ``plot-forest``, ``attacks``, ``provenance``, ``exposed-COLUMN``) and alt texts."""
    body = []
    for kind, payload in report_blocks(metrics, manifest, plots, exposed):
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{html.escape(payload)}</{kind}>")
        elif kind == "warn":
            body.append(f'<p class="warn"><b>Warning:</b> {html.escape(payload)}</p>')
        elif kind == "table":
            body.append(_html_table(*payload))
        elif kind == "img":
            body.append(_html_figure(out, payload))
        else:
            body.append(f"<p>{html.escape(payload)}</p>")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
        "img{max-width:100%}p.warn{background:#fff3cd;padding:8px}"
        "figcaption{color:#555;font-size:.9em}td{overflow-wrap:anywhere}"
        "table#provenance td:first-child{white-space:nowrap}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>imprint report</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _html_figure(out: Path, name: str) -> str:
    data = base64.b64encode((out / name).read_bytes()).decode()
    ident, alt, caption = FIGURES.get(name, ("plot-" + name.rsplit(".", 1)[0], name, name))
    e = html.escape
    return (
        f'<figure id="{e(ident, quote=True)}"><img alt="{e(alt, quote=True)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{e(caption)}</figcaption></figure>'
    )


def _html_table(header: list[str], rows: list[list[str]], ident: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    attr = f' id="{html.escape(ident, quote=True)}"' if ident else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def rich_table(metrics: RunMetrics) -> Any:
    """The terminal table (the Attacks table's columns and notes); cells wrap, never cut."""
    from rich.markup import escape
    from rich.table import Table

    columns = attack_columns(metrics)
    notes = measurability_notes(metrics, columns)
    table = Table(
        title="membership inference (higher score = member; intervals "
        + resampling(metrics).split(" (")[0]
        + ")",
        caption=escape("\n".join(notes)) if notes else None,
        caption_justify="left",
    )
    for h in header(columns):
        table.add_column(escape(h), overflow="fold")
    for row in metric_rows(metrics, columns):
        table.add_row(*(escape(cell) for cell in row))
    return table
