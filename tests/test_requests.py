"""The request layer: typed keys, a persistent store, one execution per distinct request."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from imprint.backends.base import SAMPLING, Backend
from imprint.errors import ConfigError
from imprint.requests import (
    EmbedRequest,
    GreedyRequest,
    NextWordRequest,
    RequestRunner,
    RequestStore,
    SampleRequest,
)
from imprint.requests.client import ModelRequests, prompt_seed


class _Echo(Backend):
    """A text backend answering ``prompt|seed|j``; ``fail`` makes any call a test failure and
    ``die_after`` raises KeyboardInterrupt (a kill) once that many prompts were answered."""

    capabilities = frozenset({SAMPLING})
    seeds_per_prompt = True  # one call per batch, the request's own seed

    def __init__(self, *, fail: bool = False, die_after: int | None = None) -> None:
        self.calls: list[int] = []
        self.prompts: list[str] = []
        self.fail, self.die_after = fail, die_after

    @property
    def fingerprint(self) -> str:
        return "echo"

    def sample(self, prompts, settings):  # type: ignore[no-untyped-def]
        if self.fail:
            pytest.fail("executed")
        if self.die_after is not None and len(self.prompts) >= self.die_after:
            raise KeyboardInterrupt  # a kill between batches
        self.calls.append(len(prompts))
        self.prompts += list(prompts)
        return [[f"{p}|{settings.seed}|{j}" for j in range(settings.n)] for p in prompts]


class _Vectors:
    """An embedder backend: one fixed vector per string (``fail``: never to be called)."""

    fingerprint = "vectors-v1"  # one model: a second instance is answered from the store

    def __init__(self, vec: np.ndarray, *, fail: bool = False) -> None:
        self.vec, self.fail = vec, fail

    def embed(self, strings):  # type: ignore[no-untyped-def]
        if self.fail:
            pytest.fail("embedded")
        return np.stack([self.vec for _ in strings])


def test_key_covers_every_field_and_the_kind() -> None:
    a = SampleRequest(prompt="Kraków 東京", n=3, max_tokens=5, seed=1)
    assert a.key() == SampleRequest(prompt="Kraków 東京", n=3, max_tokens=5, seed=1).key()
    assert a.key() != SampleRequest(prompt="Kraków 東京", n=3, max_tokens=5, seed=2).key()
    assert a.key() != SampleRequest(prompt="Kraków 東京", n=3, max_tokens=5, top_k=50).key()
    greedy = GreedyRequest(prompt="x")
    assert greedy.kind == "greedy" and greedy.key() != SampleRequest("x", 1, 1, 0.0).key()
    # a lone surrogate (from a broken file) still gets a key instead of a crash
    assert SampleRequest(prompt="bad \ud800", n=1, max_tokens=1).key()


def test_runner_dedupes_stores_and_counts(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "c.sqlite")
    runner = RequestRunner(store)
    reqs = [SampleRequest(prompt=p, n=2, max_tokens=4) for p in ["a", "bb", "a", "ccc"]]
    echo = _Echo()
    out = runner.run("target", "fp", reqs, echo, batch_size=2)
    assert out[0] == out[2] == ["a|0|0", "a|0|1"] and out[3] == ["ccc|0|0", "ccc|0|1"]
    assert echo.calls == [2, 1]  # 3 distinct requests, longest first, batches of 2
    assert echo.prompts == ["ccc", "bb", "a"]
    counts = runner.counts.of("target", "sample")
    assert (counts.requests, counts.cache_hits, counts.executed) == (3, 0, 3)
    store.close()
    # a second runner on the same file executes nothing and returns equal results
    again = RequestRunner(RequestStore(tmp_path / "c.sqlite"))
    assert again.run("target", "fp", reqs, _Echo(fail=True)) == out
    assert again.counts.to_dict()["target"]["sample"]["cache_hits"] == 3
    # another backend fingerprint is another model: nothing is shared
    assert again.run("target", "fp2", reqs[:1], _Echo()) == [["a|0|0", "a|0|1"]]
    assert again.counts.of("target", "sample").executed == 1


def test_a_failed_batch_keeps_the_batches_before_it(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "c.sqlite")
    reqs = [SampleRequest(prompt=str(i) * (10 - i), n=1, max_tokens=1) for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        RequestRunner(store).run("t", "fp", reqs, _Echo(die_after=4), batch_size=2)
    assert store.count("sample") == 4
    runner = RequestRunner(store)
    runner.run("t", "fp", reqs, _Echo(), batch_size=2)
    assert runner.counts.of("t", "sample").executed == 2


def test_embeddings_round_trip_as_float32(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "c.sqlite")
    vec = np.array([0.6, -0.8, 1e-8], dtype=np.float32)
    RequestRunner(store).run("e", "fp", [EmbedRequest("w")], _Vectors(vec))
    got = RequestRunner(store).run("e", "fp", [EmbedRequest("w")], _Vectors(vec, fail=True))
    np.testing.assert_array_equal(got[0], vec)
    assert got[0].dtype == np.float32


def test_next_word_results_keep_unicode_words(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "c.sqlite")
    req = NextWordRequest("東京 は", None, 10, 50, 1.0, 8, "sample", 0)
    dists = [{"大きい": 7.0, "Kraków": 3.0}]
    store.put_many("fp", [(req, dists)])
    assert RequestRunner(store).run("t", "fp", [req], None) == [dists]  # stored: no model


def test_store_refuses_a_non_sqlite_file_and_a_folder(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match="junk.sqlite"):
        RequestStore(junk)
    with pytest.raises(ConfigError, match="SQLite"):
        RequestStore(tmp_path)


def test_store_refuses_another_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    RequestStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE request_schema SET version = 99")
    with pytest.raises(ConfigError, match="schema version 99"):
        RequestStore(path)


class _Sampler(Backend):
    """A text backend that records its calls and answers deterministically from the seed."""

    capabilities = frozenset({SAMPLING})
    fingerprint = "sampler"  # type: ignore[assignment]

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int | None]] = []

    def sample(self, prompts, settings):  # type: ignore[no-untyped-def]
        self.calls.append((list(prompts), settings.seed))
        return [[f"{p}:{settings.seed}:{j}" for j in range(settings.n)] for p in prompts]


def test_sampling_is_seeded_per_prompt_not_per_batch(tmp_path: Path) -> None:
    sampler = _Sampler()
    client = ModelRequests({"target": sampler}, RequestRunner(RequestStore(None)))
    both = client.sample("target", ["p", "q"], 2, 3, seed=5)
    alone = ModelRequests({"target": _Sampler()}, RequestRunner(RequestStore(None))).sample(
        "target", ["q"], 2, 3, seed=5
    )
    assert both[1] == alone[0]  # q's draws do not depend on p sharing its batch
    assert sorted(s for _, s in sampler.calls) == sorted([prompt_seed(5, "p"), prompt_seed(5, "q")])
    # greedy requests draw nothing: one call for every prompt
    greedy = _Sampler()
    ModelRequests({"target": greedy}, RequestRunner(RequestStore(None))).sample(
        "target", ["a", "b", "c"], 1, 1, temperature=0.0
    )
    assert len(greedy.calls) == 1


def test_paraphrases_are_stored_and_the_model_built_only_when_needed(tmp_path: Path) -> None:
    from imprint.requests.client import stored_generator

    built: list[int] = []

    def make():  # type: ignore[no-untyped-def]
        built.append(1)
        return lambda prompt: prompt.upper() + " ✓"

    def generator():  # type: ignore[no-untyped-def]
        store = RequestStore(tmp_path / "c.sqlite")
        return stored_generator(make, spec="no-such-model", store=store, max_tokens=8)

    first = generator()
    assert first("привет, 世界") == "ПРИВЕТ, 世界 ✓" and built == [1]
    again = generator()
    assert again("привет, 世界") == "ПРИВЕТ, 世界 ✓" and built == [1]  # nothing built or asked
    assert again.counts.of("paraphraser", "paraphrase").cache_hits == 1  # type: ignore[attr-defined]
