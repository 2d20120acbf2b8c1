"""One blind verdict everywhere (issue 37, item 5): on the demo game (a random split) and on a
shifted benchmark (WikiMIA-32), the terminal, the forest plot's drawing (the data the plotting
function receives) and caption, the demo's check or the study table, and metrics.json state
the same three-state verdict and the same attack-vs-text decisions."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from imprint.data import Sample
from imprint.diagnostics.blind_verdict import BlindVerdict, TextComparison
from imprint.report import writer
from imprint.run import RunConfig, execute_run


@pytest.fixture
def forest_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every forest plot drawn: the keyword arguments the plotting function received. The SoK
    forest is smaller for speed (its fits dominate; the rule under test is the same)."""
    from imprint.diagnostics import blind

    monkeypatch.setattr(blind, "N_ESTIMATORS", 50)
    calls: list[dict[str, Any]] = []
    draw = writer.plot_auc_forest

    def spy(aucs: Any, path: Any, **kw: Any) -> Any:
        calls.append({"aucs": dict(aucs), **kw})
        return draw(aucs, path, **kw)

    monkeypatch.setattr(writer, "plot_auc_forest", spy)
    return calls


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=2000, no_color=True, soft_wrap=True), buffer


def _recorded(folder: Path) -> tuple[BlindVerdict, dict[str, bool], dict[str, Any]]:
    metrics = json.loads((folder / "metrics.json").read_text())
    raw = metrics["blind_verdict"]
    verdict = BlindVerdict.from_dict(raw)
    assert raw["state"] == verdict.state and raw["reason"] == verdict.reason
    beats = {c: TextComparison.from_dict(t).beats_text for c, t in raw["attacks"].items()}
    assert beats.keys() == metrics["attacks"].keys()  # every attack column decided
    return verdict, beats, metrics


def _same_everywhere(
    folder: Path, terminal: str, forest: dict[str, Any]
) -> tuple[BlindVerdict, dict[str, bool]]:
    """The verdict and decisions of metrics.json, checked against the terminal, the report's
    caption, the forest plot's inputs and the run warning."""
    verdict, beats, metrics = _recorded(folder)
    assert verdict.summary in terminal
    beat = ", ".join(c for c, b in beats.items() if b) or "none"
    assert f"): {beat}; not shown to:" in terminal
    report = (folder / "report.md").read_text()
    assert f"{verdict.headline}." in report.replace("\\", "")
    assert f"): {beat}; not shown to:" in report.replace("\\", "")
    # the drawing: the band is the verdict's interval, labelled with its state; markers filled
    # exactly for the columns the paired test says beat the text
    assert forest["verdict"] == verdict
    assert forest["blind"][1] == verdict.interval
    assert forest["beats"] == beats
    shift_warned = "blind_not_at_chance" in metrics["warning_kinds"]
    assert shift_warned == (verdict.state == "shift")
    assert ("do not measure membership" in terminal) == (verdict.state == "shift")
    return verdict, beats


def test_demo_game_states_one_verdict(tiny_model_dir, tmp_path, forest_calls):
    from test_game_demo import write_pool

    from imprint.game.demo import run_demo

    console, buffer = _console()
    result = run_demo(
        model=str(tiny_model_dir),
        pool=str(write_pool(tmp_path / "pool.txt", n=40)),
        pool_size=24, words=8, canary_repetitions=(1, 3), canaries_per_repetition=2,
        canary_generator="random", epochs=(1,), attacks=("loss", "zlib"), n_bootstrap=100,
        out=tmp_path / "demo", reference=False, progress=False, console=console,
    )  # fmt: skip
    (forest,) = forest_calls
    verdict, beats = _same_everywhere(result.runs["e1"], buffer.getvalue(), forest)
    fig = result.figures["e1"]
    assert fig["blind_verdict"]["state"] == verdict.state
    chance, loss = result.checks[0], result.checks[1]
    assert chance["passed"] == (verdict.state != "shift")
    assert verdict.reason in chance["value"]
    word = "beats the text" if beats["loss"] else "not shown to beat the text"
    assert word in loss["value"]
    assert verdict.reason in (tmp_path / "demo" / "demo.md").read_text()
    # a random split of 40 texts: no shift is shown, and none can be ruled out at this n
    assert verdict.state == "inconclusive"


def test_wikimia_32_states_one_verdict_in_run_and_study(tiny_model_dir, tmp_path, forest_calls):
    from imprint.evaluation import read_metrics
    from imprint.study.cells import CellRecord
    from imprint.study.grid import GridResult, blind_cell
    from imprint.study.spec import parse_spec
    from imprint.study.tables import build_tables, column_verdict

    console, buffer = _console()
    out = tmp_path / "run"
    execute_run(
        RunConfig(
            model=str(tiny_model_dir), data="wikimia:32", out=out, attacks=("loss", "zlib"),
            n_per_label=40, n_bootstrap=200, seed=0, progress=False,
        ),
        console=console,
    )  # fmt: skip
    (forest,) = forest_calls
    verdict, beats = _same_everywhere(out, buffer.getvalue(), forest)
    assert verdict.state == "shift"  # WikiMIA's members and non-members differ in time

    # the study: the blind cell fitted on the same texts with the same seed, the attack cells
    # reading this run's per-sample scores; its warning and bold follow the same rule
    table = pq.read_table(out / "scores.parquet").to_pydict()
    samples = [
        Sample(str(i), t, int(y))
        for i, t, y in zip(table["id"], table["text"], table["label"], strict=True)
    ]
    blind = blind_cell("b", "W32", samples, "fp", seed=0, n_bootstrap=200)
    metrics = read_metrics(out / "metrics.json")
    prov = {"data": "fp", "run": str(out)}
    cells = [blind] + [
        CellRecord(f"m-{c}", "m", "W32", c, c, {}, {c: metrics.attacks[c]}, prov)
        for c in metrics.attacks
    ]
    spec = parse_spec(
        {"models": ["m"], "benchmarks": ["W32"], "attacks": ["loss", "zlib"]}, Path("t.yaml")
    )
    (study,) = build_tables(GridResult(spec, cells))
    study_verdict = column_verdict(study.entries, "m", study.blind_rows)
    assert study_verdict is not None and study_verdict.state == verdict.state
    assert study_verdict.interval == verdict.interval
    assert [w for w in study.blind_warnings if verdict.reason in w]
    versus = study.versus_text["m"]
    assert isinstance(versus, dict), versus  # compared: the blind cell kept its scores
    recorded = json.loads((out / "metrics.json").read_text())["blind_verdict"]["attacks"]
    for column, beat in beats.items():
        assert versus[column].beats_text == beat
        assert versus[column].to_dict()["diff"] == recorded[column]["diff"]  # the same test
        said = [n for n in study.notes if f"{column!r} is not marked best" in n]
        if said:  # a row that lost its bold says the same decision as the run
            word = "beats the text" if beat else "not shown to beat the text"
            assert f"{column} {word}" in said[0]
    assert all(beats[r] for (r, _), e in study.entries.items() if e.best)
