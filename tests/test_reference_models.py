"""Reference models of a game and training manifests, end to end on the tiny random models:
build, reuse, membership, and lira/rmia through the run (request layer and SQLite cache)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import quiet_run
from typer.testing import CliRunner

from imprint.cli import app
from imprint.errors import ConfigError
from imprint.game import GameConfig, build_game
from imprint.game import reference as reference_mod
from imprint.game.reference import build_references, reference_halves
from imprint.run import RunConfig, execute_run, resolve
from imprint.training_manifest import IN, OUT, UNKNOWN, load_reference_set

# words from several scripts: the byte-level tokenizer must train and score them all
WORDS = ["the", "cat", "sat", "mat", "river", "blue", "日本", "語", "مرحبا", "Ελλάδα", "🙂", "día"]


def write_pool(path: Path, n: int = 40, words: int = 8) -> Path:
    rng = random.Random(3)
    lines = [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def game(tmp_path_factory, tiny_model_dir) -> Path:
    pool = write_pool(tmp_path_factory.mktemp("pool") / "pool.txt")
    config = GameConfig(
        model=str(tiny_model_dir),
        pool=str(pool),
        pool_size=20,
        words=8,
        epochs=1,
        lr=1e-3,
        max_length=96,
        canary_repetitions=(1, 3),
        canaries_per_repetition=2,
        canary_generator="random",
        canary_words=6,
        heldout=6,
    )
    folder = build_game(config, out=tmp_path_factory.mktemp("games") / "g", progress=False)
    build_references(folder, 3, progress=False)
    return folder


def rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "data.jsonl").read_text().splitlines()]


def test_halves_are_paired_seeded_and_independent_of_k():
    ids = [f"t{i}" for i in range(11)]
    four = reference_halves(ids, 4, seed=5)
    assert reference_halves(ids, 2, seed=5) == four[:2]  # more models never change old ones
    assert four[0] | four[1] == set(ids) and not four[0] & four[1]  # pairs are complements
    assert len(four[0]) == 5 and len(four[1]) == 6
    assert four[0] != four[2] and reference_halves(ids, 2, seed=6)[0] != four[0]
    counts = {i: sum(i in h for h in four) for i in ids}
    assert set(counts.values()) == {2}  # even K: every text IN for exactly K/2 models


def test_game_reference_models_and_manifest(game: Path):
    refset = load_reference_set(str(game))
    assert refset.names == ("reference-0", "reference-1", "reference-2")
    ids = [r["id"] for r in rows(game)]
    matrix = refset.matrix(ids)
    assert set(np.unique(matrix)) <= {IN, OUT}
    assert (matrix[0] + matrix[1] == 1).all()  # models 0 and 1 are complementary halves
    assert matrix[0].sum() == len(ids) // 2
    heldout = [json.loads(x)["text"] for x in (game / "heldout.jsonl").read_text().splitlines()]
    assert refset.population == tuple(heldout) and len(heldout) == 6
    for i, model in enumerate(refset.models):
        info = json.loads((Path(model.spec).parent / "reference.json").read_text())
        assert info["index"] == i and set(info["members"]) == set(model.members)
        # a canary of group x3 is trained 3 times, as in the target
        by_id = {r["id"]: r for r in rows(game)}
        expected = sum(3 if by_id[m]["meta"]["group"] == "canary x3" else 1 for m in model.members)
        assert info["training_sequences"] == expected
    # weights differ from the base model and between models
    from safetensors.numpy import load_file

    w = [load_file(str(Path(m.spec) / "model.safetensors")) for m in refset.models]
    base = load_file(
        str(
            Path(json.loads((game / "game.json").read_text())["config"]["model"])
            / "model.safetensors"
        )
    )
    key = next(k for k in base if k.endswith("q_proj.weight"))
    assert not np.allclose(w[0][key], base[key]) and not np.allclose(w[0][key], w[1][key])


def test_rebuild_reuses_and_more_models_train_only_the_new_ones(game: Path, monkeypatch):
    trained: list[int] = []
    real = reference_mod.train

    def counting(model, sequences, config, **kw):
        trained.append(config.seed)
        return real(model, sequences, config, **kw)

    monkeypatch.setattr(reference_mod, "train", counting)
    stamp = (game / "references" / "ref-0" / "reference.json").stat().st_mtime_ns
    build_references(game, 3, progress=False)
    assert trained == []  # nothing retrained
    assert (game / "references" / "ref-0" / "reference.json").stat().st_mtime_ns == stamp
    build_references(game, 4, progress=False)
    assert len(trained) == 1  # only model 3
    assert load_reference_set(str(game)).names[-1] == "reference-3"
    build_references(game, 3, progress=False)  # back to 3: the manifest lists 3 again
    assert len(load_reference_set(f"game:{game}").models) == 3
    with pytest.raises(ConfigError, match="K must be"):
        build_references(game, 0)


def test_run_scores_lira_and_rmia_through_the_cache(game: Path, tmp_path, one_torch_thread):
    cache = tmp_path / "signals.sqlite"
    config = RunConfig(
        model=f"game:{game}",
        data=f"game:{game}",
        out=tmp_path / "run",
        attacks=("loss", "lira", "rmia"),
        references=str(game),
        params={"rmia": {"population": "references"}},
        cache=cache,
        n_bootstrap=20,
        blind=False,
        progress=False,
    )
    result = execute_run(config)
    assert {"lira", "lira_offline", "rmia", "rmia_offline"} <= set(result.scores)
    for column in ("lira", "lira_offline", "rmia", "rmia_offline"):
        assert np.isfinite(result.scores[column]).all(), column
    assert set(np.unique(result.scores["rmia"])) <= {k / 6 for k in range(7)}  # 6 z texts
    work = result.manifest["requests"]
    assert set(work) >= {"target", "reference-0", "reference-1", "reference-2"}
    # the population texts went through the request layer: candidates + 6 held-out texts; the
    # tuning of rmia's offline a asks for the candidates' passes once more (from the cache)
    n = len(result.samples)
    assert work["reference-0"]["logprobs"]["requests"] == 2 * n + 6
    assert work["reference-0"]["logprobs"]["executed"] == n + 6
    assert result.manifest["attacks"]["rmia"]["a_tuning"]["target"] == "reference-0"
    again = execute_run(RunConfig(**{**config.__dict__, "out": tmp_path / "run2"}))
    assert all(w["logprobs"]["executed"] == 0 for w in again.manifest["requests"].values())
    for column in ("lira", "rmia_offline"):
        assert np.array_equal(again.scores[column], result.scores[column])


def test_user_manifest_yaml_with_long_texts(tmp_path, tiny_model_dir, tiny_ref_dir):
    """A user's own reference models: a YAML manifest over the run's ids, a text far longer
    than the tiny model's 128-token context (sliding windows), unknown memberships."""
    rngs = [random.Random(i) for i in range(8)]
    texts = [" ".join(rng.choice(WORDS) for _ in range(20)) for rng in rngs]
    texts[0] = " ".join(WORDS * 30)  # ~400 tokens
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": t, "label": i % 2}, ensure_ascii=False) + "\n"
            for i, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    (tmp_path / "models").mkdir()
    manifest = tmp_path / "models" / "refs.yaml"
    manifest.write_text(
        # a file's rows get the ids <file stem>:<line> (data:1 ...), as the run numbers them
        # (this test once said data:0, an id no sample has, silently ignored until issue 19)
        "models:\n"
        f"  - {{name: a, spec: {tiny_model_dir}, members: [data:1, data:2, data:3],"
        " nonmembers: [data:4, data:5]}\n"
        f"  - {{name: b, spec: {tiny_ref_dir}, members: [data:4, data:5, data:6]}}\n"
        f"  - {{name: c, spec: {tiny_ref_dir}, members: [data:7, data:8, data:1]}}\n",
        encoding="utf-8",
    )
    refset = load_reference_set(str(manifest))
    assert refset.matrix(["data:6", "data:1"]).tolist() == [[UNKNOWN, IN], [IN, OUT], [OUT, IN]]
    result = quiet_run(
        tiny_model_dir,
        data,
        tmp_path / "run",
        attacks=("lira", "rmia"),
        references=str(manifest),
        cache=tmp_path / "c.sqlite",
        n_bootstrap=10,
    )
    assert np.isfinite(result.scores["lira"]).all() and np.isfinite(result.scores["rmia"]).all()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("models: []", "non-empty list"),
        ("models:\n  - {spec: x}", "'members'"),
        ("models:\n  - {spec: x, members: [a], nonmembers: [a]}", "both member and non-member"),
        ("models:\n  - {name: target, spec: x, members: [a]}", "not 'target'"),
        ("models:\n  - {spec: x, members: a}", "list of sample ids"),
        ("[1, 2]", "expected a mapping"),
        ("models: [", "not valid YAML"),
    ],
)
def test_manifest_errors_teach(tmp_path, content, match):
    path = tmp_path / "m.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=match):
        load_reference_set(str(path))


def test_manifest_plain_form_relative_specs_and_missing(tmp_path, tiny_model_dir):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m1").mkdir()
    path = tmp_path / "sub" / "m.json"
    path.write_text(json.dumps({"m1": ["a", "b"], "smollm2-135m": ["c"]}))
    refset = load_reference_set(str(path))
    assert refset.models[0].spec == str((tmp_path / "sub" / "m1").resolve())
    assert refset.models[1].spec == "smollm2-135m"  # not a path here: a spec as given
    assert refset.matrix(["a", "c"]).tolist() == [[IN, OUT], [OUT, IN]]
    with pytest.raises(ConfigError, match="no such file"):
        load_reference_set(str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match="--reference-models K"):
        load_reference_set(str(tmp_path))
    with pytest.raises(ConfigError, match="share one namespace"):  # resolve() reads the file
        resolve(
            RunConfig(
                model=str(tiny_model_dir),
                data="x",
                out=tmp_path / "o",
                refs=(("reference-0", str(tiny_model_dir)),),
                references=str(_manifest(tmp_path, tiny_model_dir)),
            )
        )


def _manifest(tmp_path: Path, model: Path) -> Path:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"models": [{"spec": str(model), "members": ["a"]}]}))
    return path


def test_cli_game_build_with_reference_models(game: Path):
    config = json.loads((game / "game.json").read_text())["config"]
    args = ["game", "build", "--model", config["model"], "--pool", config["pool"]]
    args += ["--pool-size", "20", "--words", "8", "--epochs", "1", "--lr", "0.001"]
    args += ["--max-length", "96", "--repetitions", "1,3", "--canaries", "2"]
    args += ["--canary-generator", "random", "--canary-words", "6", "--heldout", "6"]
    args += ["--out", str(game), "--reference-models", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--references" in result.output
    assert load_reference_set(str(game)).names == ("reference-0", "reference-1")
