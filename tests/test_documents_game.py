"""Document games on a tiny random model: membership per document, every member sequence
trained on, and the run's document unit on the game."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import imprint.game.texts as texts_mod
from imprint.cli import app
from imprint.errors import ConfigError
from imprint.game import build_game
from imprint.game.build import read_manifest
from imprint.game.config import GameConfig
from imprint.game.documents import split_sequences

runner = CliRunner()


def fake_sampler(model, tokenizer, prompts, *, seed, max_new_tokens, temperature, top_k):
    """Seeded word salad in place of the tiny random model's samples (its random tokens hold
    few spaces, so no text reaches the asked word count); the game's own logic all runs."""
    import random

    rng = random.Random(seed)
    words = ["river", "stone", "north", "light", "Kraków", "北京", "हिन्दी", "garden", "storm"]
    return [" ".join(rng.choices(words, k=max_new_tokens)) for _ in prompts]


def _config(model: Path, **kw) -> GameConfig:
    base = dict(
        model=str(model),
        pool_size=12,
        words=6,
        doc_sequences=3,
        heldout=4,
        epochs=1,
        max_length=64,
        canary_repetitions=(),
        pool_temperature=1.0,
    )
    base.update(kw)
    return GameConfig(**base)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def doc_game(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docgame") / "g"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(texts_mod, "_sample_batch", fake_sampler)
        return build_game(_config(tiny_model_dir), out=out, progress=False)


def test_membership_is_per_document_and_members_are_trained(doc_game: Path) -> None:
    rows = _rows(doc_game / "data.jsonl")
    docs: dict[str, list[dict]] = {}
    for r in rows:
        docs.setdefault(r["meta"]["doc"], []).append(r)
    assert len(docs) == 12 and all(len(v) == 3 for v in docs.values())
    for seqs in docs.values():
        assert len({r["label"] for r in seqs}) == 1  # one label per document
        assert sorted(r["meta"]["seq"] for r in seqs) == [0, 1, 2]
        assert all(len(r["text"].split()) == 6 for r in seqs)
    member_docs = [d for d, seqs in docs.items() if seqs[0]["label"] == 1]
    assert len(member_docs) == 6
    manifest = read_manifest(doc_game)
    assert manifest is not None
    assert manifest["training_sequences"] == 6 * 3  # every sequence of every member document
    assert manifest["config"]["doc_sequences"] == 3
    assert set(manifest["members"]) == {r["id"] for r in rows if r["label"] == 1}
    held = _rows(doc_game / "heldout.jsonl")
    assert len({r["meta"]["doc"] for r in held}) == 4 and len(held) == 12
    assert not {r["meta"]["doc"] for r in held} & set(docs)


def test_single_text_games_keep_their_hash_and_bad_document_games_are_refused(
    tiny_model_dir: Path,
) -> None:
    assert "doc_sequences" not in GameConfig().to_dict()  # old games' hashes are unchanged
    with pytest.raises(ConfigError, match="--repetitions ''"):
        _config(tiny_model_dir, canary_repetitions=(1,))
    with pytest.raises(ConfigError, match="doc_sequences"):
        _config(tiny_model_dir, doc_sequences=-1)
    assert split_sequences("a b c d", 2, 2) == ["a b", "c d"]


def test_run_on_the_document_game(doc_game: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "--model", f"game:{doc_game}", "--data", f"game:{doc_game}", "--out", str(out)]
    args += ["--attacks", "loss,zlib", "--unit", "document", "--doc-field", "doc"]
    args += ["--bootstrap", "50", "--no-blind", "--cache", str(tmp_path / "c.sqlite")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    docs = metrics["documents"]
    assert (docs["n_documents"], docs["n_members"], docs["n_sequences"]) == (12, 6, 36)
    assert "loss: shi" in docs["rows"]


def test_cli_game_build_unit_document_refuses_canaries(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    args = ["game", "build", "--model", str(tiny_model_dir), "--unit", "document"]
    args += ["--out", str(tmp_path / "g")]
    result = runner.invoke(app, args)  # the default --repetitions 1,10 has canaries
    assert result.exit_code == 2 and "--repetitions ''" in result.output
    result = runner.invoke(app, ["game", "build", "--unit", "book"])
    assert result.exit_code != 0


def test_document_game_from_a_pool_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    pool = tmp_path / "pool.txt"
    words = ["Kraków", "北京", "हिन्दी", "river", "stone", "north"]
    lines = [" ".join(f"{words[(d + j) % 6]}{d}" for j in range(20)) for d in range(14)]
    lines += ["too short to be a document"] * 2  # 6 words < 3 x 6: left out, counted
    pool.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = _config(tiny_model_dir, pool=str(pool), pool_size=8, heldout=4)
    folder = build_game(config, out=tmp_path / "g", progress=False)
    manifest = read_manifest(folder)
    assert manifest is not None
    # the second short line is a duplicate (counted as such), the first is too short
    assert manifest["pool"]["dropped"] == {"duplicate text": 1, "fewer than 3 x 6 words": 1}
    rows = _rows(folder / "data.jsonl")
    assert len(rows) == 8 * 3 and manifest["training_sequences"] == 4 * 3
    by_doc: dict[str, list[str]] = {}
    for r in sorted(rows, key=lambda r: r["meta"]["seq"]):
        by_doc.setdefault(r["meta"]["doc"], []).append(r["text"])
    # each document is the first 18 words of one pool line, cut into 3 x 6 words, in order
    firsts = {" ".join(line.split()[:18]) for line in lines}
    assert all(" ".join(seqs) in firsts for seqs in by_doc.values())
