"""``--overwrite`` never deletes what the command itself reads: ``imprint experiment
DIR/grid.yaml --out DIR --overwrite`` emptied DIR (grid, data and model included) and then
failed with "unknown model"; ``imprint run --data DIR/d.jsonl --out DIR --overwrite`` replaced
DIR whole, deleting its own data file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from imprint.cli import app


def _cli(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def _data(path: Path) -> Path:
    rows = [{"text": f"text number {i} about boats here", "label": i % 2} for i in range(8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _folder_with_inputs(tmp_path: Path, tiny_model_dir: Path) -> Path:
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copytree(tiny_model_dir, mine / "model")
    _data(mine / "d.jsonl")
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    return mine


def test_experiment_overwrite_refuses_a_folder_holding_its_grid_and_inputs(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    mine = _folder_with_inputs(tmp_path, tiny_model_dir)
    grid = mine / "g.yaml"
    content = {"models": [str(mine / "model")], "benchmarks": [str(mine / "d.jsonl")],
               "attacks": ["loss"], "settings": {"n_bootstrap": 20, "device": "cpu",
                                                 "blind": False}}  # fmt: skip
    grid.write_text(yaml.safe_dump(content), encoding="utf-8")
    before = sorted(p.name for p in mine.iterdir())
    code, output = _cli("experiment", grid, "--out", mine, "--overwrite", "--no-progress")
    assert code == 2, output
    assert "--overwrite would delete" in output and "g.yaml" in output, output
    assert sorted(p.name for p in mine.iterdir()) == before


def test_experiment_overwrite_refuses_a_folder_holding_a_benchmark(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    mine = _folder_with_inputs(tmp_path, tiny_model_dir)
    grid = tmp_path / "g.yaml"
    content = {"models": [str(tiny_model_dir)], "benchmarks": [str(mine / "d.jsonl")],
               "attacks": ["loss"], "settings": {"n_bootstrap": 20, "device": "cpu",
                                                 "blind": False}}  # fmt: skip
    grid.write_text(yaml.safe_dump(content), encoding="utf-8")
    code, output = _cli("experiment", grid, "--out", mine, "--overwrite", "--no-progress")
    assert code == 2, output
    assert "d.jsonl" in output and "--overwrite would delete" in output, output
    assert (mine / "d.jsonl").is_file() and (mine / "notes.txt").is_file()


def test_run_refuses_an_out_folder_holding_its_data_or_model(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    mine = _folder_with_inputs(tmp_path, tiny_model_dir)
    for model, data in [
        (tiny_model_dir, mine / "d.jsonl"),
        (mine / "model", _data(tmp_path / "x.jsonl")),
    ]:
        code, output = _cli("run", "--model", model, "--data", data, "--out", mine,
                            "--overwrite", "--attacks", "loss", "--no-blind")  # fmt: skip
        assert code == 2, output
        assert "lies inside --out" in output, output
    assert (mine / "d.jsonl").is_file() and (mine / "model" / "config.json").is_file()


def test_demo_refuses_an_unusable_out_before_loading_the_model(tmp_path: Path) -> None:
    # the demo loaded SmolLM2 and generated its pool before finding that --out was a file or
    # another command's output; a model that does not exist shows which check comes first
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    manifest = {"config": {"model": "m"}, "versions": {"python": "3"}}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name in ("metrics.json", "scores.parquet"):
        (run / name).write_text("{}", encoding="utf-8")
    for out, says in [(afile, "is a file"), (run, "is an imprint run folder"),
                      ("/sys/imprint-no/demo", "cannot create a folder")]:  # fmt: skip
        code, output = _cli("demo", "--out", out, "--model", tmp_path / "no-such-model")
        assert code == 2 and says in output, output
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json", "metrics.json",
                                                     "scores.parquet"]  # fmt: skip
