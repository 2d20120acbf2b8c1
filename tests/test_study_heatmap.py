"""The study heat map: a colour bar, a blind warning per column, and no "best" bold for an
attack not shown to beat the text (issue 24: zlib 0.585 [0.402, 0.750] was bolded beside a
blind row at 0.966; issue 37: the decision is a paired test against the blind classifier's
out-of-fold scores on the same texts, the run report's rule, not overlapping intervals)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_study_tables import cell, metrics, scores_run

from imprint.study.cells import BLIND, BLIND_SCORES
from imprint.study.grid import GridResult
from imprint.study.spec import parse_spec
from imprint.study.table_render import heat_colour, to_html, to_markdown
from imprint.study.tables import build_tables


def _result(
    tmp_path: Path,
    blind_auc: float,
    blind: dict | None = None,
    *,
    signal: float = 0.0,
    scores: bool = True,
) -> GridResult:
    """loss and zlib on the same 240 texts, zlib far better by the paired test; a blind row
    (or the rows ``blind``) whose cell stores out-of-fold scores carrying ``signal`` (none with
    ``scores=False``, a cell stored by an older imprint)."""
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], 120)
    base = rng.normal(size=240)
    run = scores_run(tmp_path / "r", {"loss": base, "zlib": base + 1.5 * labels})
    spec = parse_spec(
        {"models": ["m"], "benchmarks": ["W32"], "attacks": ["loss", "zlib"]}, Path("t.yaml")
    )
    base_row = metrics(blind_auc, blind_auc - 0.1, min(blind_auc + 0.03, 1.0), 0.2)
    blind_cell = cell("", "W32", BLIND, blind or {"greedy_ngrams": base_row}, row="blind baseline")
    if scores:
        oof = rng.normal(size=240) + signal * labels
        blind_cell.provenance[BLIND_SCORES] = {
            "classifier": "greedy_ngrams", "ids": [f"s{i}" for i in range(240)],
            "scores": oof.tolist(),
        }  # fmt: skip
    cells = [
        blind_cell,
        cell("m", "W32", "loss", {"loss": metrics(0.52, 0.45, 0.6, 0.01)}, run=run),
        cell("m", "W32", "zlib", {"zlib": metrics(0.585, 0.402, 0.750, 0.02)}, run=run),
    ]
    return GridResult(spec, cells)


def test_no_best_bold_when_a_blind_baseline_beats_the_attack(tmp_path):
    (table,) = build_tables(_result(tmp_path, 0.966, signal=4.0))
    assert not any(e.best for e in table.entries.values())
    assert any("'zlib' is not marked best" in n and "greedy_ngrams" in n for n in table.notes)
    page = to_html([table], title="t")
    assert 'class="auc best"' not in page
    assert "**0.585" not in to_markdown([table], title="t")


def test_best_stays_bold_when_the_blind_baseline_is_at_chance(tmp_path):
    (table,) = build_tables(_result(tmp_path, 0.52))
    assert {k for k, e in table.entries.items() if e.best} == {("zlib", "m")}
    assert table.blind_warnings == ()
    assert 'class="warn blind-warning"' not in to_html([table], title="t")


def test_beating_the_text_is_a_paired_test_not_an_overlap_of_intervals(tmp_path):
    """Issue 37: zlib's interval [0.402, 0.750] overlaps the strongest blind row's
    Bonferroni-adjusted [0.47, 0.62], but paired on the same texts with that classifier's
    out-of-fold scores zlib is far better: it stays bold. A blind cell with no stored scores
    (an older imprint) cannot decide it: no bold, and the note says why."""
    from dataclasses import replace

    strongest = replace(metrics(0.56, 0.47, 0.62, 0.2), confidence=1 - 0.05 / 4)
    rows = {
        "blind (SoK bag-of-words)": metrics(0.55, 0.49, 0.61, 0.2),
        "blind (strongest: greedy_ngrams)": strongest,
    }
    (table,) = build_tables(_result(tmp_path, 0.0, rows, signal=0.3))
    assert {k for k, e in table.entries.items() if e.best} == {("zlib", "m")}
    assert table.blind_warnings == ()  # the verdict: [0.47, 0.62] is inconclusive, not shift
    (table,) = build_tables(_result(tmp_path, 0.0, rows, scores=False))
    assert not any(e.best for e in table.entries.values())
    (note,) = [n for n in table.notes if "'zlib' is not marked best" in n]
    assert "holds no out-of-fold scores" in note


def test_heat_map_has_a_colour_bar_and_the_blind_warning(tmp_path):
    (table,) = build_tables(_result(tmp_path, 0.966))
    assert len(table.blind_warnings) == 1 and "0.966" in table.blind_warnings[0]
    page = to_html([table], title="t")
    assert '<div id="colour-bar"' in page
    for auc in (0.0, 0.5, 1.0):  # the bar's gradient runs through the cells' own colours
        assert heat_colour(auc) in page.split('id="colour-bar"')[1].split("</div></div>")[0]
    assert 'class="warn blind-warning"' in page and "do not measure membership" in page
    assert "**Warning:**" in to_markdown([table], title="t")
