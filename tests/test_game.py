"""Privacy games on the tiny random model: determinism, manifest, data, schemes, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from game_pool import WORDS, write_pool

from imprint.backends.models import load_causal_lm, resolve_model
from imprint.data import resolve_data
from imprint.errors import ConfigError, DataError
from imprint.game import GameConfig, build_game, build_games, read_manifest
from imprint.game import build as build_mod
from imprint.game import texts as texts_mod


def tiny_config(model: Path, pool: Path, **kw) -> GameConfig:
    base = dict(
        model=str(model),
        pool=str(pool),
        pool_size=20,
        words=8,
        epochs=1,
        batch_size=8,
        max_length=64,
        canary_repetitions=(1, 3),
        canaries_per_repetition=2,
        canary_generator="random",
        canary_words=6,
    )
    base.update(kw)
    return GameConfig(**base)


def read_rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "data.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pool(tmp_path_factory.mktemp("pool") / "pool.txt")


@pytest.fixture(scope="module")
def game(tmp_path_factory, tiny_model_dir, pool_file) -> Path:
    out = tmp_path_factory.mktemp("games") / "g"
    return build_game(tiny_config(tiny_model_dir, pool_file, epochs=2), out=out, progress=False)


# -- config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "adapter"}, "unknown training method"),
        ({"canary_repetitions": (1, 1)}, "duplicates"),
        ({"canary_repetitions": (0,)}, "repetition count"),
        ({"canary_repetitions": (1, 10, 100)}, "max_canary_share"),
        (
            {"canaries_per_repetition": 600, "canary_repetitions": (1, 2), "pool_size": 10_000},
            "at most",
        ),
        ({"shift": True, "pool": "pool.txt"}, "shift"),
        ({"pool_size": 3}, "pool_size"),
        ({"canary_generator": "magic"}, "canary generator"),
        ({"words": None}, "needs words"),
        ({"lr": -1.0}, "lr"),
    ],
)
def test_config_rejects_bad_input(kw, match):
    with pytest.raises(ConfigError, match=match):
        GameConfig(**kw)


def test_config_defaults_and_hash():
    full, lora = GameConfig(), GameConfig(method="lora")
    assert full.lr == 5e-5 and lora.lr == 1e-3
    assert full.canary_words == full.words
    assert GameConfig(canary_repetitions=[1, 10]).canary_repetitions == (1, 10)
    # the demo's 1,10,100 canaries fit once the pool is large enough
    GameConfig(pool_size=1000, canary_repetitions=(1, 10, 100))


# -- building -------------------------------------------------------------------------------------


def test_game_folder_manifest_and_meta(game: Path):
    manifest = read_manifest(game)
    assert manifest is not None and manifest["complete"]
    rows = read_rows(game)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    members = {r["id"] for r in rows if r["label"] == 1}
    assert set(manifest["members"]) == members
    assert set(manifest["nonmembers"]) == {r["id"] for r in rows if r["label"] == 0}
    natural = [r for r in rows if r["meta"]["kind"] == "natural"]
    assert len(natural) == 20 and sum(r["label"] for r in natural) == 10
    for r in rows:
        meta = r["meta"]
        assert set(meta) == {"kind", "repetitions", "group", "split"}
        assert meta["split"] == ("member" if r["label"] else "nonmember")
        if r["label"] == 0:
            assert meta["repetitions"] == 0
        if meta["kind"] == "canary":
            assert meta["group"] in ("canary x1", "canary x3")
            assert meta["repetitions"] in (0, int(meta["group"][len("canary x") :]))
            assert len(r["text"].split()) == 6
        else:
            assert meta["group"] == "natural" and len(r["text"].split()) <= 8
    # every group has both classes, canary non-members spread evenly over the groups
    assert manifest["groups"] == {
        "canary x1": {"member": 2, "nonmember": 2},
        "canary x3": {"member": 2, "nonmember": 2},
        "natural": {"member": 10, "nonmember": 10},
    }
    assert manifest["training_sequences"] == 10 + 2 * 1 + 2 * 3
    assert len(manifest["train_loss"]) == 2
    assert manifest["config"]["epochs"] == 2 and manifest["seed"] == 0
    assert manifest["base_model"]["fingerprint"] and manifest["pool"]["fingerprint"]
    assert manifest["versions"]["torch"]
    heldout = [json.loads(x) for x in (game / "heldout.jsonl").read_text().splitlines()]
    assert len(heldout) == 10 and manifest["heldout"] == sorted(r["id"] for r in heldout)
    assert not {r["id"] for r in heldout} & {r["id"] for r in rows}
    assert not {r["text"] for r in heldout} & {r["text"] for r in rows}
    model, tok = load_causal_lm(str(game / "model"), device="cpu")
    assert model.config.num_hidden_layers == 2


def test_same_seed_same_game_other_seed_other_split(tmp_path, tiny_model_dir, pool_file, game):
    config = tiny_config(tiny_model_dir, pool_file, epochs=2)
    again = build_game(config, out=tmp_path / "again", progress=False)
    assert (again / "data.jsonl").read_bytes() == (game / "data.jsonl").read_bytes()
    other = build_game(
        tiny_config(tiny_model_dir, pool_file, epochs=2, seed=1),
        out=tmp_path / "other",
        progress=False,
    )
    split = {r["id"]: r["label"] for r in read_rows(game) if r["meta"]["kind"] == "natural"}
    split1 = {r["id"]: r["label"] for r in read_rows(other) if r["meta"]["kind"] == "natural"}
    assert split != split1


def test_reuse_force_and_refusals(tmp_path, tiny_model_dir, pool_file, monkeypatch):
    config = tiny_config(tiny_model_dir, pool_file)
    folder = build_game(config, progress=False)  # default: cache_dir()/games/<hash>
    assert folder.parent.name == "games"
    stamp = (folder / "game.json").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("a cached game must not be rebuilt")

    monkeypatch.setattr(build_mod, "_build", no_training)
    assert build_game(config, progress=False) == folder
    assert (folder / "game.json").stat().st_mtime_ns == stamp
    with pytest.raises(AssertionError):
        build_game(config, force=True, progress=False)
    # an output folder holding a different game, or something else, is never overwritten
    with pytest.raises(ConfigError, match="different game"):
        build_game(tiny_config(tiny_model_dir, pool_file, seed=5), out=folder)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        build_game(config, out=junk)


def test_snapshots_equal_separate_builds(tmp_path, tiny_model_dir, pool_file):
    import torch
    from safetensors.torch import load_file

    config = tiny_config(tiny_model_dir, pool_file)
    games = build_games(config, (1, 2), out=tmp_path / "snap", progress=False)
    assert sorted(games) == [1, 2] and games[2].name == "epochs-2"
    single = build_game(config.with_epochs(1), out=tmp_path / "single", progress=False)
    assert read_manifest(games[1])["config_hash"] == read_manifest(single)["config_hash"]
    a = load_file(games[1] / "model" / "model.safetensors")
    b = load_file(single / "model" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k]) for k in a)
    assert len(read_manifest(games[2])["train_loss"]) == 2


# -- schemes --------------------------------------------------------------------------------------


def test_game_schemes_resolve(game: Path, tmp_path):
    source = resolve_model(f"game:{game}")
    assert Path(source.location) == (game / "model").resolve()
    loaded = resolve_data(f"game:{game}")
    assert len(loaded) == len(read_rows(game))
    groups = {s.meta["group"] for s in loaded.samples}
    assert groups == {"natural", "canary x1", "canary x3"}
    for g in groups:
        assert {s.label for s in loaded.samples if s.meta["group"] == g} == {0, 1}
    assert all(s.id.startswith(("canary-", "pool:")) for s in loaded.samples)
    held = resolve_data(f"game-heldout:{game}")
    assert len(held) == 10 and set(held.labels) == {0}
    not_a_game = tmp_path / "plain"
    not_a_game.mkdir()
    with pytest.raises(ConfigError, match="not an imprint game"):
        resolve_model(f"game:{not_a_game}")
    with pytest.raises(DataError, match="not an imprint game"):
        resolve_data(f"game:{not_a_game}")
    with pytest.raises(DataError, match="not a folder"):
        resolve_data(f"game:{tmp_path / 'missing'}")


# -- bad input before training --------------------------------------------------------------------


@pytest.fixture
def no_training(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(build_mod, "train", fail)


def test_pool_smaller_than_asked(tiny_model_dir, pool_file, no_training, tmp_path):
    with pytest.raises(DataError, match="61 were asked|pool_size=61"):
        build_game(tiny_config(tiny_model_dir, pool_file, pool_size=61), out=tmp_path / "g")
    assert not (tmp_path / "g").exists()


def test_texts_longer_than_max_length(tiny_model_dir, pool_file, no_training, tmp_path):
    with pytest.raises(DataError, match="longer than max_length=12"):
        build_game(tiny_config(tiny_model_dir, pool_file, max_length=12), out=tmp_path / "g")


def test_max_length_over_context(tiny_model_dir, pool_file, no_training, tmp_path):
    with pytest.raises(ConfigError, match="exceeds the context"):
        build_game(tiny_config(tiny_model_dir, pool_file, max_length=4096), out=tmp_path / "g")


def test_untrainable_setups(tiny_model_dir, pool_file, no_training, tmp_path):
    with pytest.raises(ConfigError, match="LoRA target module"):
        build_game(
            tiny_config(tiny_model_dir, pool_file, method="lora", lora_targets=("c_attn",)),
            out=tmp_path / "g",
        )
    with pytest.raises(ConfigError, match="only 2 transformer blocks"):
        build_game(
            tiny_config(tiny_model_dir, pool_file, method="top", top_layers=3), out=tmp_path / "g"
        )


def _pool_texts(n: int = 30) -> list[str]:
    return [" ".join(random.Random(i).choices(WORDS, k=8)) for i in range(n)]


def test_unlabelled_pool_files_accepted(tmp_path):
    """Pool labels are ignored, so JSONL, CSV and Parquet pools need no label field (as
    `imprint run --pool`); ids and texts are those of the file's rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = _pool_texts(5)
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "source": "x"}) + "\n" for t in texts))
    csv = tmp_path / "p.csv"
    csv.write_text("content\n" + "".join(f"{t}\n" for t in texts))
    parquet = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": texts}), parquet)
    partly = tmp_path / "partly.jsonl"  # a label on some rows only: still ignored
    partly.write_text(
        json.dumps({"text": texts[0], "label": 1}) + "\n" + json.dumps({"text": texts[1]})
    )
    for path in (jsonl, csv, parquet):
        samples, _, dropped = texts_mod.load_pool(str(path), words=None)
        assert [s.text for s in samples] == texts and not dropped
        assert samples[0].id == ("p:2" if path == csv else "p:1")  # a CSV's line 1 is its header
        assert {s.label for s in samples} == {0}
    assert [s.text for s in texts_mod.load_pool(str(partly), words=None)[0]] == texts[:2]
    with pytest.raises(DataError, match="no text field"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"body": "a b c"}\n')
        texts_mod.load_pool(str(bad), words=None)


def test_cli_game_build_takes_an_unlabelled_jsonl_pool(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from imprint.cli import app

    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": t}) + "\n" for t in _pool_texts()))
    args = ["game", "build", "--model", str(tiny_model_dir), "--pool", str(pool)]
    args += ["--pool-size", "20", "--words", "8", "--epochs", "1", "--repetitions", ""]
    args += ["--heldout", "0", "--out", str(tmp_path / "g"), "--device", "cpu"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(read_rows(tmp_path / "g")) == 20


def test_labelled_pool_file_labels_ignored(tiny_model_dir, tmp_path, monkeypatch):
    pool = tmp_path / "pool.jsonl"
    rows = [{"text": " ".join(random.Random(i).choices(WORDS, k=8)), "label": 1} for i in range(30)]
    pool.write_text("\n".join(json.dumps(r) for r in rows))
    folder = build_game(tiny_config(tiny_model_dir, pool), out=tmp_path / "g", progress=False)
    labels = [r["label"] for r in read_rows(folder) if r["meta"]["kind"] == "natural"]
    assert sorted(labels) == [0] * 10 + [1] * 10


# -- training methods -----------------------------------------------------------------------------


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_lora_merged_and_top_layers_only(tiny_model_dir, pool_file, tmp_path):
    import torch

    base = _weights(tiny_model_dir)
    lora = build_game(
        tiny_config(tiny_model_dir, pool_file, method="lora"),
        out=tmp_path / "lora",
        progress=False,
    )
    assert not (lora / "model" / "adapter_config.json").exists()
    merged = _weights(lora / "model")
    assert set(merged) == set(base)  # a plain model: the adapter is merged in
    changed = {k for k in base if not torch.equal(base[k], merged[k])}
    assert changed and all(
        "q_proj" in k or "k_proj" in k or "v_proj" in k or "o_proj" in k for k in changed
    )
    top = build_game(
        tiny_config(tiny_model_dir, pool_file, method="top", top_layers=1),
        out=tmp_path / "top",
        progress=False,
    )
    trained = _weights(top / "model")
    changed = {k for k in base if not torch.equal(base[k], trained[k])}
    assert changed and all(k.startswith(("model.layers.1.", "model.norm.")) for k in changed)


# -- generated texts ------------------------------------------------------------------------------


def fake_sampler(model, tokenizer, prompts, *, seed, max_new_tokens, temperature, top_k):
    """Deterministic stand-in for sampling: the prompt's first word, then random words."""
    rng = random.Random(seed)
    return [
        " ".join(
            [(p.split() or ["canary"])[0].strip(",:").lower()]
            + rng.choices(WORDS, k=max_new_tokens)
        )
        for p in prompts
    ]


def test_generated_pool_and_sampled_canaries(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(texts_mod, "_sample_batch", fake_sampler)
    # the tiny game with a generated pool and the default (sampled) canaries
    config = tiny_config(tiny_model_dir, "generate", canary_generator="sampled", canary_words=None)
    folder = build_game(config, out=tmp_path / "g", progress=False)
    rows = read_rows(folder)
    assert len({r["text"] for r in rows}) == len(rows)
    assert all(len(r["text"].split()) == 8 for r in rows)
    assert {r["text"].split()[0] for r in rows if r["meta"]["kind"] == "canary"} == {"canary"}
    assert read_rows(build_game(config, out=tmp_path / "g2", progress=False)) == rows


def test_shift_draws_nonmembers_from_other_prompts(tiny_model_dir, tmp_path, monkeypatch):
    seen_temperatures = set()

    def sampler(*args, temperature, **kwargs):
        seen_temperatures.add(temperature)
        return fake_sampler(*args, temperature=temperature, **kwargs)

    monkeypatch.setattr(texts_mod, "_sample_batch", sampler)
    config = GameConfig(
        model=str(tiny_model_dir),
        pool_size=20,
        words=8,
        epochs=1,
        max_length=64,
        canary_repetitions=(),
        shift=True,
    )
    folder = build_game(config, out=tmp_path / "g", progress=False)
    rows = read_rows(folder) + [
        json.loads(x) for x in (folder / "heldout.jsonl").read_text().splitlines()
    ]
    first = {lab: {r["text"].split()[0] for r in rows if r["label"] == lab} for lab in (0, 1)}
    # with shift, generated texts start with their prompt: the topic shows, as in a real
    # shifted benchmark
    assert first[0] <= {p.split()[0] for p in texts_mod.SHIFT_PROMPTS}
    assert first[1] <= {p.split()[0] for p in texts_mod.NATURAL_PROMPTS}
    assert seen_temperatures == {1.0, config.shift_temperature}


def test_real_sampling_and_random_canaries(tiny_model_dir):
    model, tok = load_causal_lm(str(tiny_model_dir), device="cpu")
    outs = texts_mod._sample_batch(
        model, tok, ["The", "In 2023 the"], seed=3, max_new_tokens=5, temperature=1.0, top_k=0
    )
    assert len(outs) == 2 and all(isinstance(o, str) for o in outs)
    again = texts_mod._sample_batch(
        model, tok, ["The", "In 2023 the"], seed=3, max_new_tokens=5, temperature=1.0, top_k=0
    )
    assert outs == again
    canaries = texts_mod.random_token_texts(tok, 10, words=5, seed=0)
    assert len(set(canaries)) == 10 and all(len(c.split()) == 5 for c in canaries)
    assert canaries == texts_mod.random_token_texts(tok, 10, words=5, seed=0)
