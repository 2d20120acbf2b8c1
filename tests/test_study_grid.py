"""Experiment grids on tiny random models: each (model, text) pass runs once across all cells, a
second invocation makes no model call, adding a model or an attack computes only the new cells,
and a grid killed with SIGKILL resumes with the cells it finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from imprint.cli import app
from imprint.study.grid import run_grid
from imprint.study.spec import load_spec
from imprint.study.tables import build_tables

# members and non-members in several scripts: the grid must not care what the text is
_WORDS = {
    1: ["the river city council met", "Hurricane Ana crossed Hawaii", "東京の会議は予算を議論した",
        "Москва приняла новый бюджет", "الفريق فاز بالبطولة أمس"],
    0: ["a new probe landed on Mars", "the 2024 games opened today", "서울에서 새 다리가 열렸다",
        "Ο νέος σταθμός άνοιξε", "नई ट्रेन आज शुरू हुई"],
}  # fmt: skip


def write_data(path: Path, n_per_label: int) -> Path:
    rows = []
    for label, phrases in _WORDS.items():
        for i in range(n_per_label):
            text = f"{phrases[i % len(phrases)]} {i} and {phrases[(i * 3 + 1) % len(phrases)]}"
            rows.append({"id": f"{label}-{i}", "text": text, "label": label})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def write_spec(path: Path, **content: Any) -> Path:
    base = {"settings": {"n_bootstrap": 20, "device": "cpu", "blind": False}}
    path.write_text(yaml.safe_dump({**base, **content}, allow_unicode=True), encoding="utf-8")
    return path


def texts_of(path: Path) -> set[str]:
    return {json.loads(line)["text"] for line in path.read_text("utf-8").splitlines()}


@pytest.fixture
def grid_files(tmp_path: Path, tiny_model_dir: Path, tiny_ref_dir: Path) -> dict[str, Any]:
    a = write_data(tmp_path / "a.jsonl", 12)
    b = write_data(tmp_path / "b.jsonl", 9)  # shares 18 of its texts with a: cached passes
    return {"a": a, "b": b, "m1": str(tiny_model_dir), "m2": str(tiny_ref_dir), "tmp": tmp_path}


def _grid_spec(files: dict[str, Any], name: str, **extra: Any) -> Any:
    content = {
        "models": [{"name": "tiny-1", "model": files["m1"]}],
        "benchmarks": [
            {"name": "A", "data": str(files["a"])},
            {"name": "B", "data": str(files["b"])},
        ],
        "attacks": ["loss", "min_k", "min_k_pp"],
        "sweep": {"min_k.k": [0.1, 0.3, 0.5]},
        "out": str(files["tmp"] / "study"),
        **extra,
    }
    return load_spec(write_spec(files["tmp"] / f"{name}.yaml", **content))


def test_each_pass_runs_once_across_cells_and_a_rerun_calls_no_model(grid_files, one_torch_thread):
    spec = _grid_spec(grid_files, "first")
    first = run_grid(spec, None, progress=False)
    # 2 benchmarks x (loss, min_k x 3, min_k_pp) = 10 cells, in 3 runs per benchmark
    assert (first.computed, first.reused, len(first.cells)) == (10, 0, 10)
    assert first.models_loaded == ["tiny-1"]  # loaded once for all six runs
    passes = first.requests["tiny-1"]["logprobs"]
    distinct = len(texts_of(grid_files["a"]) | texts_of(grid_files["b"]))
    assert passes["executed"] == distinct  # each (model, text) pass once, across every cell
    assert passes["requests"] == 3 * (24 + 18)  # every run asked; the cache answered the rest
    assert passes["cache_hits"] == passes["requests"] - distinct
    runs = {c.provenance["run"] for c in first.cells}
    assert len(runs) == 6 and all((spec.out / r / "manifest.json").is_file() for r in runs)
    # the table compares a column's attacks pairwise on the per-sample scores of their runs
    compared = build_tables(first)[0].comparisons["tiny-1"]
    assert not isinstance(compared, str) and compared.n_pairs == 10  # 5 attack rows

    again = run_grid(spec, None, progress=False)
    assert (again.computed, again.reused, again.executed) == (0, 10, 0)
    assert again.models_loaded == [] and again.requests == {}
    assert [c.to_dict() for c in again.cells] == [c.to_dict() for c in first.cells]

    renamed = _grid_spec(
        grid_files, "renamed", models=[{"name": "Tiny Ünë", "model": grid_files["m1"]}]
    )
    relabelled = run_grid(renamed, None, progress=False)
    assert (relabelled.computed, relabelled.executed) == (0, 0)  # a label is not content
    assert build_tables(relabelled)[0].columns == ("Tiny Ünë",)


def test_adding_a_model_and_an_attack_computes_only_the_new_cells(grid_files, one_torch_thread):
    run_grid(_grid_spec(grid_files, "first"), None, progress=False)
    models = [
        {"name": "tiny-1", "model": grid_files["m1"]},
        {"name": "tiny-2", "model": grid_files["m2"]},
    ]
    spec = _grid_spec(
        grid_files, "more", models=models, attacks=["loss", "min_k", "min_k_pp", "zlib"]
    )
    more = run_grid(spec, None, progress=False)
    # new: zlib on tiny-1 (2 cells), every cell of tiny-2 (2 x 6)
    assert (more.computed, more.reused) == (2 + 12, 10)
    distinct = len(texts_of(grid_files["a"]) | texts_of(grid_files["b"]))
    assert more.requests["tiny-1"]["logprobs"]["executed"] == 0  # zlib reuses loss's pass
    assert more.requests["tiny-2"]["logprobs"]["executed"] == distinct
    tables = build_tables(more)
    assert [t.title for t in tables] == ["A", "B"]
    assert tables[0].columns == ("tiny-1", "tiny-2")
    assert "min_k (k=0.3)" in tables[0].rows and "zlib" in tables[0].rows


def test_a_grid_killed_half_way_resumes_with_its_finished_cells(grid_files):
    spec_path = write_spec(
        grid_files["tmp"] / "kill.yaml",
        models=[{"name": "tiny", "model": grid_files["m1"]}],
        benchmarks=[str(grid_files["a"]), str(grid_files["b"])],
        attacks=["loss", "min_k"],
        sweep={"min_k.k": [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]},
        out=str(grid_files["tmp"] / "killed"),
        # one store for the killed grid (its own IMPRINT_CACHE_DIR) and the resumed one (this
        # process's): the default store follows $IMPRINT_CACHE_DIR
        cache=str(grid_files["tmp"] / "kill-cache.sqlite"),
    )
    cells = grid_files["tmp"] / "killed" / "cells"
    env = {**os.environ, "IMPRINT_CACHE_DIR": str(grid_files["tmp"] / "c")}
    args = [sys.executable, "-m", "imprint", "experiment", str(spec_path), "--no-progress"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len(list(cells.glob("*.json"))) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    finished = len(list(cells.glob("*.json")))
    assert 0 < finished < 18, (
        f"the grid must be killed half-way ({finished}): {err.decode()[-800:]}"
    )
    assert not list(cells.glob(".*.tmp")) or all(p.stat().st_size >= 0 for p in cells.glob(".*"))
    resumed = run_grid(load_spec(spec_path), None, progress=False)
    assert resumed.reused == finished and resumed.computed == 18 - finished
    passes = resumed.requests["tiny"]["logprobs"]
    assert passes["executed"] == 0  # the killed grid's passes were committed to the cache


def test_the_cli_writes_every_output_and_records_the_counts(grid_files, one_torch_thread):
    spec_path = write_spec(
        grid_files["tmp"] / "cli.yaml",
        models=[grid_files["m1"]],
        benchmarks=[{"name": "A|x*", "data": str(grid_files["a"])}],
        attacks=["loss", "zlib"],
        settings={"n_bootstrap": 20, "device": "cpu", "blind": True},
    )
    out = grid_files["tmp"] / "cli-out"
    runner = CliRunner()
    for _ in range(2):
        res = runner.invoke(app, ["experiment", str(spec_path), "--out", str(out), "--no-progress"])
        assert res.exit_code == 0, res.output
    assert "model calls executed: 0" in " ".join(res.output.split())
    lines = [json.loads(x) for x in (out / "invocations.jsonl").read_text().splitlines()]
    assert lines[0]["model_calls_executed"] == 24 and lines[1]["model_calls_executed"] == 0
    assert lines[1]["cells_computed"] == 0 and lines[1]["models_loaded"] == []
    for name in ("tables.md", "tables.tex", "tables.html", "cells.parquet", "tables/A-x.csv"):
        assert (out / name).is_file(), name
    assert r"A\|x\*" in (out / "tables.md").read_text("utf-8")
    import pyarrow.parquet as pq

    cells = pq.read_table(out / "cells.parquet").to_pylist()
    blind = [r for r in cells if r["attack"] == "blind" and r["metric"] == "auc"]
    assert blind and all(r["model"] == "" for r in blind)  # model-less, one per benchmark
    assert {r["column"] for r in cells if r["attack"] != "blind"} == {"loss", "zlib", "zlib_char"}


def test_a_missing_benchmark_fails_before_any_model_loads(grid_files, monkeypatch):
    spec = _grid_spec(grid_files, "missing", benchmarks=[str(grid_files["tmp"] / "nope.jsonl")])
    loaded: list[Any] = []
    monkeypatch.setattr("imprint.study.grid.load_backends", lambda *a: loaded.append(a) or {})
    with pytest.raises(Exception, match=r"benchmark .*nope\.jsonl"):
        run_grid(spec, None, progress=False)
    assert loaded == []


def test_a_game_epochs_sweep_puts_each_snapshot_in_a_column(grid_files, one_torch_thread):
    import random

    rng = random.Random(0)
    words = ["the", "cat", "dog", "ran", "sat", "on", "mat", "house", "tree", "river", "blue"]
    pool = grid_files["tmp"] / "pool.txt"
    pool.write_text("\n".join(" ".join(rng.choice(words) for _ in range(10)) for _ in range(60)))
    config = {
        "model": grid_files["m1"], "pool": str(pool), "pool_size": 20, "words": 8,
        "batch_size": 8, "max_length": 64, "canary_repetitions": [1, 3],
        "canaries_per_repetition": 2, "canary_generator": "random", "canary_words": 6,
    }  # fmt: skip
    spec_path = write_spec(
        grid_files["tmp"] / "game.yaml",
        games=[{"name": "tiny game", "epochs": [2, 1], "config": config}],
        refs={"base": grid_files["m1"]},
        attacks=["loss", "ref"],
        settings={"n_bootstrap": 20, "device": "cpu", "blind": True},
        out=str(grid_files["tmp"] / "game-study"),
    )
    res = CliRunner().invoke(app, ["experiment", str(spec_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    out = grid_files["tmp"] / "game-study"
    assert (out / "games" / "tiny-game" / "epochs-1" / "model").is_dir()
    text = (out / "tables.md").read_text("utf-8")
    assert "## tiny game" in text
    header = next(line for line in text.splitlines() if line.startswith("| attack"))
    assert "tiny game 1 epoch AUC" in header and "tiny game 2 epochs AUC" in header
    assert "ref\\[base\\]" in text and "ref\\_ratio\\[base\\]" in text
    assert text.count("*blind (SoK bag-of-words)*") == 1  # one blind row: the snapshots share data
