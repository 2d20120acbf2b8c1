"""Issue 24, safe defaults: no run replaces another unasked, and a plan line before the work."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.errors import ConfigError
from imprint.outdir import default_run_dir, link_latest
from imprint.run import RunConfig, execute_run


def _data(tmp_path: Path, n: int = 12) -> Path:
    path = tmp_path / "small.jsonl"
    rows = [{"text": f"A short text number {i} about the Town {i * 7}", "label": i % 2}
            for i in range(n)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, model: Path, *extra: str) -> object:
    args = ["run", "--model", str(model), "--data", str(_data(tmp_path)), "--attacks", "loss",
            "--bootstrap", "20", "--no-blind", *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_two_runs_without_out_keep_both(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _run(tmp_path, tiny_model_dir)
    assert first.exit_code == 0, first.output
    second = _run(tmp_path, tiny_model_dir, "--attacks", "zlib")
    assert second.exit_code == 0, second.output
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    assert len(runs) == 2, runs
    for run in runs:  # both whole, each with its own attack
        assert (run / "manifest.json").is_file() and (run / "scores.parquet").is_file()
        assert run.name.split("-")[0].isdigit() and "small" in run.name
    latest = tmp_path / "runs" / "latest"
    assert latest.is_symlink() and latest.resolve() == runs[1].resolve()
    assert "zlib" in (latest / "metrics.json").read_text()
    assert f"run folder: {Path('runs') / runs[1].name}" in second.output


def test_a_failed_run_without_out_leaves_no_empty_folder(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    failed = _run(tmp_path, tiny_model_dir, "--attacks", "no_such_attack")
    assert failed.exit_code == 2, failed.output
    assert not [p for p in (tmp_path / "runs").iterdir()]  # the reserved name is released


def test_an_earlier_run_is_replaced_only_with_overwrite(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    assert _run(tmp_path, tiny_model_dir, "--out", str(out)).exit_code == 0
    before = (out / "manifest.json").read_text()
    again = _run(tmp_path, tiny_model_dir, "--out", str(out), "--attacks", "zlib")
    assert again.exit_code == 2
    assert "already holds an earlier imprint run" in again.output and "--overwrite" in again.output
    assert (out / "manifest.json").read_text() == before
    replaced = _run(tmp_path, tiny_model_dir, "--out", str(out), "--attacks", "zlib", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert "zlib" in (out / "metrics.json").read_text()


def test_default_run_dir_names_time_model_and_data_and_never_reuses_one(tmp_path):
    first = default_run_dir("hf:EleutherAI/pythia-70m", "wikimia:32", root=tmp_path, now=0)
    assert first.name.endswith("-pythia-70m-wikimia-32")
    assert first.is_dir()  # reserved at once: a run started in the same second takes -2
    second = default_run_dir("hf:EleutherAI/pythia-70m", "wikimia:32", root=tmp_path, now=0)
    assert second.name == first.name + "-2"
    assert default_run_dir("/x/my model/", "/d/set.jsonl", root=tmp_path).name.endswith(
        "-my-model-set"
    )


def test_latest_link_never_replaces_a_real_folder(tmp_path):
    (tmp_path / "latest").mkdir()  # an earlier release's runs/latest, a real run folder
    (tmp_path / "latest" / "keep").write_text("x")
    run = tmp_path / "20260101-000000-m-d"
    run.mkdir()
    assert link_latest(run) is None
    assert (tmp_path / "latest" / "keep").read_text() == "x"
    (tmp_path / "latest" / "keep").unlink()
    (tmp_path / "latest").rmdir()
    assert link_latest(run) == tmp_path / "latest"
    assert os.readlink(tmp_path / "latest") == run.name


def test_plan_line_before_the_work_and_the_actual_time_after(tiny_model_dir, tmp_path):
    result = _run(tmp_path, tiny_model_dir, "--out", str(tmp_path / "r"), "--attacks",
                  "loss,zlib,lowercase")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    plan = next(line for line in out.splitlines() if line.startswith("plan: "))
    assert "Loading weights" not in out  # transformers' own bar is off
    assert "12 texts (6 members, 6 non-members) x 3 attacks (loss, zlib, lowercase)" in plan
    assert "target logprobs 24 passes" in plan  # each text, and each lowercased text
    assert "tokens/s (measured now on" in plan
    assert out.index("plan: ") < out.index("done: ")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["plan"]["passes"] == {"target": 24}
    assert manifest["plan"]["estimate_s"] > 0 and manifest["plan"]["scoring_s"] > 0


def test_library_run_refuses_to_replace_an_earlier_run_of_another_config(tiny_model_dir, tmp_path):
    config = RunConfig(model=str(tiny_model_dir), data=str(_data(tmp_path)), out=tmp_path / "o",
                       attacks=("loss",), n_bootstrap=20, blind=False, progress=False)  # fmt: skip
    execute_run(config)
    execute_run(config)  # the same configuration again rewrites its folder (issue 37)
    with pytest.raises(ConfigError, match="already holds an earlier imprint run of another"):
        execute_run(dataclasses.replace(config, seed=1))


def test_concurrent_runs_to_one_folder_without_overwrite_keep_the_first(tmp_path):
    import threading

    from imprint.outdir import publish, staging_dir

    out, errors = tmp_path / "run", []

    def one_run(tag: int) -> None:
        staged = staging_dir(out)
        manifest = {"config": {"tag": tag}, "versions": {"python": "3"}}
        for name in ("metrics.json", "scores.parquet"):
            (staged / name).write_text(str(tag))
        (staged / "manifest.json").write_text(json.dumps(manifest))
        try:
            publish(staged, out)
        except ConfigError as err:
            errors.append(err)

    threads = [threading.Thread(target=one_run, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = json.loads((out / "manifest.json").read_text())["config"]["tag"]
    assert (out / "metrics.json").read_text() == str(winner)
    assert len(errors) == 5 and all("earlier imprint run" in str(e) for e in errors)
