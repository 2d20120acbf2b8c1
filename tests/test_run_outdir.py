"""The run folder and what a run checks before any work: --cache inside --out, a --breakdown
field no sample has, look-alike run folders, and paths printed through rich markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from imprint.cli.flags import config_from_flags
from imprint.data import Sample
from imprint.errors import ConfigError
from imprint.outdir import is_run_folder
from imprint.run import RunConfig, check_breakdown, execute_run


def _data(tmp_path: Path) -> Path:
    # non-Latin texts and a non-Latin meta field on purpose
    rows = [
        {"text": f"Текст {i} 東京 ünïcode {i}", "label": i % 2, "язык": ["ru", "ja"][i % 3 == 0]}
        for i in range(12)
    ]
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _quick(model: Path, data: Path, out: Path, **kw: object) -> RunConfig:
    base: dict = dict(attacks=("loss",), n_bootstrap=20, progress=False, blind=False)
    return config_from_flags(model=str(model), data=str(data), out=out, **{**base, **kw})


@pytest.mark.parametrize("inside", ["cache.sqlite", "deep/er/signals.sqlite"])
def test_cache_inside_out_is_refused_before_any_file_is_made(tmp_path, inside):
    out = tmp_path / "run ü"
    # the model does not exist: only a check made before any work can name --cache
    with pytest.raises(ConfigError, match=r"--cache .* lies inside --out .*outside the run"):
        execute_run(_quick(tmp_path / "no-such-model", _data(tmp_path), out, cache=out / inside))
    assert not out.exists()


def test_default_cache_inside_out_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(out / "cache"))
    with pytest.raises(ConfigError, match=r"--cache .*signals\.sqlite lies inside --out"):
        execute_run(_quick(tmp_path / "no-such-model", _data(tmp_path), out))
    assert not out.exists()


def test_breakdown_field_no_sample_has_is_refused_naming_the_fields(tmp_path):
    with pytest.raises(ConfigError, match=r"--breakdown 'nosuch'.*\['язык'\]"):
        execute_run(
            _quick(
                tmp_path / "no-such-model", _data(tmp_path), tmp_path / "run", breakdown="nosuch"
            )
        )
    assert not (tmp_path / "run").exists()
    partial = [Sample("a", "x", 1, {"язык": "ru"}), Sample("b", "y", 0)]
    check_breakdown("язык", partial)  # some samples lack it: a "(missing)" group, allowed
    with pytest.raises(ConfigError, match="the data has no other fields"):
        check_breakdown("язык", [Sample("b", "y", 0)])


@pytest.mark.parametrize(
    "manifest",
    [
        {"config": 1, "versions": 2},
        {"config": {"model": "m"}, "versions": {"python": "3.12"}},  # no metrics/scores
    ],
)
def test_look_alike_run_folder_is_not_replaced(tmp_path, manifest):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "thesis.tex").write_text("years of work")
    assert not is_run_folder(out)
    with pytest.raises(ConfigError, match=r"not an imprint run.*--overwrite"):
        execute_run(_quick(tmp_path / "no-such-model", _data(tmp_path), out))
    assert (out / "thesis.tex").read_text() == "years of work"


def test_run_folder_with_brackets_is_printed_whole_and_replaceable(tiny_model_dir, tmp_path):
    out = tmp_path / "r[red]z [bold]ü"
    console = Console(record=True, width=500)
    config = _quick(tiny_model_dir, _data(tmp_path), out, cache=tmp_path / "c.sqlite")
    execute_run(config, console=console)
    assert f"report: {out / 'report.html'}" in console.export_text()
    assert is_run_folder(out)  # what a real run writes is recognised
    execute_run(_quick(tiny_model_dir, _data(tmp_path), out, breakdown="язык", overwrite=True))
    assert "язык" in json.loads((out / "metrics.json").read_text())["breakdown"]["field"]


def _cli_run(tmp_path: Path, model: Path) -> object:
    from typer.testing import CliRunner

    from imprint.cli import app

    args = ["run", "--model", str(model), "--data", str(_data(tmp_path)), "--attacks", "loss",
            "--bootstrap", "20", "--no-blind"]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_no_writable_runs_folder_is_one_teaching_line_not_a_traceback(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("a file where the runs folder would go")
    result = _cli_run(tmp_path, tiny_model_dir)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot make the run folder runs/")
    assert "pass --out DIR" in lines[0]


def test_a_real_latest_folder_is_left_and_the_run_says_so(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "latest").mkdir(parents=True)  # an earlier release's run folder
    result = _cli_run(tmp_path, tiny_model_dir)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "runs/latest is a real folder" in said and "does not point to this run" in said
    assert not (tmp_path / "runs" / "latest").is_symlink()
