"""``imprint canaries make`` and ``imprint audit`` end to end on the tiny random model: files,
the one-run bound through the normal run, mismatched masks refused, games audited."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_game import write_pool
from typer.testing import CliRunner

from imprint.audit.audit import bounds_for, guess_grid
from imprint.audit.bounds import one_run_epsilon
from imprint.cli import app
from imprint.errors import ConfigError
from imprint.game.texts import inclusion_draw

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def canary_dir(tmp_path_factory, tiny_model_dir) -> Path:
    out = tmp_path_factory.mktemp("canaries") / "c"
    res = invoke("canaries", "make", "--n", 24, "--out", out, "--model", tiny_model_dir,
                 "--words", 6, "--seed", 5)  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_canaries_make_writes_canaries_insert_file_and_mask(canary_dir):
    rows = read_jsonl(canary_dir / "canaries.jsonl")
    assert len(rows) == 24 and len({r["text"] for r in rows}) == 24
    assert all(len(r["text"].split()) == 6 for r in rows)
    mask = json.loads((canary_dir / "mask.json").read_text())
    drawn = inclusion_draw([r["text"] for r in rows], seed=5)
    assert mask["included"] == [r["id"] for r, b in zip(rows, drawn, strict=True) if b]
    inserted = [r["text"] for r in read_jsonl(canary_dir / "insert.jsonl")]
    assert inserted == [r["text"] for r, b in zip(rows, drawn, strict=True) if b]
    assert 0 < len(inserted) < 24


def test_audit_on_own_model_end_to_end(canary_dir, tiny_model_dir, tmp_path, one_torch_thread):
    out = tmp_path / "audit"
    res = invoke("audit", "--model", tiny_model_dir, "--canaries", canary_dir, "--attack",
                 "loss,zlib", "--out", out, "--dp-epsilon", 4, "--delta", 1e-5,
                 "--device", "cpu")  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads((out / "audit.json").read_text())
    assert record["canaries"] == 24 and record["attack"] in ("loss", "zlib", "zlib_char")
    assert record["dp_claimed"] == {"epsilon": 4.0, "delta": 1e-5}
    assert record["selection"]["guess_grid"] == [10, 20]
    # the reported bound is the one-run bound of its own counts at the corrected level
    beta_each = record["selection"]["beta_each"]
    assert beta_each == pytest.approx(0.05 / (len(record["selection"]["attacks"]) * 2))
    expected = one_run_epsilon(24, record["guesses"], record["correct_guesses"],
                               beta=beta_each, delta=1e-5)  # fmt: skip
    assert record["epsilon_lower_bound"] == pytest.approx(expected)
    assert (out / "audit_bound.png").stat().st_size > 0
    assert (out / "run" / "scores.parquet").exists()  # scored by the normal run
    assert "epsilon >=" in res.output
    again = invoke("audit", "--model", tiny_model_dir, "--canaries", canary_dir, "--out", out)
    assert again.exit_code == 2 and "--overwrite" in again.output


def test_audit_refuses_a_mask_of_other_canaries(canary_dir, tiny_model_dir, tmp_path):
    other = tmp_path / "other"
    res = invoke("canaries", "make", "--n", 8, "--out", other, "--model", tiny_model_dir,
                 "--words", 6, "--seed", 9)  # fmt: skip
    assert res.exit_code == 0, res.output
    res = invoke("audit", "--model", tiny_model_dir, "--canaries", canary_dir, "--mask",
                 other / "mask.json", "--out", tmp_path / "a")  # fmt: skip
    assert res.exit_code == 2
    assert "does not match" in res.output and "pass the mask written" in res.output
    assert not (tmp_path / "a").exists()  # refused before any model work
    # a canary file edited after its mask was made is refused too
    edited = tmp_path / "edited"
    edited.mkdir()
    rows = read_jsonl(canary_dir / "canaries.jsonl")
    rows[0]["text"] += " extra"
    (edited / "canaries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (edited / "mask.json").write_text((canary_dir / "mask.json").read_text())
    res = invoke("audit", "--model", tiny_model_dir, "--canaries", edited, "--out", tmp_path / "b")
    assert res.exit_code == 2 and "does not match" in res.output


def test_audit_on_games(tmp_path, tiny_model_dir, one_torch_thread):
    pool = write_pool(tmp_path / "pool.txt")
    common = ["game", "build", "--model", tiny_model_dir, "--pool", pool, "--pool-size", 20,
              "--words", 8, "--epochs", 1, "--max-length", 64, "--repetitions", "1",
              "--canaries", 16, "--canary-generator", "random", "--canary-words", 6,
              "--heldout", 0, "--device", "cpu"]  # fmt: skip
    res = invoke(*common, "--canary-inclusion", "bernoulli", "--out", tmp_path / "g")
    assert res.exit_code == 0, res.output
    res = invoke("audit", "--game", tmp_path / "g", "--attack", "loss", "--out", tmp_path / "a",
                 "--device", "cpu")  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads((tmp_path / "a" / "audit.json").read_text())
    rows = read_jsonl(tmp_path / "g" / "data.jsonl")
    members = sum(r["label"] for r in rows if r["meta"]["kind"] == "canary")
    assert record["canaries"] == 16 and record["canary_members"] == members
    assert record["dp_claimed"] is None
    # a game whose canaries were split into fixed halves is refused, saying how to build one
    res = invoke(*common, "--canaries", 4, "--out", tmp_path / "s")
    assert res.exit_code == 0, res.output
    res = invoke("audit", "--game", tmp_path / "s", "--out", tmp_path / "b")
    assert res.exit_code == 2 and "--canary-inclusion bernoulli" in res.output


def test_selection_is_paid_for_by_bonferroni():
    """A perfect attack and a useless one on 200 canaries: the best bound is the perfect one's,
    computed at beta / (2 attacks x 3 numbers of guesses), never at beta itself."""
    included = np.arange(200) % 2 == 0
    scores = {"perfect": included.astype(float), "noise": np.random.default_rng(0).random(200)}
    result = bounds_for(scores, included, beta=0.05, grid=(10, 20, 50))
    assert result.attack == "perfect" and result.beta_each == pytest.approx(0.05 / 6)
    assert result.best.guesses == 50 and result.best.correct == 50
    assert result.best.epsilon == pytest.approx(one_run_epsilon(200, 50, 50, beta=0.05 / 6))
    assert result.best.epsilon < one_run_epsilon(200, 50, 50, beta=0.05)
    assert guess_grid(256) == (10, 20, 50, 100, 200) and guess_grid(5) == (5,)
    claimed = bounds_for(scores, included, claimed={"epsilon": 0.5, "delta": 0.0})
    assert claimed.notes and "exceeds the claimed epsilon" in claimed.notes[0]


def test_a_claim_is_compared_only_with_a_bound_at_its_own_delta(
    canary_dir, tiny_model_dir, tmp_path
):
    """A pure-epsilon bound may exceed an (epsilon, delta > 0) claim without contradicting it."""
    included = np.arange(200) % 2 == 0
    scores = {"perfect": included.astype(float)}
    with pytest.raises(ConfigError, match="delta"):
        bounds_for(scores, included, delta=0.0, claimed={"epsilon": 0.5, "delta": 1e-5})
    with pytest.raises(ConfigError, match="delta"):
        bounds_for(scores, included, claimed={"epsilon": 0.5})
    at_claim = bounds_for(scores, included, delta=1e-5, claimed={"epsilon": 0.5, "delta": 1e-5})
    assert at_claim.best.delta == 1e-5 and at_claim.notes
    # the command line asks for the claim's delta, before any model work
    res = invoke("audit", "--model", tiny_model_dir, "--canaries", canary_dir,
                 "--dp-epsilon", 4, "--out", tmp_path / "a")  # fmt: skip
    assert res.exit_code == 2 and "--delta" in res.output and "--dp-epsilon" in res.output
    assert not (tmp_path / "a").exists()


def test_dp_game_from_the_command_line_is_audited_against_its_claim(
    tmp_path, tiny_model_dir, one_torch_thread
):
    pool = write_pool(tmp_path / "pool.txt")
    res = invoke("game", "build", "--model", tiny_model_dir, "--pool", pool, "--pool-size", 20,
                 "--words", 8, "--epochs", 1, "--max-length", 64, "--repetitions", "1",
                 "--canaries", 12, "--canary-generator", "random", "--canary-words", 6,
                 "--heldout", 0, "--method", "lora", "--canary-inclusion", "bernoulli",
                 "--dp-epsilon", 2, "--dp-delta", 1e-4, "--max-grad-norm", 0.5,
                 "--device", "cpu", "--out", tmp_path / "g")  # fmt: skip
    assert res.exit_code == 0, res.output
    dp = json.loads((tmp_path / "g" / "game.json").read_text())["dp"]
    assert dp["max_grad_norm"] == 0.5 and dp["delta"] == 1e-4 and 0 < dp["epsilon"] <= 2.0
    res = invoke("audit", "--game", tmp_path / "g", "--attack", "loss", "--out", tmp_path / "a",
                 "--device", "cpu")  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert record["dp_claimed"] == {"epsilon": dp["epsilon"], "delta": 1e-4, "target": 2.0}
    assert record["delta"] == 1e-4  # the bound is for the claimed delta
    assert record["epsilon_lower_bound"] <= dp["epsilon"]
    shown = " ".join(invoke("game", "show", tmp_path / "g").output.split())
    assert f"DP-SGD: epsilon {dp['epsilon']:.3f} (target 2" in shown
    for part in ("delta 0.0001", f"noise multiplier {dp['noise_multiplier']:.3f}",
                 f"sample rate {dp['sample_rate']:.3g}", f"{dp['steps']} steps",
                 "clipping norm 0.5"):  # fmt: skip
        assert part in shown, shown
    # a game's claim and its delta come from game.json only
    for extra in (["--dp-epsilon", 1], ["--delta", 1e-6]):
        res = invoke("audit", "--game", tmp_path / "g", "--out", tmp_path / "b", *extra)
        assert res.exit_code == 2 and "game.json" in res.output, res.output
    res = invoke("game", "build", "--model", tiny_model_dir, "--pool", pool, "--dp-epsilon", 2,
                 "--out", tmp_path / "full")  # fmt: skip
    assert res.exit_code == 2 and "--method lora" in res.output


def test_default_canaries_keep_their_mask_secret(tiny_model_dir, tmp_path):
    """Without --seed the inclusion coins come from a fresh secret seed kept in mask.json only:
    two default runs differ, and nothing beside the canaries recomputes the mask."""
    made = []
    for name in ("a", "b"):
        res = invoke("canaries", "make", "--n", 24, "--out", tmp_path / name, "--model",
                     tiny_model_dir, "--words", 6)  # fmt: skip
        assert res.exit_code == 0, res.output
        made.append(json.loads((tmp_path / name / "mask.json").read_text()))
    assert made[0]["seed"] != made[1]["seed"] and made[0]["seed"] not in (0, 5)
    public = tmp_path / "a"
    texts = [r["text"] for r in read_jsonl(public / "canaries.jsonl")]
    rows = read_jsonl(public / "canaries.jsonl")
    mask = [r["id"] in set(made[0]["included"]) for r in rows]
    design = json.loads((public / "design.json").read_text())
    assert design["text_seed"] == made[0]["text_seed"] != made[0]["seed"]
    for name in ("canaries.jsonl", "insert.jsonl", "design.json"):  # no coin seed beside them
        assert str(made[0]["seed"]) not in (public / name).read_text()
    for guess in (0, design["text_seed"]):  # neither the old default nor the public seed
        assert inclusion_draw(texts, seed=guess).tolist() != mask
    texts_b = [r["text"] for r in read_jsonl(tmp_path / "b" / "canaries.jsonl")]
    assert texts_b != texts  # the text seed is fresh too


def test_an_explicit_seed_reproduces_texts_and_mask(tiny_model_dir, tmp_path, canary_dir):
    res = invoke("canaries", "make", "--n", 24, "--out", tmp_path / "again", "--model",
                 tiny_model_dir, "--words", 6, "--seed", 5)  # fmt: skip
    assert res.exit_code == 0, res.output
    for name in ("canaries.jsonl", "insert.jsonl", "mask.json", "design.json"):
        assert (tmp_path / "again" / name).read_text() == (canary_dir / name).read_text()
    design = json.loads((canary_dir / "design.json").read_text())
    assert design["text_seed"] != 5  # derived one way from --seed, so it does not give the coins
    help_text = invoke("canaries", "make", "--help").output
    assert "reproducible" in help_text and "secret" in help_text


def test_repeated_canaries_are_audited_as_a_group(tmp_path, tiny_model_dir, one_torch_thread):
    """A non-DP one-run game may repeat each canary r times; its bound is then for r copies."""
    pool = write_pool(tmp_path / "pool.txt")
    res = invoke("game", "build", "--model", tiny_model_dir, "--pool", pool, "--pool-size", 20,
                 "--words", 8, "--epochs", 1, "--max-length", 64, "--repetitions", "3",
                 "--canaries", 12, "--max-canary-share", 0.9, "--canary-generator", "random",
                 "--canary-words", 6,
                 "--heldout", 0, "--device", "cpu", "--canary-inclusion", "bernoulli",
                 "--out", tmp_path / "g")  # fmt: skip
    assert res.exit_code == 0, res.output
    res = invoke("audit", "--game", tmp_path / "g", "--attack", "loss", "--out", tmp_path / "a",
                 "--device", "cpu")  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert record["canary_repetitions"] == 3
    assert any("group-privacy bound for 3 copies" in n for n in record["notes"])
    assert "3 copies" in " ".join(res.output.split())
    once = bounds_for({"x": np.arange(20.0)}, np.arange(20) % 2 == 0)
    assert once.to_dict()["canary_repetitions"] == 1 and not once.notes
