"""Render grid tables (:class:`~imprint.study.tables.Table`) as CSV, Markdown, LaTeX, a
self-contained HTML page with a heat-map, and rich tables for the terminal.

Every name (model, benchmark, attack, parameter) comes from the user's file and is escaped for
each format: ``|`` and ``*`` in Markdown, ``&``, ``%``, ``_`` ... in LaTeX, ``<`` and ``&`` in
HTML. An attack is bold (in every format; ``best`` = 1 in the CSV) only when the paired test on
the same samples shows it better than every other attack of its column and it beats the text (its
scores against the strongest blind classifier's out-of-fold scores on the same texts, DeLong
paired: :mod:`imprint.diagnostics.blind_verdict`, the run report's rule);
the TPR reads "n/m" (not measurable) when the column has too few non-members for the FPR bound.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from imprint.metrics.resolution import MIN_FALSE_POSITIVES, min_nonmembers
from imprint.study.tables import Entry, Table, long_rows

__all__ = [
    "escape_latex",
    "escape_markdown",
    "heat_colour",
    "rich_tables",
    "slug",
    "to_csv",
    "to_html",
    "to_latex",
    "to_markdown",
]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")
_LATEX = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "|": r"\textbar{}", "<": r"\textless{}", ">": r"\textgreater{}",
}  # fmt: skip


def slug(name: str) -> str:
    """A file name for ``name``: letters and digits (any script) kept, the rest ``-``."""
    text = re.sub(r"[^\w.]+", "-", name, flags=re.UNICODE).strip("-.")[:80]
    while len(text.encode("utf-8")) > 200:  # file names hold 255 bytes: 80 4-byte letters do not
        text = text[:-1]
    return text or "table"


def escape_markdown(text: str) -> str:
    """``text`` shown literally in a Markdown table cell (one line)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def escape_latex(text: str) -> str:
    """``text`` shown literally in LaTeX (one line)."""
    return "".join(_LATEX.get(ch, ch) for ch in " ".join(str(text).split()))


def _num(value: float, digits: int = 3) -> str:
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return "nan" if math.isnan(value) else f"{100 * value:.1f}%"


def fpr_label(fpr: float) -> str:
    return f"TPR@{100 * fpr:g}%FPR"


def _auc_text(entry: Entry) -> str:
    a = entry.auc
    return f"{_num(a.estimate)} [{_num(a.low)}, {_num(a.high)}]"


def _tpr_text(entry: Entry) -> str:
    return "n/m" if entry.tpr is None else _pct(entry.tpr.estimate)


# -- CSV ------------------------------------------------------------------------------------------


def to_csv(table: Table) -> str:
    """One line per row: per column its AUC, interval, TPR (empty when not measurable), best."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    header = ["attack", "kind"]
    for column in table.columns:
        header += [f"{column} {part}" for part in
                   ("auc", "auc_low", "auc_high", fpr_label(table.fpr), "best")]  # fmt: skip
    writer.writerow(header)
    for row in table.rows:
        line: list[Any] = [row, "blind" if row in table.blind_rows else "attack"]
        for column in table.columns:
            e = table.entries.get((row, column))
            if e is None:
                line += ["", "", "", "", ""]
                continue
            tpr = "" if e.tpr is None else e.tpr.estimate
            line += [e.auc.estimate, e.auc.low, e.auc.high, tpr, int(e.best)]
        writer.writerow(line)
    return buffer.getvalue()


# -- Markdown -------------------------------------------------------------------------------------


def _md_entry(entry: Entry | None) -> tuple[str, str]:
    if entry is None:
        return "–", "–"
    auc = _auc_text(entry)
    return (f"**{auc}**" if entry.best else auc), _tpr_text(entry)


def to_markdown(tables: Sequence[Table], *, title: str) -> str:
    """Every table as a GitHub Markdown table: AUC [95 % interval] and TPR per column."""
    parts = [f"# {escape_markdown(title)}", ""]
    for table in tables:
        parts += [f"## {escape_markdown(table.title)}", ""]
        head = ["attack"]
        for column in table.columns:
            head += [f"{escape_markdown(column)} AUC [95% CI]", f"{fpr_label(table.fpr)}"]
        parts.append("| " + " | ".join(head) + " |")
        parts.append("|" + "|".join([":--"] + ["--:"] * (len(head) - 1)) + "|")
        for row in table.rows:
            label = escape_markdown(row)
            label = f"*{label}*" if row in table.blind_rows else label
            cells = [label]
            for column in table.columns:
                cells += _md_entry(table.entries.get((row, column)))
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
        parts += [f"> **Warning:** {escape_markdown(w)}" for w in table.blind_warnings]
        parts += [f"> {escape_markdown(note)}" for note in table.notes]
        parts.append(_legend(table.fpr))
        parts.append("")
    return "\n".join(parts)


def _legend(fpr: float) -> str:
    return (
        "Bold: the attack better than every other attack of its column by DeLong's paired test "
        "on the samples they all scored (its Bonferroni-adjusted interval for each difference, "
        "over the column's pairs, excludes 0); no attack is bold when none is, whatever the point "
        "estimates, and never when it is not shown to beat the text (DeLong's paired test of its "
        "scores against the strongest blind classifier's out-of-fold scores on the same texts, "
        "Bonferroni over the column's attacks, as the run report's forest plot). Blind rows "
        "(italic): model-less classifiers. n/m: the "
        f"{fpr_label(fpr)} is not measurable with fewer than {min_nonmembers(fpr)} non-members "
        f"({MIN_FALSE_POSITIVES} false positives at that rate; non-member documents where the "
        "intervals resample documents)."
    )


# -- LaTeX ----------------------------------------------------------------------------------------


def _tex_entry(entry: Entry | None) -> str:
    if entry is None:
        return "--"
    a = entry.auc
    auc = f"{_num(a.estimate)}"
    auc = rf"\textbf{{{auc}}}" if entry.best else auc
    interval = rf"{{\scriptsize[{_num(a.low)}, {_num(a.high)}]}}"
    tpr = "n/m" if entry.tpr is None else escape_latex(_pct(entry.tpr.estimate))
    return f"{auc}\\,{interval} & {tpr}"


def to_latex(tables: Sequence[Table], *, title: str) -> str:
    """Every table as a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
    parts = [f"% {escape_latex(title)}: generated by imprint experiment", ""]
    for table in tables:
        n = len(table.columns)
        parts += [r"\begin{table}[t]", r"\centering", r"\small",
                  rf"\begin{{tabular}}{{l{'rr' * n}}}", r"\toprule"]  # fmt: skip
        heads = " & ".join(rf"\multicolumn{{2}}{{c}}{{{escape_latex(c)}}}" for c in table.columns)
        parts.append(f"attack & {heads} \\\\")
        rules = " ".join(rf"\cmidrule(lr){{{2 + 2 * i}-{3 + 2 * i}}}" for i in range(n))
        parts.append(rules)
        sub = " & ".join([r"AUC [95\% CI]", escape_latex(fpr_label(table.fpr))] * n)
        parts += [f" & {sub} \\\\", r"\midrule"]
        for row in table.rows:
            if row == (table.blind_rows[0] if table.blind_rows else None):
                parts.append(r"\midrule")
            label = escape_latex(row)
            label = rf"\textit{{{label}}}" if row in table.blind_rows else label
            cells = " & ".join(_tex_entry(table.entries.get((row, c))) for c in table.columns)
            parts.append(f"{label} & {cells} \\\\")
        parts += [r"\bottomrule", r"\end{tabular}",
                  rf"\caption{{{escape_latex(table.title)}. {escape_latex(_legend(table.fpr))}}}",
                  r"\end{table}", ""]  # fmt: skip
    return "\n".join(parts)


# -- HTML -----------------------------------------------------------------------------------------


def heat_colour(auc: float) -> str:
    """Background for an AUC: white at 0.5 (chance), deepening red towards 1, blue towards 0;
    grey when undefined."""
    if math.isnan(auc):
        return "#eeeeee"
    strength = min(abs(auc - 0.5) / 0.5, 1.0)
    fade = round(255 - 155 * strength)
    return f"rgb(255,{fade},{fade})" if auc >= 0.5 else f"rgb({fade},{fade},255)"


def _html_entry(entry: Entry | None) -> str:
    if entry is None:
        return '<td class="none" colspan="2">–</td>'
    a = entry.auc
    weight = " best" if entry.best else ""
    tip = html.escape(entry.tpr_note or "", quote=True)
    return (
        f'<td class="auc{weight}" style="background:{heat_colour(a.estimate)}">'
        f"{_num(a.estimate)}<small> [{_num(a.low)}, {_num(a.high)}]</small></td>"
        f'<td class="tpr" title="{tip}">{html.escape(_tpr_text(entry))}</td>'
    )


def _html_table(table: Table) -> str:
    e = html.escape
    head = "".join(f'<th colspan="2">{e(c)}</th>' for c in table.columns)
    sub = "".join(f"<th>AUC [95% CI]</th><th>{e(fpr_label(table.fpr))}</th>" for _ in table.columns)
    rows = []
    for row in table.rows:
        kind = ' class="blind"' if row in table.blind_rows else ""
        cells = "".join(_html_entry(table.entries.get((row, c))) for c in table.columns)
        rows.append(f"<tr{kind}><th>{e(row)}</th>{cells}</tr>")
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in table.notes)
    warns = "".join(
        f'<p class="warn blind-warning"><b>Warning:</b> {e(w)}</p>' for w in table.blind_warnings
    )
    return (
        f'<h2>{e(table.title)}</h2>{warns}<table><thead><tr><th rowspan="2">attack</th>{head}</tr>'
        f"<tr>{sub}</tr></thead><tbody>{''.join(rows)}</tbody></table>{notes}"
        f'<p class="legend">{e(_legend(table.fpr))}</p>'
    )


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}
th{background:#f6f6f6}tbody th{text-align:left;font-weight:normal}
td.best{font-weight:bold;outline:2px solid #333}
tr.blind th{font-style:italic}tr.blind td{border-top:2px solid #888}
small{color:#555}.note{color:#a60}.legend{color:#555;font-size:.9em}
.warn{background:#fff3cd;padding:.5em}
#colour-bar{display:flex;align-items:center;gap:.6em;margin:1em 0}
#colour-bar .bar{width:320px;height:14px;border:1px solid #999}
#colour-bar .ticks{display:flex;justify-content:space-between;width:322px;font-size:.8em}
"""


def colour_bar() -> str:
    """The heat map's scale: the cell colour of AUC 0 to 1, with ticks (HTML, no script)."""
    stops = ", ".join(f"{heat_colour(v)} {100 * v:g}%" for v in (0.0, 0.25, 0.5, 0.75, 1.0))
    ticks = "".join(f"<span>{v:g}</span>" for v in (0.0, 0.25, 0.5, 0.75, 1.0))
    return (
        '<div id="colour-bar" role="img" aria-label="colour scale of the AUC cells">'
        "<span>AUC</span><div>"
        f'<div class="bar" style="background:linear-gradient(to right, {stops})"></div>'
        f'<div class="ticks">{ticks}</div></div>'
        "<span>blue: members ranked below non-members; white: chance (0.5); red: members "
        "ranked above</span></div>"
    )


def to_html(tables: Sequence[Table], *, title: str, description: str = "") -> str:
    """One self-contained page (inline CSS, no scripts or external files): a colour bar, then
    every table with its AUC cells coloured by a heat-map (white = chance, red = members ranked
    higher) and its blind warnings above it."""
    e = html.escape
    body = "".join(_html_table(t) for t in tables)
    about = f"<p>{e(description)}</p>" if description else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{e(title)}</h1>{about}{colour_bar()}{body}</body></html>\n"
    )


# -- terminal -------------------------------------------------------------------------------------


def rich_tables(tables: Sequence[Table]) -> list[Any]:
    """rich Tables for the console (names shown as plain text, never as markup)."""
    from rich.table import Table as RichTable
    from rich.text import Text

    out = []
    for table in tables:
        shown = RichTable(title=Text(table.title))
        shown.add_column(Text("attack"))
        for column in table.columns:
            shown.add_column(Text(f"{column}\nAUC [95% CI]"), justify="right")
            shown.add_column(Text(fpr_label(table.fpr)), justify="right")
        for row in table.rows:
            cells = [Text(row, style="italic" if row in table.blind_rows else "")]
            for column in table.columns:
                entry = table.entries.get((row, column))
                if entry is None:
                    cells += [Text("–"), Text("–")]
                    continue
                cells += [Text(_auc_text(entry), style="bold" if entry.best else ""),
                          Text(_tpr_text(entry))]  # fmt: skip
            shown.add_row(*cells)
        out.append(shown)
    return out


def write_outputs(result: Any, tables: Sequence[Table], out: Path) -> list[Path]:
    """Write ``tables/*.csv``, ``tables.md``, ``tables.tex``, ``tables.html`` and
    ``cells.parquet`` under ``out``; return the paths written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(exist_ok=True)
    written: list[Path] = []
    for table in tables:
        name, n = slug(table.title), 1
        while out / "tables" / f"{name}.csv" in written:  # 'a/b' and 'a-b' make one slug
            n += 1
            name = f"{slug(table.title)}-{n}"
        path = out / "tables" / f"{name}.csv"
        path.write_text(to_csv(table), encoding="utf-8")
        written.append(path)
    title = result.spec.name
    for name, text in (
        ("tables.md", to_markdown(tables, title=title)),
        ("tables.tex", to_latex(tables, title=title)),
        ("tables.html", to_html(tables, title=title, description=result.spec.description)),
    ):
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    rows = long_rows(result.cells)
    pq.write_table(pa.Table.from_pylist(rows), out / "cells.parquet")
    written.append(out / "cells.parquet")
    return written
