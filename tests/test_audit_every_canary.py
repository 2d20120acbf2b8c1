"""Issue 37, the audit at the recipe's size and the commands around it (tiny random model):

* an audit scores every canary (the run inside held 10 non-member canaries out as ReCaLL shots,
  so ``--n 40`` failed with "10 canaries were not scored");
* every option is checked before any work, and a failed audit leaves nothing behind;
* canary and audit folders are marked, so ``--overwrite`` of another command never deletes them;
* canary files and masks, games and caches that cannot be used are refused in one line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_game import write_pool
from typer.testing import CliRunner

from imprint.cli import app

runner = CliRunner()


def _cli(*args: object, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env)
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture(scope="module")
def canaries(tmp_path_factory, tiny_model_dir) -> Path:
    """40 canaries (the recipe's size), 24 of them not inserted: enough natural non-members for
    the run's default 10 held-out shots (2 x 10), which is what made the audit fail."""
    out = tmp_path_factory.mktemp("canaries") / "c"
    code, output = _cli("canaries", "make", "--n", 40, "--out", out, "--model", tiny_model_dir,
                        "--words", 6, "--seed", 2)  # fmt: skip
    assert code == 0, output
    assert len(json.loads((out / "mask.json").read_text())["included"]) == 16
    return out


@pytest.fixture(scope="module")
def game(tmp_path_factory, tiny_model_dir) -> Path:
    folder = tmp_path_factory.mktemp("game")
    pool = write_pool(folder / "pool.txt")
    code, output = _cli("game", "build", "--model", tiny_model_dir, "--pool", pool,
                        "--pool-size", 20, "--words", 8, "--epochs", 1, "--max-length", 64,
                        "--repetitions", "1", "--canaries", 16, "--canary-generator", "random",
                        "--canary-words", 6, "--heldout", 0, "--device", "cpu",
                        "--canary-inclusion", "bernoulli", "--out", folder / "g")  # fmt: skip
    assert code == 0, output
    return folder / "g"


def test_audit_scores_every_canary_at_the_recipes_size(
    canaries, tiny_model_dir, tmp_path, one_torch_thread
):
    out = tmp_path / "audit"
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", canaries,
                        "--dp-epsilon", 8, "--delta", 1e-5, "--attack", "loss,zlib",
                        "--out", out, "--device", "cpu")  # fmt: skip
    assert code == 0, output
    record = json.loads((out / "audit.json").read_text())
    assert record["canaries"] == 40 and record["canary_members"] == 16
    manifest = json.loads((out / "run" / "manifest.json").read_text())
    assert manifest["data"]["evaluated"] == 40
    assert manifest["shots"]["held_out"] == 0  # no shot-drawing attack runs in an audit


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--attack", "recall"], "--attack recall"),
        (["--attack", "loss,qmia"], "--attack qmia"),
        (["--attack", "nope"], "nope"),
        (["--attack", "loss,ref"], "imprint audit takes no --ref"),
        (["--guesses", "10,10,10"], "--guesses"),
        (["--guesses", "100"], "--guesses"),
        (["--guesses", "0"], "--guesses"),
        (["--dp-epsilon", "-3", "--delta", "1e-5"], "--dp-epsilon"),
        (["--dp-epsilon", "nan", "--delta", "1e-5"], "--dp-epsilon"),
        (["--dp-epsilon", "inf", "--delta", "1e-5"], "--dp-epsilon"),
        (["--dp-epsilon", "8", "--delta", "nan"], "--delta"),
        (["--dp-epsilon", "8", "--delta", "1.5"], "--delta"),
        (["--delta", "-1e-5"], "--delta"),
        (["--out", "/proc/imprint-no/audit"], "cannot create a folder in /proc"),
    ],
)
def test_audit_refuses_bad_options_before_any_work(canaries, tiny_model_dir, tmp_path, extra, says):
    out = tmp_path / "a"
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", canaries,
                        "--out", out, "--device", "cpu", *extra)  # fmt: skip
    assert code == 2, output
    assert says in output and "Traceback" not in output, output
    assert "--shot-holdout" not in output  # audit takes no such option
    assert not out.exists()  # refused before any work: no folder, no run
    assert "error:" in output and output.count("error:") == 1


def test_a_failed_audit_leaves_nothing_and_its_rerun_runs(
    canaries, tiny_model_dir, tmp_path, monkeypatch, one_torch_thread
):
    import imprint.audit.audit as audit_module

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(audit_module, "plot_bound", broken)
    out = tmp_path / "a"
    args = ("audit", "--model", tiny_model_dir, "--canaries", canaries, "--attack", "loss",
            "--out", out, "--device", "cpu")  # fmt: skip
    with pytest.raises(OSError, match="disk full"):
        runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".a.")]  # no staging left
    monkeypatch.undo()
    code, output = _cli(*args)
    assert code == 0, output
    assert (out / "audit.json").is_file()


def test_overwrite_of_a_folder_that_only_looks_like_an_audit_says_so(
    canaries, tiny_model_dir, tmp_path
):
    mine = tmp_path / "mine"
    (mine / "run").mkdir(parents=True)
    (mine / "run" / "mydata.txt").write_text("keep", encoding="utf-8")
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", canaries,
                        "--out", mine)  # fmt: skip
    assert code == 2, output
    assert "holds an audit" not in output and "imprint did not write" in output, output
    assert (mine / "run" / "mydata.txt").read_text(encoding="utf-8") == "keep"


def _run_data(path: Path) -> Path:
    rows = [{"text": f"text number {i} about boats here", "label": i % 2} for i in range(8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_run_and_experiment_overwrite_never_delete_canaries_or_audits(
    canaries, tiny_model_dir, tmp_path, one_torch_thread
):
    import yaml

    mine = tmp_path / "canaries"
    shutil.copytree(canaries, mine)
    legacy = tmp_path / "legacy"  # made before folders were marked: known by its mask
    shutil.copytree(canaries, legacy)
    (legacy / ".imprint-output.json").unlink(missing_ok=True)
    audit = tmp_path / "audit"
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", mine, "--attack",
                        "loss", "--out", audit, "--device", "cpu")  # fmt: skip
    assert code == 0, output
    data = _run_data(tmp_path / "d.jsonl")
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"models": [str(tiny_model_dir)], "benchmarks": [str(data)],
                                    "attacks": ["loss"], "settings": {"n_bootstrap": 20,
                                    "device": "cpu", "blind": False}}))  # fmt: skip
    for folder, kind in ((mine, "canaries"), (legacy, "canaries"), (audit, "audit")):
        before = sorted(p.name for p in folder.rglob("*"))
        code, output = _cli("run", "--model", tiny_model_dir, "--data", data, "--attacks",
                            "loss", "--out", folder, "--overwrite", "--no-blind")  # fmt: skip
        assert code == 2 and f"imprint {kind} folder" in output, output
        code, output = _cli("experiment", grid, "--out", folder, "--overwrite", "--no-progress")
        assert code == 2 and f"imprint {kind} folder" in output, output
        assert sorted(p.name for p in folder.rglob("*")) == before
    # and an audit never replaces a canaries folder, even with --overwrite
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", mine, "--out", mine,
                        "--overwrite")  # fmt: skip
    assert code == 2 and "imprint canaries folder" in output, output
    assert (mine / "mask.json").is_file()


def _copy_canaries(canaries: Path, to: Path) -> Path:
    shutil.copytree(canaries, to)
    return to


def test_a_mask_or_canary_file_that_cannot_be_read_is_refused_in_one_line(
    canaries, tiny_model_dir, tmp_path
):
    bad = _copy_canaries(canaries, tmp_path / "nullmask")
    mask = json.loads((bad / "mask.json").read_text())
    for included in (None, "canary-00001", 7):
        mask["included"] = included
        (bad / "mask.json").write_text(json.dumps(mask))
        code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", bad,
                            "--out", tmp_path / "a")  # fmt: skip
        assert code == 2 and "Traceback" not in output, output
        assert f"{bad / 'mask.json'}" in output and "'included'" in output, output
    latin = _copy_canaries(canaries, tmp_path / "latin")
    lines = (latin / "canaries.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps({"id": "canary-00002", "text": "caf\u00e9 au lait"}, ensure_ascii=False)
    (latin / "canaries.jsonl").write_bytes("\n".join(lines).encode("latin-1") + b"\n")
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", latin,
                        "--out", tmp_path / "b")  # fmt: skip
    assert code == 2 and "codec" not in output, output
    assert f"{latin / 'canaries.jsonl'}: line 3" in output and "UTF-8" in output, output


def test_canaries_make_refuses_bad_words_and_unwritable_out(tiny_model_dir, tmp_path):
    for words in ("-3", "0"):
        code, output = _cli("canaries", "make", "--n", 10, "--out", tmp_path / "c",
                            "--model", tiny_model_dir, "--words", words)  # fmt: skip
        assert code == 2 and "--words" in output and "negative" not in output, output
    code, output = _cli("canaries", "make", "--n", 10, "--out", "/sys/imprint-no/c",
                        "--model", tiny_model_dir, "--words", 4)  # fmt: skip
    assert code == 2 and "cannot create a folder in /sys" in output, output
    assert not (tmp_path / "c").exists()


def test_audit_game_checks_its_data_and_manifest(game, tmp_path):
    edited = tmp_path / "edited"
    shutil.copytree(game, edited)
    rows = [json.loads(x) for x in (edited / "data.jsonl").read_text().splitlines()]
    canary = next(r for r in rows if r["meta"]["kind"] == "canary")
    canary["label"] = 1 - canary["label"]  # a label edited after the game was built
    (edited / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, output = _cli("audit", "--game", edited, "--out", tmp_path / "a")
    assert code == 2 and "data_fingerprint" in output and "data.jsonl" in output, output
    assert not (tmp_path / "a").exists()
    cut = tmp_path / "cut"
    shutil.copytree(game, cut)
    text = (cut / "game.json").read_text()
    (cut / "game.json").write_text(text[: len(text) // 2])
    code, output = _cli("audit", "--game", cut, "--out", tmp_path / "b")
    assert code == 2 and "no game.json" not in output, output
    assert "game.json" in output and "not valid JSON" in output, output


def test_game_build_refuses_before_training(tiny_model_dir, tmp_path):
    pool = write_pool(tmp_path / "pool.txt")
    common = ("game", "build", "--model", tiny_model_dir, "--pool", pool, "--pool-size", 20,
              "--words", 8, "--epochs", 1, "--max-length", 64, "--heldout", 0,
              "--device", "cpu")  # fmt: skip
    code, output = _cli(*common, "--method", "lora", "--repetitions", "1", "--canaries", 8,
                        "--canary-inclusion", "bernoulli", "--dp-epsilon", "inf",
                        "--out", tmp_path / "g")  # fmt: skip
    assert code == 2 and "--dp-epsilon" in output, output
    code, output = _cli(*common, "--repetitions", "", "--unit", "document", "--doc-sequences", 0,
                        "--out", tmp_path / "g")  # fmt: skip
    assert code == 2 and "--doc-sequences" in output, output
    code, output = _cli(*common, "--repetitions", "", "--out", "/proc/imprint-no/g")
    assert code == 2 and "cannot create a folder in /proc" in output, output
    assert "loading base model" not in output  # refused before training, not after
    code, output = _cli(*common, "--repetitions", "", env={"IMPRINT_CACHE_DIR": "/proc"})
    assert code == 2 and "IMPRINT_CACHE_DIR" in output and "Traceback" not in output, output
    assert "loading base model" not in output
    assert not (tmp_path / "g").exists()


def test_a_cache_on_a_read_only_place_is_refused_in_one_line(canaries, tiny_model_dir, tmp_path):
    data = _run_data(tmp_path / "d.jsonl")
    code, output = _cli("run", "--model", tiny_model_dir, "--data", data, "--attacks", "loss",
                        "--out", tmp_path / "r", "--no-blind", "--cache",
                        "/proc/imprint.sqlite")  # fmt: skip
    assert code == 2 and "--cache" in output and "OperationalError" not in output, output
    code, output = _cli("run", "--model", tiny_model_dir, "--data", data, "--attacks", "loss",
                        "--out", tmp_path / "r", "--no-blind",
                        env={"IMPRINT_CACHE_DIR": "/proc"})  # fmt: skip
    assert code == 2 and "IMPRINT_CACHE_DIR" in output, output
    code, output = _cli("audit", "--model", tiny_model_dir, "--canaries", canaries, "--out",
                        tmp_path / "a", env={"IMPRINT_CACHE_DIR": "/proc"})  # fmt: skip
    assert code == 2 and "IMPRINT_CACHE_DIR" in output, output
    assert not (tmp_path / "a").exists() and not (tmp_path / "r").exists()


def test_every_attack_that_draws_held_out_texts_declares_it():
    """The audit refuses attacks by ``takes_held_out``: an attack drawing the run's held-out
    non-members (imprint.attacks.shots.nonmember_shots) must say so, or it would slip through."""
    import inspect

    from imprint.attacks.base import available_attacks

    for name, cls in available_attacks().items():
        draws = "nonmember_shots(" in inspect.getsource(inspect.getmodule(cls))
        assert cls.takes_held_out == draws, name
