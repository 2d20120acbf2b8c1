"""The README's quickstart run twice does what the README says: the second time the same
commands reuse their outputs (rewritten, no model pass executed, and said so), while a different
configuration aimed at the same folder is refused with an error that says where the rerun costs
nothing (a new folder: the store answers its passes)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_docs_recipes import ROOT, _Tiny, bash_commands
from typer.testing import CliRunner


def _quickstart(tiny: _Tiny) -> list[list[str]]:
    """The README's Quickstart block, placeholders made tiny (the tiny model, a few WikiMIA
    texts) and --n-per-label 4; nothing else of the command lines changed."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    page = ROOT / "README.md"
    commands = [c for c in bash_commands(page) if c.startswith("imprint ") and _in_block(c, block)]
    assert [c.split()[1] for c in commands] == ["blind", "run"], commands
    out = []
    for command in commands:
        command = command.replace("wikimia:32", str(tiny.paths["texts"]))
        command = command.replace("smollm2-135m", str(tiny.paths["model"]))
        command = re.sub(r"--n-per-label \d+", "--n-per-label 4", command)
        out.append(shlex.split(command)[1:])
    return out


def _in_block(command: str, block: str) -> bool:
    words = [w for line in block.replace("\\\n", " ").splitlines() for w in
             shlex.split(line, comments=True)]  # fmt: skip
    return all(word in words for word in shlex.split(command))


def test_the_readme_quickstart_twice_reuses_its_outputs_and_computes_nothing(
    tiny_model_dir: Path, tiny_ref_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imprint.cli import app

    monkeypatch.chdir(tmp_path)
    tiny = _Tiny(tmp_path, tiny_model_dir, tiny_ref_dir)
    commands = _quickstart(tiny)
    for command in commands:  # first time: everything computed
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output[-2000:]
    first = json.loads((tmp_path / "runs/first/manifest.json").read_text())
    assert first["requests"]["target"]["logprobs"]["executed"] > 0
    blind_first = (tmp_path / "blind-wikimia32.json").read_text()
    for command in commands:  # the same commands again: as the README says
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output[-2000:]
        assert "same configuration" in result.output, result.output[-2000:]
    second = json.loads((tmp_path / "runs/first/manifest.json").read_text())
    assert second["requests"]["target"]["logprobs"]["executed"] == 0
    assert second["requests"]["target"]["logprobs"]["cache_hits"] > 0
    assert json.loads((tmp_path / "blind-wikimia32.json").read_text()) == json.loads(blind_first)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "The same command again reuses runs/first/" in readme


def test_a_different_configuration_into_an_earlier_run_is_refused_naming_the_free_rerun(
    tiny_model_dir: Path, tiny_ref_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imprint.cli import app

    monkeypatch.chdir(tmp_path)
    tiny = _Tiny(tmp_path, tiny_model_dir, tiny_ref_dir)
    blind, run = _quickstart(tiny)
    assert CliRunner().invoke(app, run).exit_code == 0
    before = (tmp_path / "runs/first/manifest.json").read_text()
    other = [*run[: run.index("--n-per-label") + 1], "5", *run[run.index("--n-per-label") + 2 :]]
    result = CliRunner().invoke(app, other)
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert "already holds an earlier imprint run of another configuration" in message, message
    assert "--n-per-label" in message, message  # the flag that differs is named
    assert "answered by the store" in message, message
    assert (tmp_path / "runs/first/manifest.json").read_text() == before
    assert CliRunner().invoke(app, blind).exit_code == 0
    other_blind = [*blind, "--seed", "1"]
    result = CliRunner().invoke(app, other_blind)
    assert result.exit_code != 0
    assert "another configuration" in " ".join(result.output.split()), result.output


def test_concurrent_publishers_of_one_configuration_replace_and_of_another_are_refused(
    tmp_path: Path,
) -> None:
    from imprint.errors import ConfigError
    from imprint.outdir import publish, staging_dir

    out = tmp_path / "run"

    def staged(tag: int) -> Path:
        folder = staging_dir(out)
        manifest = {"config": {"seed": tag, "progress": tag}, "versions": {"python": "3"}}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        for name in ("metrics.json", "scores.parquet"):
            (folder / name).write_text(str(tag))
        return folder

    publish(staged(0), out, config={"seed": 0, "progress": 0})
    publish(staged(0), out, config={"seed": 0, "progress": 1})  # progress is not compared
    with pytest.raises(ConfigError, match="another configuration .seed: 0 there, 1 here"):
        publish(staged(1), out, config={"seed": 1})
    assert (out / "metrics.json").read_text() == "0"
