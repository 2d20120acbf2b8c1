"""Grid tables on known numbers: layout, best per column, intervals, the blind row, TPR that is
not measurable, escaping of user names in Markdown, LaTeX and HTML, the long Parquet."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from imprint.metrics import Interval, MetricSummary
from imprint.study.cells import BLIND, BLIND_SCORES, CellRecord, CellStore
from imprint.study.grid import GridResult
from imprint.study.spec import parse_spec
from imprint.study.table_render import (
    escape_latex,
    escape_markdown,
    heat_colour,
    to_csv,
    to_html,
    to_latex,
    to_markdown,
    write_outputs,
)
from imprint.study.tables import build_tables, long_rows

ODD = "M|o*d_el & 50% <b>"  # a model name with every format's special characters
NAN = Interval(math.nan, math.nan, math.nan)


def metrics(auc: float, low: float, high: float, tpr: float | None, n: int = 400) -> MetricSummary:
    """A stored summary; 400 non-members resolve 1 % (the rule: 4 false positives allowed)."""
    reasons = {} if tpr is not None else {0.01: "needs 400 non-members"}
    return MetricSummary(
        auc=Interval(auc, low, high),
        tpr_at_fpr={0.01: Interval(tpr, tpr, tpr) if tpr is not None else NAN},
        n_members=n, n_nonmembers=n, n_resamples=1000, confidence=0.95, seed=0,
        not_measurable=reasons,
    )  # fmt: skip


def cell(
    model: str, bench: str, attack: str, columns: dict[str, MetricSummary], **kw
) -> CellRecord:
    row = kw.pop("row", attack)
    prov = {"data": f"fp-{bench}", "evaluated": kw.pop("evaluated", f"ev-{bench}")}
    if "run" in kw:
        prov["run"] = str(kw.pop("run"))
    return CellRecord(f"{model}-{bench}-{row}", model, bench, attack, row, kw, columns, prov)


def scores_run(folder: Path, columns: dict[str, np.ndarray], *, n: int = 240) -> Path:
    """A run folder holding only scores.parquet: 120 members then 120 non-members."""
    folder.mkdir(parents=True, exist_ok=True)
    table = {"id": [f"s{i}" for i in range(n)], "label": [1] * (n // 2) + [0] * (n // 2),
             "text": ["t"] * n, "meta": ["{}"] * n, **columns}  # fmt: skip
    pq.write_table(pa.table(table), folder / "scores.parquet")
    return folder


@pytest.fixture
def result(tmp_path: Path) -> GridResult:
    # per-sample scores behind the cells: under "small" min_k is far better than loss (separate
    # runs, as a sweep's variants are); under ODD the two are the same attack, nearly
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], 120)
    base = rng.normal(size=240) + 0.3 * labels
    runs = {
        "small-loss": scores_run(tmp_path / "r1", {"loss": base}),
        "small-min_k": scores_run(tmp_path / "r2", {"min_k": base + 1.5 * labels}),
        "odd": scores_run(
            tmp_path / "r3", {"loss": base, "min_k": base + 0.01 * rng.normal(size=240)}
        ),
    }
    spec = parse_spec(
        {"models": ["small", ODD], "benchmarks": ["W32"], "attacks": ["loss", "min_k"],
         "sweep": {"min_k.k": [0.2]}},
        Path("t.yaml"),
    )  # fmt: skip
    blind = cell("", "W32", BLIND, {"blind (SoK bag-of-words)": metrics(0.53, 0.46, 0.60, 0.2)},
                 row="blind baseline")  # fmt: skip
    # the blind classifier's out-of-fold scores (no signal): each attack is compared with them
    blind.provenance[BLIND_SCORES] = {
        "classifier": "sok_bag_of_words", "ids": [f"s{i}" for i in range(240)],
        "scores": rng.normal(size=240).tolist(),
    }  # fmt: skip
    cells = [
        blind,
        cell("small", "W32", "loss", {"loss": metrics(0.61, 0.55, 0.67, 0.03)},
             run=runs["small-loss"]),
        cell("small", "W32", "min_k", {"min_k": metrics(0.64, 0.58, 0.70, None)},
             row="min_k (k=0.2)", run=runs["small-min_k"]),
        cell(ODD, "W32", "loss", {"loss": metrics(0.70, 0.64, 0.76, 0.051)}, run=runs["odd"]),
        cell(ODD, "W32", "min_k", {"min_k": metrics(0.71, 0.65, 0.75, 0.04)},
             row="min_k (k=0.2)", run=runs["odd"]),
    ]  # fmt: skip
    return GridResult(spec, cells)


def test_layout_best_per_column_and_the_blind_row(result: GridResult):
    (table,) = build_tables(result)
    assert table.title == "W32" and table.columns == ("small", ODD)
    assert table.rows == ("loss", "min_k (k=0.2)", "blind (SoK bag-of-words)")
    assert table.blind_rows == ("blind (SoK bag-of-words)",)
    best = {k for k, e in table.entries.items() if e.best}
    # the blind row (0.53) is never "best"; under ODD min_k has the larger point estimate (0.71
    # against 0.70) but the paired test on the same samples shows no difference: nothing marked
    assert best == {("min_k (k=0.2)", "small")}
    small = table.comparisons["small"]
    assert small.between("min_k (k=0.2)", "loss").verdict == "a" and small.n_pairs == 1
    assert table.comparisons[ODD].between("min_k (k=0.2)", "loss").verdict == "none"
    blind = table.entries[("blind (SoK bag-of-words)", ODD)]
    assert blind.auc.estimate == 0.53  # model-less: the same figure under every model
    assert table.entries[("min_k (k=0.2)", "small")].tpr is None
    assert len(table.notes) == 2 and "on the 240 samples they all scored" in table.notes[0]


def test_markdown_shows_intervals_bold_best_and_escapes_names(result: GridResult):
    text = to_markdown(build_tables(result), title="T|1")
    assert "# T\\|1" in text
    header = next(line for line in text.splitlines() if line.startswith("| attack"))
    assert r"M\|o\*d\_el & 50% \<b\> AUC [95% CI]" in header
    assert len(re.findall(r"(?<!\\)\|", header)) == 6  # an escaped | never splits a column
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if "|" in line}
    assert "**0.640 [0.580, 0.700]** | n/m" in rows["min\\_k (k=0.2)"]
    assert "0.610 [0.550, 0.670] | 3.0%" in rows["loss"]
    assert "| 0.700 [0.640, 0.760] | 5.1%" in rows["loss"]  # no paired difference: not bold
    assert "| *blind (SoK bag-of-words)* | 0.530 [0.460, 0.600] | 20.0%" in text


def test_latex_escapes_and_bolds(result: GridResult):
    text = to_latex(build_tables(result), title="T")
    assert r"\multicolumn{2}{c}{M\textbar{}o*d\_el \& 50\% \textless{}b\textgreater{}}" in text
    assert r"\textbf{0.640}\,{\scriptsize[0.580, 0.700]} & n/m" in text
    assert r"0.610\,{\scriptsize[0.550, 0.670]} & 3.0\%" in text
    assert r"\textit{blind (SoK bag-of-words)}" in text
    assert text.count(r"\begin{tabular}{lrrrr}") == 1
    body = text.split(r"\midrule", 1)[1]
    assert "&" in body and not re.search(r"(?<!\\)[%_#]", body.split(r"\caption")[0])


def test_html_is_self_contained_escaped_and_coloured(result: GridResult):
    page = to_html(build_tables(result), title="<T>", description="a & b")
    assert "<b>" not in page.replace("<body>", "") and "M|o*d_el &amp; 50% &lt;b&gt;" in page
    assert "&lt;T&gt;" in page and "a &amp; b" in page
    assert "<script" not in page and "http" not in page and "src=" not in page
    assert page.count('class="auc best"') == 1
    assert f"background:{heat_colour(0.53)}" in page
    assert 'title="needs 400 non-members"' in page


def test_heat_colour_is_white_at_chance_and_deepens():
    assert heat_colour(0.5) == "rgb(255,255,255)"
    assert heat_colour(1.0) == "rgb(255,100,100)" and heat_colour(0.0) == "rgb(100,100,255)"
    assert heat_colour(math.nan) == "#eeeeee"


def test_csv_has_one_line_per_row_with_numbers(result: GridResult):
    (table,) = build_tables(result)
    rows = list(csv.reader(io.StringIO(to_csv(table))))
    assert rows[0][:4] == ["attack", "kind", "small auc", "small auc_low"]
    loss = rows[1]
    assert loss[0] == "loss" and loss[1] == "attack"
    assert [float(x) for x in loss[2:6]] == [0.61, 0.55, 0.67, 0.03] and loss[6] == "0"
    assert rows[2][5] == "" and rows[2][6] == "1"  # TPR not measurable: empty; best
    assert rows[3][1] == "blind"


def test_escaping_functions():
    assert escape_markdown("a|b*c_d\n[e]") == r"a\|b\*c\_d \[e\]"
    assert escape_latex("50% & $x_1$ ~ {y}\\") == (
        r"50\% \& \$x\_1\$ \textasciitilde{} \{y\}\textbackslash{}"
    )
    assert escape_markdown("東京 モデル") == "東京 モデル"


def test_columns_by_benchmark_and_a_note_for_mixed_evaluation_sets():
    spec = parse_spec(
        {"models": ["m"], "benchmarks": ["A", "B"], "attacks": ["loss", "recall"],
         "table": {"columns": "benchmark"}},
        Path("t.yaml"),
    )  # fmt: skip
    cells = [
        cell("m", "A", "loss", {"loss": metrics(0.6, 0.5, 0.7, 0.1)}),
        cell("m", "A", "recall", {"recall": metrics(0.8, 0.7, 0.9, 0.1)}, evaluated="other"),
        cell("m", "B", "loss", {"loss": metrics(0.9, 0.8, 1.0, 0.1)}),
    ]
    (table,) = build_tables(GridResult(spec, cells))
    assert table.title == "m" and table.columns == ("A", "B")
    # without per-sample scores nothing is marked, however far apart the estimates (0.6, 0.8)
    assert not any(e.best for e in table.entries.values())
    assert ("recall", "B") not in table.entries  # a missing cell is shown as a dash
    assert "– | –" in to_markdown([table], title="x")
    assert len(table.notes) == 2 and "column 'A'" in table.notes[0]
    assert "no attack marked best: no per-sample scores for 'loss'" in table.notes[1]


def test_outputs_and_long_parquet(result: GridResult, tmp_path: Path):
    written = write_outputs(result, build_tables(result), tmp_path)
    assert {p.name for p in written} >= {"tables.md", "tables.tex", "tables.html", "cells.parquet"}
    rows = pq.read_table(tmp_path / "cells.parquet").to_pylist()
    assert len(rows) == 5 * 2  # 5 cells x (auc, tpr@1%)
    loss = [r for r in rows if r["model"] == ODD and r["column"] == "loss"]
    assert {r["metric"]: r["estimate"] for r in loss} == {"auc": 0.70, "tpr@1%": 0.051}
    nm = next(r for r in rows if r["row"] == "min_k (k=0.2)" and r["model"] == "small"
              and r["metric"] != "auc")  # fmt: skip
    assert nm["not_measurable"] == "needs 400 non-members" and math.isnan(nm["estimate"])


def test_cells_round_trip_and_a_broken_file_is_recomputed(result: GridResult, tmp_path: Path):
    store = CellStore(tmp_path)
    for record in result.cells:
        store.put(record)
    assert [store.get(r.key).to_dict() for r in result.cells] == [r.to_dict() for r in result.cells]
    store.path(result.cells[0].key).write_text('{"format": 1, "key": ', encoding="utf-8")
    assert store.get(result.cells[0].key) is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_long_parquet_row_names_each_score_column_of_a_two_column_attack():
    # issue 19 item 15: zlib writes zlib and zlib_char; both rows read "zlib" before
    spec = parse_spec(
        {"models": ["m"], "benchmarks": ["A"], "attacks": ["zlib", "min_k"],
         "sweep": {"min_k.k": [0.2]}},
        Path("t.yaml"),
    )  # fmt: skip
    cells = [
        cell("m", "A", "zlib", {"zlib": metrics(0.6, 0.5, 0.7, 0.1),
                                "zlib_char": metrics(0.62, 0.5, 0.7, 0.1)}),
        cell("m", "A", "min_k", {"min_k": metrics(0.6, 0.5, 0.7, 0.1)}, row="min_k (k=0.2)"),
    ]  # fmt: skip
    rows = {(r["column"], r["row"]) for r in long_rows(cells)}
    assert rows == {("zlib", "zlib"), ("zlib_char", "zlib_char"), ("min_k", "min_k (k=0.2)")}
    (table,) = build_tables(GridResult(spec, cells))
    assert set(table.rows) == {r for _, r in rows}  # the Parquet's rows are the table's rows


def test_legend_says_bold_needs_the_paired_test(result: GridResult):
    text = " ".join(to_markdown(build_tables(result), title="T").split())
    assert "by DeLong's paired test on the samples they all scored" in text
    assert "no attack is bold when none is, whatever the point estimates" in text


def test_study_table_applies_the_resolution_rule_to_old_run_folders() -> None:
    """Issue 37: a run folder written under the old rule (1/t non-members) holds a TPR@1 % with
    120 non-members; the study table shows it as not measurable, with the reason."""
    from imprint.study.tables import Entry

    entry = Entry.of(metrics(0.6, 0.55, 0.65, 0.03, n=120), 0.01)
    assert entry.tpr is None and "400 non-members" in (entry.tpr_note or "")
    assert Entry.of(metrics(0.6, 0.55, 0.65, 0.03), 0.01).tpr is not None


def test_comparison_with_the_text_uses_the_blind_cells_folds(result: GridResult, tmp_path: Path):
    """A blind cell stores each id's test fold: the study's "beats the text" counts the blind
    column's refitting as the run's does; an older cell without folds is DeLong only, said so."""
    from imprint.study.paired_tables import RunCache, text_comparisons

    blind = next(c for c in result.cells if c.attack == BLIND)
    rows = [(c.row, c, c.attack) for c in result.cells if c.model == "small"]
    old = text_comparisons(rows, blind, RunCache(tmp_path))
    assert isinstance(old, dict) and all(v.n_folds == 0 for v in old.values())
    assert "no folds stored" in old["loss"].text
    blind.provenance[BLIND_SCORES]["folds"] = [i % 5 for i in range(240)]
    new = text_comparisons(rows, blind, RunCache(tmp_path))
    assert isinstance(new, dict) and all(v.n_folds == 5 for v in new.values())
    assert new["loss"].diff.low <= old["loss"].diff.low
