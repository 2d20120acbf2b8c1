"""Model fingerprints cover every byte; the signal cache refuses bad paths and heals bad rows;
pickled checkpoints torch will not load safely are refused with a way out."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sqlite3
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.backends import filehash
from imprint.backends.base import LOGPROBS, Backend, TokenStats
from imprint.backends.models import fingerprint_source, load_causal_lm, resolve_model
from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError
from imprint.run import RunConfig, execute_run
from imprint.signals.cache import SignalCache, make_key
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

MIB = 1 << 20


@pytest.fixture(scope="module")
def deep_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small, wide model (~4.5 MB of weights) with whole layers beyond the first/last MiB."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("deep-model")
    for f in tiny_model_dir.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, folder / f.name)
    tiny = json.loads((tiny_model_dir / "config.json").read_text(encoding="utf-8"))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tiny["vocab_size"],
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=tiny["bos_token_id"],
        eos_token_id=tiny["eos_token_id"],
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def zero_middle_mlps(weights: Path) -> list[str]:
    """Zero, in place, the MLP tensors lying wholly between the first and the last MiB (as a
    fine-tune of middle layers would change them); size and mtime are kept. Returns their names."""
    stat = weights.stat()
    raw = bytearray(weights.read_bytes())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    base, edited = 8 + n, []
    for name, info in header.items():
        if name == "__metadata__" or ".mlp." not in name:
            continue
        start, end = (base + o for o in info["data_offsets"])
        if start >= MIB and end <= len(raw) - MIB:
            raw[start:end] = bytes(end - start)
            edited.append(name)
    with weights.open("r+b") as handle:  # in place: same inode, same size
        handle.write(raw)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even the mtime is put back
    return edited


def test_middle_only_edit_changes_the_fingerprint(deep_model_dir, tmp_path):
    model = copy_model(deep_model_dir, tmp_path / "model")
    weights = model / "model.safetensors"
    before_fp = fingerprint_source(resolve_model(str(model)))
    raw = weights.read_bytes()
    head, tail, size = raw[:MIB], raw[-MIB:], len(raw)
    edited = zero_middle_mlps(weights)
    assert len(edited) >= 3  # whole MLP tensors, none in the first or last MiB
    assert weights.read_bytes()[:MIB] == head and weights.read_bytes()[-MIB:] == tail
    assert weights.stat().st_size == size
    assert fingerprint_source(resolve_model(str(model))) != before_fp


def test_run_after_a_middle_edit_gets_no_cache_hits(deep_model_dir, tmp_path):
    model = copy_model(deep_model_dir, tmp_path / "model")
    cfg = dict(
        model=str(model),
        data="wikimia:32",
        n_per_label=4,
        n_bootstrap=20,
        attacks=("loss",),
        progress=False,
        blind=False,
        device="cpu",
    )
    shared = tmp_path / "shared.sqlite"
    first = execute_run(config_from_flags(out=tmp_path / "a", cache=shared, **cfg))
    zero_middle_mlps(model / "model.safetensors")
    second = execute_run(config_from_flags(out=tmp_path / "b", cache=shared, **cfg))
    fresh = execute_run(
        config_from_flags(out=tmp_path / "c", cache=tmp_path / "fresh.sqlite", **cfg)
    )
    assert first.manifest["requests"]["target"]["logprobs"]["executed"] == 8
    assert second.manifest["requests"]["target"]["logprobs"]["cache_hits"] == 0
    assert second.manifest["requests"]["target"]["logprobs"]["executed"] == 8
    assert not np.array_equal(first.scores["loss"], second.scores["loss"])
    np.testing.assert_array_equal(second.scores["loss"], fresh.scores["loss"])


def test_game_model_fingerprint_covers_its_whole_weights(deep_model_dir, tmp_path):
    import imprint.game  # noqa: F401  (registers the game: scheme)

    game = tmp_path / "gämé 游戏"  # non-Latin folder names are fine
    copy_model(deep_model_dir, game / "model")
    (game / "data.jsonl").write_text('{"id": "a", "text": "x", "label": 1}\n', encoding="utf-8")
    (game / "game.json").write_text(json.dumps({"complete": True}), encoding="utf-8")
    spec = f"game:{game}"
    before = fingerprint_source(resolve_model(spec))
    zero_middle_mlps(game / "model" / "model.safetensors")
    assert fingerprint_source(resolve_model(spec)) != before


def test_file_digest_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    path = tmp_path / "wéights-权重.bin"
    path.write_bytes(os.urandom(3 * MIB))
    memo = tmp_path / "memo"
    calls = []
    real = filehash.hashlib.file_digest
    monkeypatch.setattr(
        filehash.hashlib, "file_digest", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    first = filehash.file_digest(path, memo_dir=memo)
    assert first == filehash.hashlib.sha256(path.read_bytes()).hexdigest()
    assert filehash.file_digest(path, memo_dir=memo) == first
    assert len(calls) == 1  # the second lookup read the memo, not the file
    stat = path.stat()
    with path.open("r+b") as handle:
        handle.seek(3 * MIB // 2)
        handle.write(b"\x01")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    changed = filehash.file_digest(path, memo_dir=memo)
    assert changed != first and len(calls) == 2
    assert changed == filehash.hashlib.sha256(path.read_bytes()).hexdigest()


def test_damaged_digest_memo_is_ignored(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(b"abc" * 1000)
    memo = tmp_path / "memo"
    digest = filehash.file_digest(path, memo_dir=memo)
    for entry in memo.iterdir():
        entry.write_text('{"path": 1, "stat": "x", "digest": "forged"', encoding="utf-8")
    assert filehash.file_digest(path, memo_dir=memo) == digest


# -- the signal cache: bad paths refused before any work, damaged rows recomputed --------------


def test_cache_path_that_is_a_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"is a folder.*signals\.sqlite"):
        SignalCache(tmp_path)


def test_cache_path_that_is_not_sqlite_is_refused_and_left_untouched(tmp_path):
    data = tmp_path / "wikimia.jsonl"
    content = '{"text": "Ранее в Сеуле", "label": 1}\n'.encode()
    data.write_bytes(content)
    with pytest.raises(ConfigError, match=r"wikimia\.jsonl.*not an SQLite database.*--cache"):
        SignalCache(data)
    assert data.read_bytes() == content
    assert not list(tmp_path.glob("*-wal"))


def _database_with(path: Path, create: str) -> Path:
    """An SQLite file at ``path`` holding the one table ``create`` makes (closed after)."""
    with sqlite3.connect(path) as conn:
        conn.execute(create)
    conn.close()
    return path


def test_cache_path_of_another_sqlite_database_is_refused(tmp_path):
    path = _database_with(tmp_path / "app.db", "CREATE TABLE users (id INTEGER, name TEXT)")
    with pytest.raises(ConfigError, match=r"app\.db.*something else.*users"):
        SignalCache(path)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"users"}  # imprint added nothing


def test_cache_table_with_other_columns_is_refused(tmp_path):
    path = _database_with(tmp_path / "old.sqlite", "CREATE TABLE token_stats (k TEXT, v BLOB)")
    with pytest.raises(ConfigError, match=r"token_stats.*columns.*Delete the file"):
        SignalCache(path)


def test_run_with_a_bad_cache_fails_before_loading_the_model(tiny_model_dir, tmp_path, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the cache was checked")

    monkeypatch.setattr("imprint.run.load_backends", no_model)
    config = RunConfig(
        model=str(tiny_model_dir),
        data="wikimia:32",
        n_per_label=5,
        attacks=("loss",),
        progress=False,
        blind=False,
        out=tmp_path / "run",
        cache=tmp_path,
    )
    with pytest.raises(ConfigError, match="is a folder"):
        execute_run(config)


class FakeBackend(Backend):
    name = "target"
    capabilities = frozenset({LOGPROBS})
    fingerprint = "fake-v1"
    max_length = 64

    def __init__(self) -> None:
        self.scored: list[str] = []

    def count_tokens(self, texts):
        return [len(t) + 1 for t in texts]

    def score(self, requests):
        self.scored += [r.text for r in requests]
        return [TokenStats(*(np.full(len(r.text), len(r.text), np.int32),) * 6) for r in requests]


def corrupt_rows(path: Path, blob: bytes) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE request_results SET data = ? WHERE kind = 'logprobs'", (blob,))
    conn.close()


@pytest.mark.parametrize(
    "blob",
    [
        b"PK\x03\x04 torn write",
        b"",
        b"\x93NUMPY junk",
        b"IMTS\x01",  # header cut short
        b"IMTS\x01\x05\x00\x00\x00" + b"\x00" * 27,  # 5 tokens announced, 27 bytes given
    ],
)
def test_damaged_cache_entries_are_recomputed_with_a_warning(tmp_path, blob):
    path = tmp_path / "signals.sqlite"
    texts = ["Hurricane Ana", "台风 安娜 第二个", "x" * 5000]
    run_plan(texts, [Need()], {"target": FakeBackend()}, SignalCache(path))
    corrupt_rows(path, blob)
    again = FakeBackend()
    with pytest.warns(UserWarning, match=r"signals\.sqlite.*3 damaged entries.*computed again"):
        signals, report = run_plan(texts, [Need()], {"target": again}, SignalCache(path))
    assert sorted(again.scored) == sorted(texts) and report.per_model["target"].cache_hits == 0
    assert [len(s) for s in signals.get()] == [len(t) for t in texts]
    third = FakeBackend()  # the rewritten rows are whole again
    run_plan(texts, [Need()], {"target": third}, SignalCache(path))
    assert third.scored == []


def test_damaged_cached_answer_is_asked_again(tmp_path):
    cache = SignalCache(tmp_path / "signals.sqlite")
    cache.put_response("req", ["réponse", "回答"])
    assert cache.get_response("req") == ["réponse", "回答"]
    cache._conn.execute("UPDATE request_results SET data = '{\"torn' WHERE kind = 'response'")
    cache._conn.commit()
    with pytest.warns(UserWarning, match="1 damaged answers"):
        assert cache.get_response("req") is None
    assert cache.get_response("req") is None  # the row is gone: no second warning needed


def test_key_for_a_non_latin_text_round_trips(tmp_path):
    cache = SignalCache(tmp_path / "c.sqlite")
    key = make_key("fp", "Ранее 以前 \U0001f600", prefix="前缀")
    stats = TokenStats(*(np.arange(4, dtype=np.int32),) * 6)
    cache.put_stats([(key, stats)])
    np.testing.assert_array_equal(cache.stats_many([key])[key].logp, stats.logp)


# -- pickled checkpoints ------------------------------------------------------------------------


class _RunsCode:
    """Unpickling this would create a file: proof that imprint did not unpickle it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def bin_only_model(src: Path, dst: Path, payload) -> Path:
    from safetensors.torch import load_file

    shutil.copytree(src, dst)
    state = load_file(dst / "model.safetensors")
    (dst / "model.safetensors").unlink()
    payload(state, dst / "pytorch_model.bin")
    return dst


def test_plain_pickled_weights_still_load(tiny_model_dir, tmp_path):
    folder = bin_only_model(tiny_model_dir, tmp_path / "m", lambda s, p: torch.save(s, p))
    model, _ = load_causal_lm(str(folder), device="cpu")
    assert model is not None


def test_pickled_model_with_code_is_refused_without_running_it(tiny_model_dir, tmp_path):
    marker = tmp_path / "code-ran"

    def evil(state, path):
        torch.save({**state, "extra": _RunsCode(marker)}, path)

    folder = bin_only_model(tiny_model_dir, tmp_path / "m", evil)
    with pytest.raises(ConfigError, match=r"pytorch_model\.bin.*pickled.*safetensors") as info:
        load_causal_lm(str(folder), device="cpu")
    assert str(folder) in str(info.value) and "Unsupported global" in str(info.value)
    assert not marker.exists()


def test_bin_that_is_not_a_pickle_is_refused(tiny_model_dir, tmp_path):
    folder = bin_only_model(
        tiny_model_dir, tmp_path / "m", lambda s, p: p.write_bytes(b"<html>not found</html>")
    )
    with pytest.raises(ConfigError, match=r"pytorch_model\.bin.*damaged or not a checkpoint"):
        load_causal_lm(str(folder), device="cpu")
