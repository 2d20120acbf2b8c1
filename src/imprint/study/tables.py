"""The grid's cells laid out as the papers' tables, plus the long-format Parquet of every cell.

A table has attacks (score columns, with their swept parameters) as rows and models (or
benchmarks) as columns; each entry is the AUC with its 95 % bootstrap interval and the TPR at
the layout's FPR bound (1 % by default; "not measurable" with fewer non-members than 1/FPR).
An attack is marked best in its column only when a paired test on the same samples shows it
better than every other attack of the column (:mod:`.paired_tables`: DeLong, Bonferroni over
the column's pairs), never for the largest point estimate alone, and not when it is not shown to
beat the text (DeLong's paired test against the strongest model-less classifier's out-of-fold
scores on the same texts, stored with the blind cell; :mod:`imprint.diagnostics.blind_verdict`,
the run report's rule); a column whose blind verdict is ``shift`` gets a warning; the blind
baselines are their own rows, never marked. Rendering to text formats and writing the files is
:mod:`.table_render`'s job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.diagnostics.blind_verdict import BlindVerdict, TextComparison, blind_verdict
from imprint.metrics import Interval, MetricSummary
from imprint.metrics.bootstrap import fpr_key
from imprint.metrics.pairwise import PairedComparisons
from imprint.study.cells import BLIND, STRONGEST_BLIND, CellRecord
from imprint.study.paired_tables import RunCache, column_comparisons, text_comparisons, winners

__all__ = ["Entry", "Table", "build_tables", "long_rows"]


@dataclass(frozen=True)
class Entry:
    """One table entry: AUC and TPR at the table's FPR (None: not measurable, ``tpr_note``
    says why), the class counts, and whether it is its column's best attack by the paired test
    (better than every other attack of the column on the same samples)."""

    auc: Interval
    tpr: Interval | None
    n_members: int
    n_nonmembers: int
    best: bool = False
    tpr_note: str | None = None
    confidence: float = 0.95  # the AUC interval's level (a blind row's: Bonferroni-adjusted)

    @classmethod
    def of(cls, metrics: MetricSummary, fpr: float) -> Entry:
        # the one resolution rule, also for run folders written under the older one
        reason = metrics.not_measurable.get(fpr) or metrics.unresolved((fpr,)).get(fpr)
        tpr = None if reason else metrics.tpr(fpr)
        if tpr is not None and math.isnan(tpr.estimate):
            tpr = None
        note = reason or (None if tpr else "not computed")
        return cls(metrics.auc, tpr, metrics.n_members, metrics.n_nonmembers, tpr_note=note,
                   confidence=metrics.confidence)  # fmt: skip


@dataclass(frozen=True)
class Table:
    """``entries[(row, column)]``; ``blind_rows`` are the model-less baselines; ``notes``
    explain what a reader must know (evaluation sets that differ within a column ...)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[str, ...]
    entries: dict[tuple[str, str], Entry]
    blind_rows: tuple[str, ...] = ()
    fpr: float = 0.01
    notes: tuple[str, ...] = field(default_factory=tuple)
    # column -> the paired comparisons of its attack rows, or why there are none
    comparisons: dict[str, PairedComparisons | str] = field(default_factory=dict)
    # a warning per column whose blind baseline is off chance: its attacks measure the data
    blind_warnings: tuple[str, ...] = ()
    # column -> attack row -> its paired comparison with the text (or why there is none)
    versus_text: dict[str, dict[str, TextComparison] | str] = field(default_factory=dict)


def _row_label(record: CellRecord, column: str) -> str:
    """The score column, with the swept parameters when the attack was swept."""
    suffix = record.row[len(record.attack) :] if record.row.startswith(record.attack) else ""
    return f"{column}{suffix}"


def _mark_best(
    entries: dict[tuple[str, str], Entry],
    sources: dict[tuple[str, str], tuple[CellRecord, str]],
    out: Path,
) -> dict[str, PairedComparisons | str]:
    """Per column, compare its attack rows pairwise on their shared samples and mark the row
    better than every other (none when no row is); return each column's comparisons."""
    from dataclasses import replace

    runs = RunCache(out)
    found: dict[str, PairedComparisons | str] = {}
    for column in dict.fromkeys(c for _, c in sources):
        rows = [(r, *sources[(r, c)]) for (r, c) in sources if c == column]
        compared = column_comparisons(rows, out, runs=runs)
        found[column] = compared
        if isinstance(compared, str):
            continue
        for row in winners(compared, [r for r, _, _ in rows]):
            entries[(row, column)] = replace(entries[(row, column)], best=True)
    return found


def _comparison_notes(found: dict[str, PairedComparisons | str]) -> tuple[str, ...]:
    """What each column's paired comparison did, or why it could not be made."""
    notes = []
    for column, compared in found.items():
        if isinstance(compared, str):
            if compared != "one attack row":
                notes.append(f"column {column!r}: no attack marked best: {compared}")
            continue
        pair = compared.pairs[0]
        n = pair.n_members + pair.n_nonmembers
        notes.append(
            f"column {column!r}: attacks compared pairwise on the {n} samples they all scored "
            f"({compared.n_pairs} pair(s), DeLong paired test, Bonferroni)"
        )
    return tuple(notes)


def _notes(records: Sequence[tuple[str, CellRecord]]) -> tuple[str, ...]:
    """A note per column whose attack rows were evaluated on different samples."""
    by_column: dict[str, set[str]] = {}
    for column, record in records:
        if record.attack != BLIND and record.provenance.get("evaluated"):
            by_column.setdefault(column, set()).add(record.provenance["evaluated"])
    return tuple(
        f"column {c!r}: rows were evaluated on {len(v)} different sample sets (an attack that "
        "takes its shots from the data removes them from its own run only); give it a pool "
        "for one evaluation set"
        for c, v in by_column.items()
        if len(v) > 1
    )


def _table(title: str, placed: Sequence[tuple[str, CellRecord]], fpr: float, out: Path) -> Table:
    """``placed``: (column, record) pairs of one table, in grid order; ``out`` the grid's folder
    (cells' run folders, with their per-sample scores, are under it)."""
    entries: dict[tuple[str, str], Entry] = {}
    sources: dict[tuple[str, str], tuple[CellRecord, str]] = {}
    rows: list[str] = []
    blind: list[str] = []
    columns: list[str] = []
    blind_cells: dict[str, CellRecord] = {}
    for column, record in placed:
        if column not in columns:
            columns.append(column)
        if record.attack == BLIND:
            blind_cells[column] = record
        for score_column, metrics in record.columns.items():
            row = score_column if record.attack == BLIND else _row_label(record, score_column)
            target = blind if record.attack == BLIND else rows
            if row not in target:
                target.append(row)
            entries[(row, column)] = Entry.of(metrics, fpr)
            if record.attack != BLIND:
                sources[(row, column)] = (record, score_column)
    found = _mark_best(entries, sources, out)
    texts = _versus_text(sources, blind_cells, out)
    beaten, warned = blind_checks(entries, columns, blind, texts)
    notes = _notes(placed) + _comparison_notes(found) + beaten
    return Table(title, tuple(columns), tuple(rows + blind), entries, tuple(blind), fpr,
                 notes, found, warned, texts)  # fmt: skip


def _versus_text(
    sources: dict[tuple[str, str], tuple[CellRecord, str]],
    blind_cells: dict[str, CellRecord],
    out: Path,
) -> dict[str, dict[str, TextComparison] | str]:
    """Per column, each attack row compared with the blind cell's out-of-fold scores on the
    same texts (:func:`~imprint.study.paired_tables.text_comparisons`), or why not."""
    runs = RunCache(out)
    found: dict[str, dict[str, TextComparison] | str] = {}
    for column in dict.fromkeys(c for _, c in sources):
        rows = [(r, *sources[(r, c)]) for (r, c) in sources if c == column]
        found[column] = text_comparisons(rows, blind_cells.get(column), runs)
    return found


def blind_checks(
    entries: dict[tuple[str, str], Entry],
    columns: Sequence[str],
    blind: Sequence[str],
    texts: dict[str, dict[str, TextComparison] | str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Per column, the run report's one rule (:mod:`imprint.diagnostics.blind_verdict`): the
    column's blind verdict (from the strongest classifier's selection-adjusted row, else the SoK
    forest's) gives a warning when its state is ``shift``; an attack keeps its "best" mark only
    when ``texts`` (column -> row -> paired comparison with the blind classifier's out-of-fold
    scores, or why there is none) shows it beating the text. Returns (notes, warnings);
    ``entries`` is updated in place."""
    from dataclasses import replace

    notes, warnings = [], []
    for column in columns:
        verdict = column_verdict(entries, column, blind)
        if verdict is None:
            continue
        compared = (texts or {}).get(column, "not compared with the text")
        for (row, col), entry in list(entries.items()):
            if col != column or not entry.best:
                continue
            versus = compared.get(row) if isinstance(compared, dict) else None
            if versus is None or not versus.beats_text:
                entries[(row, col)] = replace(entry, best=False)
                why = (
                    versus.text if versus is not None else f"not compared with the text: {compared}"
                )
                notes.append(f"column {column!r}: {row!r} is not marked best: {why}")
        if verdict.state == "shift":
            warnings.append(f"column {column!r}: {verdict.reason}")
    return tuple(notes), tuple(warnings)


def column_verdict(
    entries: dict[tuple[str, str], Entry], column: str, blind: Sequence[str]
) -> BlindVerdict | None:
    """The column's blind verdict: the strongest classifier's row (its interval Bonferroni over
    m = 0.05 / (1 - level) classifiers) when the column has one, else the SoK forest's (fixed in
    advance, m = 1); None without a blind row."""
    rows = [b for b in blind if (b, column) in entries]
    strongest = [b for b in rows if b.startswith(STRONGEST_BLIND)]
    if not rows:
        return None
    row = (strongest or rows)[0]
    entry = entries[(row, column)]
    m = max(1, round((1 - 0.95) / max(1e-12, 1 - entry.confidence))) if strongest else 1
    name = row[len(STRONGEST_BLIND) : -1] if strongest else row
    return blind_verdict(entry.auc, classifier=name, n_classifiers=m, confidence=entry.confidence)


def build_tables(result: Any) -> list[Table]:
    """The tables of a :class:`~imprint.study.grid.GridResult`, laid out as its spec says."""
    spec = result.spec
    attack_cells = [r for r in result.cells if r.attack != BLIND]
    blind = {(r.benchmark, r.provenance.get("data")): r for r in result.cells if r.attack == BLIND}
    by_model = spec.table.columns == "model"
    groups: dict[str, list[tuple[str, CellRecord]]] = {}
    seen_blind: set[tuple[str, str, str]] = set()
    for record in attack_cells:
        title, column = (
            (record.benchmark, record.model) if by_model else (record.model, record.benchmark)
        )
        groups.setdefault(title, []).append((column, record))
        base = blind.get((record.benchmark, record.provenance.get("data")))
        if base is not None and (title, column, base.key) not in seen_blind:
            seen_blind.add((title, column, base.key))
            groups[title].append((column, base))
    return [_table(title, placed, spec.table.fpr, spec.out) for title, placed in groups.items()]


def long_rows(cells: Sequence[CellRecord]) -> list[dict[str, Any]]:
    """One row per (cell, score column, figure): AUC and TPR at every FPR bound computed,
    with intervals, class counts and where the cell came from."""
    out = []
    for record in cells:
        for column, metrics in record.columns.items():
            figures = [("auc", metrics.auc, None)] + [
                (
                    fpr_key(b),
                    v or Interval(math.nan, math.nan, math.nan),
                    metrics.not_measurable.get(b),
                )
                for b, v in sorted(metrics.tpr_at_fpr.items())
            ]
            for name, interval, reason in figures:
                out.append({
                    "model": record.model, "benchmark": record.benchmark,
                    "attack": record.attack, "row": _long_row(record, column), "column": column,
                    "params": _params_text(record.params), "metric": name,
                    "estimate": interval.estimate, "low": interval.low, "high": interval.high,
                    "not_measurable": reason, "n_members": metrics.n_members,
                    "n_nonmembers": metrics.n_nonmembers, "cell": record.key,
                    "run": record.provenance.get("run"), "data": record.provenance.get("data"),
                })  # fmt: skip
    return out


def _long_row(record: CellRecord, column: str) -> str:
    """The table's row label of ``column``: ``zlib`` and ``zlib_char`` of one zlib cell are two
    rows (the cell's own ``row`` names only its attack and swept parameters)."""
    return column if record.attack == BLIND else _row_label(record, column)


def _params_text(params: dict[str, Any]) -> str:
    import json

    return json.dumps(params, sort_keys=True, default=str, ensure_ascii=False)
