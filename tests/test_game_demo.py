"""The demo pipeline and the game CLI on the tiny random model (seconds, not minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from game_pool import WORDS, write_pool
from typer.testing import CliRunner

from imprint.cli.game import demo, game_app
from imprint.game import read_manifest
from imprint.game.demo import run_demo

#: the 18 words this file's expected runs were written with (the shared pool's first 16, sun, moon)
DEMO_WORDS = [w for w in WORDS if w not in ("quick", "slow", "star", "day", "night")]


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pool(tmp_path_factory.mktemp("pool") / "pool.txt", n=40, vocabulary=DEMO_WORDS)


def test_run_demo_on_tiny_model(tiny_model_dir, pool_file, tmp_path):
    result = run_demo(
        model=str(tiny_model_dir),
        pool=str(pool_file),
        pool_size=24,
        words=8,
        canary_repetitions=(1, 3),
        canaries_per_repetition=2,
        canary_generator="random",
        epochs=(1, 2),
        attacks=("loss", "zlib"),
        n_bootstrap=50,
        out=tmp_path / "demo",
        blind=False,
        progress=False,  # the blind baseline (500 trees x 5) has its own tests
    )
    assert sorted(result.figures) == ["e1", "e2"]
    fig = result.figures["e2"]
    assert fig["canary_reps"] == [1, 3]
    assert set(fig["attacks"]) == {"loss", "zlib", "zlib_char"}
    assert fig["blind"] is None and not result.checks[0]["passed"]
    for check in result.checks:
        assert isinstance(check["passed"], bool) and check["value"]
    assert [p.name for p in result.plots] == ["auc_vs_epochs.png", "auc_vs_repetitions.png"]
    assert all(p.stat().st_size > 0 for p in result.plots)
    written = json.loads((tmp_path / "demo" / "demo.json").read_text())
    assert written["epochs"] == [1, 2] and len(written["checks"]) == 5
    assert "e1, e2" in written["checks"][2]["claim"]  # repetitions judged in every game
    assert written["checks"][3]["claim"].startswith("LOSS AUC rises with epochs")
    assert written["checks"][4]["claim"].startswith(
        "LOSS scores x3 canaries above x1 canaries (e2)"
    )
    assert "Measured claims" in (tmp_path / "demo" / "demo.md").read_text()
    # dataset inference through the report's code: the same three-state verdict
    verdict = fig["dataset_inference"]["verdict"]
    assert verdict["state"] in ("trained on", "not detected", "inconclusive")
    assert (
        f"dataset inference, members vs non-members (each text a document): {verdict['state']}"
        in (tmp_path / "demo" / "demo.md").read_text()
    )
    assert (result.runs["e1"] / "metrics.json").exists()
    # games live in the cache and are reused by a second demo
    assert all(read_manifest(g) for g in result.games.values())


def test_cli_build_and_errors(tiny_model_dir, pool_file, tmp_path):
    runner = CliRunner()
    out = tmp_path / "game"
    args = [
        "build",
        "--model",
        str(tiny_model_dir),
        "--pool",
        str(pool_file),
        "--pool-size",
        "20",
        "--words",
        "8",
        "--epochs",
        "1",
        "--repetitions",
        "1,2",
        "--canaries",
        "2",
        "--canary-generator",
        "random",
        "--max-length",
        "64",
        "--out",
        str(out),
    ]
    result = runner.invoke(game_app, args)
    assert result.exit_code == 0, result.output
    assert read_manifest(out)["config"]["canary_repetitions"] == [1, 2]
    shown = runner.invoke(game_app, ["show", str(out)])
    assert shown.exit_code == 0 and "canary x2: 2 members, 2 non-members" in shown.output
    assert runner.invoke(game_app, ["show", str(tmp_path)]).exit_code == 2
    bad = runner.invoke(game_app, [*args[:-2], "--out", str(tmp_path / "g2"), "--pool-size", "500"])
    assert bad.exit_code == 2 and "pool_size=500" in " ".join(bad.output.split())
    bad = runner.invoke(game_app, [*args, "--repetitions", "1,x"])
    assert bad.exit_code != 0


def test_demo_command_is_mountable():
    app = typer.Typer()
    app.command("demo")(demo)
    app.add_typer(game_app, name="game")
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0 and "--epochs" in result.output and "--shift" in result.output


def test_demo_trend_checks_allow_saturation_but_not_a_fall():
    from imprint.game.demo import _rises

    assert _rises([0.5, 0.8, 1.0])
    assert not _rises([1.0, 1.0, 1.0])  # no trend shown
    assert _rises([1.0, 1.0, 1.0], allow_saturated=True)  # saturated: nothing left to rise
    assert not _rises([0.9, 0.7, 1.0], allow_saturated=True)  # a fall is a fall
    assert not _rises([0.5, None, 1.0])
