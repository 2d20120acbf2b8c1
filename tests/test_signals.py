"""Planner and cache: deduplication, batching by token budget, cache hits, atomic batches."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.backends.base import LOGPROBS, Backend, ScoreRequest, TokenStats
from imprint.errors import CapabilityError, ConfigError
from imprint.signals.cache import SignalCache, decode_stats, encode_stats, make_key
from imprint.signals.needs import LOWER, Need
from imprint.signals.plan import batches_by_budget, run_plan


class CountingBackend(Backend):
    """A deterministic fake gray-box backend that records every request it scores."""

    name = "target"
    capabilities = frozenset({LOGPROBS})
    fingerprint = "fake-v1"
    max_length = 64

    def __init__(self) -> None:
        self.calls: list[list[ScoreRequest]] = []

    def count_tokens(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def score(self, requests):
        self.calls.append(list(requests))
        out = []
        for r in requests:
            n = len(r.text.split())
            base = -float(len(r.text) % 7) - (0.5 if r.prefix else 0.0)
            out.append(
                TokenStats(
                    token_ids=np.arange(n, dtype=np.int32),
                    logp=np.full(n, base, dtype=np.float32),
                    mean_logp=np.full(n, -1.0, dtype=np.float32),
                    var_logp=np.ones(n, dtype=np.float32),
                    rank=np.ones(n, dtype=np.int32),
                    argmax=np.zeros(n, dtype=np.int32),
                )
            )
        return out


TEXTS = ["One two three", "Four five", "One two three", "Six seven eight nine ten"]


def test_one_pass_per_distinct_text_and_need():
    backend = CountingBackend()
    cache = SignalCache(None)
    needs = [Need(), Need(), Need(variant=LOWER)]  # duplicates across attacks collapse
    signals, report = run_plan(TEXTS, needs, {"target": backend}, cache)
    scored = [r.text for call in backend.calls for r in call]
    assert sorted(scored) == sorted({*TEXTS, *(t.lower() for t in TEXTS)})
    assert report.per_model["target"].executed == len(scored)
    assert len(signals.get()) == len(TEXTS)
    assert signals.get()[0] is signals.get()[2]  # same text, same stats


def test_second_run_is_all_cache_hits(tmp_path):
    path = tmp_path / "signals.sqlite"
    first = CountingBackend()
    run_plan(TEXTS, [Need()], {"target": first}, SignalCache(path))
    second = CountingBackend()
    signals, report = run_plan(TEXTS, [Need()], {"target": second}, SignalCache(path))
    assert second.calls == []
    assert report.per_model["target"].cache_hits == 3
    assert [len(s) for s in signals.get()] == [3, 2, 3, 5]


def test_prefixed_requests_are_cached_separately():
    backend = CountingBackend()
    cache = SignalCache(None)
    signals, _ = run_plan(
        TEXTS, [Need(), Need(prefix="p")], {"target": backend}, cache, prefixes={"p": "Shots."}
    )
    plain, prefixed = signals.get(), signals.get(Need(prefix="p"))
    assert all(
        float(a.logp[0]) - 0.5 == float(b.logp[0]) for a, b in zip(plain, prefixed, strict=True)
    )
    # each batch holds a single prefix, so the backend can reuse one KV cache per batch
    assert all(len({r.prefix for r in call}) == 1 for call in backend.calls)


def test_batches_respect_token_budget():
    lengths = [5, 50, 7, 30, 30, 2, 64]
    batches = batches_by_budget(lengths, 100)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 100 or len(batch) == 1
    # sorted by length: the longest text is first
    assert batches[0][0] == 6


def test_missing_model_or_prefix_fails_before_work():
    backend = CountingBackend()
    with pytest.raises(CapabilityError, match="--ref"):
        run_plan(TEXTS, [Need(model="ref1")], {"target": backend}, SignalCache(None))
    with pytest.raises(ConfigError, match="prefix"):
        run_plan(TEXTS, [Need(prefix="recall")], {"target": backend}, SignalCache(None))
    assert backend.calls == []


def test_stats_round_trip():
    stats = CountingBackend().score([ScoreRequest("a b c")])[0]
    back = decode_stats(encode_stats(stats))
    for field in TokenStats.FIELDS:
        np.testing.assert_array_equal(getattr(back, field), getattr(stats, field))
    assert make_key("fp", "x") != make_key("fp", "x", "prefix")


def test_entries_of_the_earlier_npz_format_are_still_read():
    import io

    stats = CountingBackend().score([ScoreRequest("Kraków 北京")])[0]
    buffer = io.BytesIO()
    np.savez(buffer, **{f: getattr(stats, f) for f in TokenStats.FIELDS})
    back = decode_stats(buffer.getvalue())
    for field in TokenStats.FIELDS:
        np.testing.assert_array_equal(getattr(back, field), getattr(stats, field))
    assert len(encode_stats(stats)) == 9 + 4 * len(stats) * len(TokenStats.FIELDS)


def test_prefix_that_cannot_fit_fails_before_any_pass():
    backend = CountingBackend()
    long_prefix = " ".join(["shot"] * 70)  # 71 tokens with BOS, context 64
    with pytest.raises(ConfigError, match="n_shots"):
        run_plan(
            TEXTS,
            [Need(), Need(prefix="p")],
            {"target": backend},
            SignalCache(None),
            prefixes={"p": long_prefix},
        )
    assert backend.calls == []
