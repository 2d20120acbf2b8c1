"""One engine: every request kind through one runner, one store and one executor interface.

A rerun makes no model call of any kind; the same calls on two Ray workers run every kind on the
workers and give the local results; a kind defined here (two files' worth: the kind and the
client function asking for it) runs through runner, store, local and Ray executors; an old
(schema 1) cache is migrated once and serves a rerun without a model call; every kind's request
key is what it was before the engine (old caches stay valid); damage is handled one way.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from imprint.backends.base import LOGPROBS, Backend, ScoreRequest, TokenStats
from imprint.backends.registry import LoadContext, choose_backend
from imprint.executors import (
    BackendFactory,
    CallFactory,
    ExecutorConfig,
    LocalExecutor,
    make_executor,
)
from imprint.requests import (
    ChoiceRequest,
    EmbedRequest,
    GradNormRequest,
    GreedyRequest,
    NeighbourRequest,
    NextWordRequest,
    ParaphraseRequest,
    Request,
    RequestRunner,
    RequestStore,
    SampleRequest,
    TokenCountsRequest,
)
from imprint.requests.client import ModelRequests, local_transformers
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.next_word import NextWordConfig
from imprint.requests.store import SCHEMA_VERSION
from imprint.signals.cache import SignalCache, encode_stats, make_key
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

TEXTS = ["Hurricane Ana was the second cyclone.", "東京都は日本の首都である。", "x", "Москва"]
PROMPTS = ["The quick brown", "東京都は", "Question: A, B, C or D? Answer:"]
MLM = "./no-such-mlm"  # a folder that does not exist: its fingerprint is the spec itself
# (a bare name such as "fake-mlm" is a hub id since bare hub ids are accepted: it hashes)
KINDS = {
    ("target", k)
    for k in (
        "logprobs",
        "sample",
        "greedy",
        "multiple_choice",
        "paraphrase",
        "gradnorm",
        "next_word",
        "next_token",
        "letter_logprobs",
        "token_counts",
    )
} | {("embedder", "embed"), ("mlm", "neighbours")}


class _Embedder:
    """A deterministic embedder: a unit vector from each string's hash (role ``embedder``)."""

    fingerprint = "hash-embedder-v1"

    def embed(self, strings: Sequence[str]) -> np.ndarray:
        rows = []
        for s in strings:
            seed = int.from_bytes(hashlib.sha256(s.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).normal(size=8)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


class _Neighbours:
    """A stand-in masked-LM neighbour generator (role ``mlm``)."""

    fingerprint = MLM

    def neighbours(self, text: str, *, n: int, top_k: int, dropout: float, seed: int, ranking: str):  # type: ignore[no-untyped-def]
        return [f"{text} ~{seed}.{i}" for i in range(n)]


def _corpus() -> list[str]:
    return ["one two three", "двадцать два", "one"]


def _tally(ids_per_text: Any) -> np.ndarray:
    counts = np.zeros(512, dtype=np.int64)
    for ids in ids_per_text:
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1)
    return counts


def _client(backend: Any, store: RequestStore, executor: Any = None) -> ModelRequests:
    runner = RequestRunner(store, executor=executor or LocalExecutor(), token_budget=64)
    return ModelRequests(
        {"target": backend, "mlm": _Neighbours()},
        runner,
        embedder=_Embedder(),
        local_models=local_transformers,
    )


def _every_kind(client: ModelRequests) -> dict[str, Any]:
    """One call of every request kind the client has (results, by kind)."""
    settings = {"n": 3, "top_k": 5, "temperature": 1.0, "mode": "sample", "min_mass": 1e-4}
    mlm = json.dumps({"n": 2, "top_k": 3, "dropout": 0.1, "ranking": "ratio"}, sort_keys=True)
    return {
        "logprobs": [
            *client.token_stats("target", TEXTS),
            *client.token_stats("target", TEXTS, prefix="Known text: "),
        ],
        "sample": client.sample("target", PROMPTS, 2, 3, seed=1),
        "greedy": client.sample("target", PROMPTS, 1, 2, temperature=0.0),
        "multiple_choice": client.choices("target", PROMPTS, max_tokens=2),
        "paraphrase": client.paraphrases("target", PROMPTS, max_tokens=3),
        "gradnorm": client.gradient_norms("target", TEXTS),
        "next_word": client.next_words(
            "target", TEXTS[:2], None, NextWordConfig(n=3, top_k=5, max_word_tokens=2), seed=0
        ),
        "next_token": client.next_tokens("target", TEXTS[:2], None, {**settings, "seed": 0}),
        "letter_logprobs": client.letter_logprobs("target", PROMPTS),
        "token_counts": client.token_counts("target", "corpus-digest", _corpus, _tally),
        "embed": client.embed(["a word", "ein Wort", "слово"]),
        "neighbours": client.neighbours(MLM, TEXTS, mlm, seed=2),
    }


def _assert_same(got: Any, want: Any, where: str = "") -> None:
    if isinstance(want, TokenStats):  # floats: workers run torch on 1 thread, the driver on more
        for f in TokenStats.FIELDS:
            a, b = getattr(got, f), getattr(want, f)
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=f"{where}.{f}")
    elif isinstance(want, np.ndarray):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for k in want:
            _assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), where
    else:
        assert got == want, where


@pytest.fixture(scope="module")
def tiny_target(tiny_model_dir: Path) -> tuple[BackendFactory, Any]:
    choice = choose_backend(str(tiny_model_dir), settings={"device": "cpu"})
    context = LoadContext(token_budget=64)
    return BackendFactory(choice, context), choice.load(context)


def test_a_rerun_makes_no_model_call_of_any_kind(tiny_target, tmp_path):
    _, backend = tiny_target
    path = tmp_path / "signals.sqlite"
    first = _client(backend, RequestStore(path))
    done = _every_kind(first)
    counts = first.runner.counts.to_dict()
    assert {(r, k) for r, kinds in counts.items() for k in kinds} == KINDS
    assert all(c["executed"] > 0 for kinds in counts.values() for c in kinds.values()), counts
    assert counts["target"]["logprobs"]["tokens"] > 0  # token-batched kinds count tokens
    assert "tokens" not in counts["target"]["sample"]
    first.runner.store.close()
    again = _client(backend, RequestStore(path))
    _assert_same(_every_kind(again), done)
    for role, kinds in again.runner.counts.to_dict().items():
        for kind, c in kinds.items():
            assert c["executed"] == c["batches"] == 0, (role, kind, c)
            assert c["cache_hits"] == c["requests"] == counts[role][kind]["requests"]
    assert again.runner.executor.stats.executed == {}  # no batch reached any model


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="Ray is the [ray] extra (in [dev]): pip install ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # the fakes and the kind below live in this test module, which workers cannot import
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    ray.shutdown()


def test_every_kind_runs_on_two_ray_workers_as_locally(local_ray, tiny_target):
    factory, backend = tiny_target
    local = _every_kind(_client(backend, RequestStore(None)))
    executor = make_executor(ExecutorConfig(kind="ray", workers=2), {"target": factory})
    executor.register("embedder", CallFactory(_Embedder))
    executor.register("mlm", CallFactory(_Neighbours))
    try:
        remote = _every_kind(_client(backend, RequestStore(None), executor))
    finally:
        executor.close()
    _assert_same(remote, local)
    where = executor.stats.to_dict()["where"]
    assert {(r, k) for r, kinds in where.items() for k in kinds} == KINDS
    for role, kinds in where.items():
        for kind, workers in kinds.items():
            assert workers and all(w.startswith(f"{role}-") for w in workers), (kind, workers)


# -- a new request kind: this file's two blocks are all it takes -----------------------------


@dataclass(frozen=True)
class ShoutRequest(Request):
    """``text`` in capitals, from the ``shouter`` role's model (the kind's file)."""

    kind: ClassVar[str] = "shout"
    batch_size: ClassVar[int] = 2
    text: str

    def size(self) -> int:
        return len(self.text)

    @staticmethod
    def execute(backend: Any, batch: Sequence[Any]) -> list[Any]:
        return [backend.shout(r.text) for r in batch]


def shout(requests: ModelRequests, texts: Sequence[str]) -> list[str]:
    """The client method (the second file): build the requests, run them."""
    reqs = [ShoutRequest(t) for t in texts]
    return requests.runner.run("shouter", "shouter-v1", reqs, requests.backend("shouter"))


class _Shouter:
    fingerprint = "shouter-v1"

    def __init__(self) -> None:
        self.calls = 0

    def shout(self, text: str) -> str:
        self.calls += 1
        return text.upper() + "!"


def test_a_kind_defined_in_a_test_runs_through_runner_store_and_both_executors(local_ray, tmp_path):
    path = tmp_path / "c.sqlite"
    shouter = _Shouter()
    client = ModelRequests({"shouter": shouter}, RequestRunner(RequestStore(path)))
    want = ["HURRICANE!", "МОСКВА!", "東京!", "HURRICANE!"]
    assert shout(client, ["hurricane", "Москва", "東京", "hurricane"]) == want
    assert shouter.calls == 3 and client.runner.counts.of("shouter", "shout").batches == 2
    again = ModelRequests({"shouter": _Shouter()}, RequestRunner(RequestStore(path)))
    assert shout(again, ["hurricane", "Москва"]) == want[:2]  # from the store
    assert again.backend("shouter").calls == 0
    executor = make_executor(ExecutorConfig(kind="ray", workers=2))
    executor.register("shouter", CallFactory(_Shouter))
    remote = ModelRequests(
        {"shouter": _Shouter()}, RequestRunner(RequestStore(None), executor=executor)
    )
    try:
        assert shout(remote, ["hurricane", "Москва", "東京", "x", "y"]) == [*want[:3], "X!", "Y!"]
    finally:
        executor.close()
    assert remote.backend("shouter").calls == 0  # the driver's model was never asked
    workers = executor.stats.where["shouter"]["shout"]
    assert sum(workers.values()) == 5 and all(w.startswith("shouter-") for w in workers)
    node = local_ray.get_runtime_context().get_node_id()  # one local node: every worker's
    assert {executor.stats.nodes[w] for w in workers} == {node}


# -- old caches ------------------------------------------------------------------------------


class _NoModel(Backend):
    """A gray-box backend that must not be asked anything."""

    name = "target"
    capabilities = frozenset({LOGPROBS})
    fingerprint = "fp-v1"
    max_length = 64

    def count_tokens(self, texts):  # type: ignore[no-untyped-def]
        return [len(t) + 1 for t in texts]

    def score(self, requests, **kw):  # type: ignore[no-untyped-def]
        pytest.fail(f"a model call for {[r.text for r in requests]}")

    def sample(self, *args, **kw):  # type: ignore[no-untyped-def]
        pytest.fail("a sampling call")


def _stats(n: int) -> TokenStats:
    return TokenStats(*(np.arange(n, dtype=np.int32),) * 6)


def _v1_cache(path: Path) -> SampleRequest:
    """A cache as imprint wrote it before the engine: the signal cache's token_stats and
    responses tables beside the request store's table at schema version 1."""
    sample = SampleRequest(prompt="Once", n=1, max_tokens=2, seed=4)
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE token_stats (backend TEXT NOT NULL, context TEXT NOT NULL,
                text TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (backend, context, text))
                WITHOUT ROWID;
            CREATE TABLE responses (key TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE request_results (backend TEXT NOT NULL, kind TEXT NOT NULL,
                key TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (backend, kind, key))
                WITHOUT ROWID;
            CREATE TABLE request_schema (version INTEGER NOT NULL);
            INSERT INTO request_schema VALUES (1);
            """
        )
        for i, text in enumerate(TEXTS):
            conn.execute(
                "INSERT INTO token_stats VALUES (?, ?, ?, ?)",
                (*make_key("fp-v1", text), encode_stats(_stats(i + 1))),
            )
            conn.execute(
                "INSERT INTO token_stats VALUES (?, ?, ?, ?)",
                (*make_key("fp-v1", text, "P: "), encode_stats(_stats(i + 2))),
            )
        conn.execute("INSERT INTO responses VALUES ('req', ?)", (json.dumps(["réponse"]),))
        conn.execute(
            "INSERT INTO request_results VALUES ('fp-v1', 'sample', ?, ?)",
            (sample.key(), json.dumps(["upon a"]).encode()),
        )
    conn.close()
    return sample


def test_a_schema_1_cache_is_migrated_once_and_serves_a_rerun_without_model_calls(tmp_path):
    path = tmp_path / "signals.sqlite"
    sample = _v1_cache(path)
    cache = SignalCache(path)
    needs = [Need(), Need(prefix="p")]
    signals, report = run_plan(TEXTS, needs, {"target": _NoModel()}, cache, prefixes={"p": "P: "})
    assert [len(s) for s in signals.get()] == [1, 2, 3, 4]
    assert [len(s) for s in signals.get(Need(prefix="p"))] == [2, 3, 4, 5]
    counts = report.per_model["target"]
    assert (counts.requests, counts.cache_hits, counts.executed) == (8, 8, 0)
    assert cache.get_response("req") == ["réponse"]  # a paid API answer is not asked again
    runner = RequestRunner(cache)
    assert runner.run("target", "fp-v1", [sample], _NoModel()) == [["upon a"]]
    cache.close()
    with sqlite3.connect(path) as conn:
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("SELECT version FROM request_schema").fetchall()
    conn.close()
    assert tables == {"request_results", "request_schema"} and version == [(SCHEMA_VERSION,)]
    assert len(SignalCache(path)) == 8  # opened again: nothing migrated twice


def test_request_keys_are_those_of_the_code_before_the_engine():
    """Every kind's key is sha256 of JSON [kind, fields] as before, so older caches serve."""

    def old_key(r: Any, drop: tuple[str, ...] = ()) -> str:
        fields = {k: v for k, v in asdict(r).items() if k not in drop}
        payload = json.dumps([r.kind, fields], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    kinds = [
        SampleRequest("Kraków 東京", 2, 5, seed=1),
        GreedyRequest("x"),
        ChoiceRequest("Q?"),
        GradNormRequest("t"),
        NeighbourRequest("t", "{}", 3),
        EmbedRequest("w"),
        ParaphraseRequest("p", 9),
    ]
    for r in kinds:
        assert r.key() == old_key(r), r.kind
    word = NextWordRequest("t", None, 10, 50, 1.0, 8, "sample", 0)
    assert word.key() == old_key(word, drop=("min_mass",))  # the default is not in the key
    assert NextWordRequest("t", None, 10, 50, 1.0, 8, "exact", 0, min_mass=0.01).key() != (
        NextWordRequest("t", None, 10, 50, 1.0, 8, "exact", 0).key()
    )  # a changed min_mass is another answer (it was served the default's before)
    counts = TokenCountsRequest("digest", texts=_corpus, count=_tally)
    assert counts.key() == old_key(TokenCountsRequest("digest"), drop=("texts", "count"))
    assert LogprobRequest("x", "P").key() == ":".join(make_key("fp", "x", "P")[1:])


def test_a_damaged_row_of_any_kind_is_recomputed_with_a_warning(tmp_path):
    path = tmp_path / "signals.sqlite"
    store = RequestStore(path)
    req = SampleRequest("Once", 1, 2, seed=4)
    store.put_many("fp", [(req, [["upon"]])])
    store.put_many("fp", [(EmbedRequest("w"), np.ones(3, np.float32))])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE request_results SET data = x'ff00' WHERE kind = 'sample'")
        conn.execute("UPDATE request_results SET data = x'ff' WHERE kind = 'embed'")
    conn.close()
    with pytest.warns(UserWarning, match=r"signals\.sqlite.*1 damaged entries.*computed again"):
        assert store.get_many("fp", [req]) == {}
    with pytest.warns(UserWarning, match="1 damaged entries"):
        assert store.get_many("fp", [EmbedRequest("w")]) == {}
    assert store.count() == 0  # both removed, so the next run computes and stores them


def test_a_long_text_advances_the_bar_per_forward_and_ends_at_its_tokens():
    """The logprobs kind streams progress from a backend that reports it (one long text)."""

    class Streaming(_NoModel):
        reports_progress = True

        def score(self, requests, *, progress=None):  # type: ignore[no-untyped-def]
            for _ in range(3):
                progress(10)  # three windows
            return [_stats(len(r.text)) for r in requests]

    seen: list[int] = []
    runner = RequestRunner(
        RequestStore(None), progress=lambda label, total: seen.append(total) or seen.append
    )
    runner.run("target", "fp", [LogprobRequest("y" * 50)], Streaming())
    assert seen[0] == 51 and seen[1:] == [10, 10, 10, 21]  # per forward, then the rest


def test_score_requests_are_what_the_logprobs_kind_hands_the_backend():
    got: list[list[ScoreRequest]] = []

    class Recording(_NoModel):
        def score(self, requests, **kw):  # type: ignore[no-untyped-def]
            got.append(list(requests))
            return [_stats(2) for _ in requests]

    runner = RequestRunner(RequestStore(None))
    reqs = [LogprobRequest("a", "P"), LogprobRequest("bb", "P"), LogprobRequest("c")]
    runner.run("target", "fp", reqs, Recording())
    # one prefix per batch (its KV cache is reused), longest first within a prefix
    assert got == [[ScoreRequest("bb", "P"), ScoreRequest("a", "P")], [ScoreRequest("c")]]
