"""The black-box client's learned limits, retries and result order, against a real loopback
server (tests/fake_openai_server.py) whose ``generate`` sleeps instead of running a model.

Pins review items: a retried wave does not measure the concurrency (4), simultaneous timeouts
halve the in-flight limit once and the manifest reports the lowered limit (5), a store that
answered a rerun is counted when a failure says what is stored (8), results keep their order
over many prompts and chunks (9), a ``Retry-After`` that is not a finite number >= 0 is not
waited on (12).
"""

from __future__ import annotations

import time

import httpx
import pytest
from fake_openai_server import FakeOpenAIServer

from imprint.backends.base import SamplingSettings
from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.http_transport import _retry_after
from imprint.signals.cache import SignalCache

FAST = RetryPolicy(max_retries=4, base_s=0.01, cap_s=0.05)
WAITS = RetryPolicy(max_retries=4, base_s=0.01, cap_s=5.0)  # Retry-After honoured up to 5 s


def slow(seconds: float):
    """A ``generate`` that takes ``seconds`` per request, as a server computing for that long."""

    def run(prompt, n, max_tokens, stop, seed, temperature):
        time.sleep(seconds)
        return [f"{prompt}|{seed}|{i}" for i in range(n)]

    return run


def client(server: FakeOpenAIServer, **kwargs) -> OpenAICompatibleBackend:
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAICompatibleBackend(server.base_url, "tiny", api_key_env=None, **kwargs)


def test_a_wave_with_a_retried_request_does_not_settle_the_concurrency():
    # one 429 (Retry-After 0.6 s) in the first wave of 2 on a server that answers 4 at once:
    # timed as a wave it shows parallelism ~0.5 and settled the limit at 1
    server = FakeOpenAIServer(slow(0.3), faults=[None, "429"], retry_after="0.6", parallel=True)
    with server, client(server, max_concurrency=4, retry=WAITS) as backend:
        backend.sample([f"p{i}" for i in range(12)], SamplingSettings(1, 2))
        limits = backend.limits.describe()
    assert backend.usage()["retries"] == {"429": 1}
    assert limits["concurrency"] is not None and limits["concurrency"] > 1, limits


def test_a_retried_solo_request_does_not_set_the_solo_latency():
    server = FakeOpenAIServer(slow(0.2), faults=["429"], retry_after="0.8", parallel=True)
    with server, client(server, max_concurrency=4, retry=WAITS) as backend:
        backend.sample([f"p{i}" for i in range(3)], SamplingSettings(1, 2))
        solo = backend.limits.solo_s
    assert solo is not None and solo < 0.6, solo  # 0.2 s answers, not 0.8 s wait + answer


def test_simultaneous_timeouts_halve_the_limit_once_and_the_manifest_says_so():
    # 8 requests in flight time out together: one overload, one halving (8 -> 4, not 8 -> 1)
    server = FakeOpenAIServer(slow(0.0), faults=["timeout"] * 8, stall_s=1.5, parallel=True)
    with server, client(server, max_concurrency=8, timeout_s=0.5) as backend:
        backend.limits.parallelism = 8.0  # measured parallel (else timeouts are waited out)
        bodies = [{"model": "tiny", "n": 1, "max_tokens": 2, "prompt": f"p{i}"} for i in range(8)]
        texts = backend._request_all(bodies, 8)
        assert [t[0].split("|")[0] for t in texts] == [f"p{i}" for i in range(8)]
        assert backend.usage()["retries"] == {"timeout": 8}
        assert backend._gate.limit == 4
        limits = backend.describe()["limits"]
        # settled at the lowered limit: a later wave does not raise it back
        backend.sample(["q0", "q1", "q2"], SamplingSettings(1, 2))
        assert backend._gate.limit == 4
    assert limits["concurrency"] == 4 and limits["lowered_after_timeout"] == 4, limits


def test_a_failure_on_a_rerun_counts_the_answers_the_store_gave(tmp_path):
    cache = SignalCache(tmp_path / "store.sqlite")
    with FakeOpenAIServer(slow(0.0)) as server:  # the store is keyed by the server's URL
        with client(server, cache=cache) as first:
            first.sample(["a", "b"], SamplingSettings(1, 2, seed=1))
        server.prompt_faults["c"] = "500"  # a new prompt, failing for good
        with (
            client(server, cache=cache, max_concurrency=1) as rerun,
            pytest.raises(APIError) as err,
        ):
            rerun.sample(["a", "b", "c"], SamplingSettings(1, 2, seed=1))
    assert rerun.usage()["cached"] == 2
    message = str(err.value)
    assert "nothing is stored" not in message
    assert "2 answers of this call and 0 earlier ones are stored (2 of them read" in message


def test_results_keep_prompt_and_sample_order_over_many_prompts_and_chunks():
    # 5 samples in requests of at most 2; the first answer has one choice fewer, so the client
    # learns 1 choice per request and splits the rest again
    server = FakeOpenAIServer(slow(0.0), faults=["short"], parallel=True)
    prompts = [f"p{i}" for i in range(12)]
    with server, client(server, max_n_per_request=2, max_concurrency=4) as backend:
        out = backend.sample(prompts, SamplingSettings(5, 2, seed=0))
    assert len(out) == len(prompts) and all(len(row) == 5 for row in out)
    for p, (prompt, row) in enumerate(zip(prompts, out, strict=True)):
        assert all(t.startswith(f"{prompt}|") for t in row)
        # each request's seed is seed + p * 1000 + its first sample: samples in order
        firsts = [int(t.split("|")[1]) - p * 1_000 for t in row]
        assert firsts == sorted(firsts), row


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-3", "NaN"])
def test_a_retry_after_that_is_no_finite_wait_is_treated_as_absent(value):
    assert _retry_after(httpx.Headers({"Retry-After": value})) is None
    assert _retry_after(httpx.Headers({"Retry-After": "1.5"})) == 1.5


def test_retry_after_inf_backs_off_instead_of_waiting_the_cap():
    server = FakeOpenAIServer(slow(0.0), faults=["429"], retry_after="inf")
    retry = RetryPolicy(max_retries=2, base_s=0.01, cap_s=20.0)
    with server, client(server, retry=retry) as backend:
        started = time.perf_counter()
        assert backend.sample(["a"], SamplingSettings(1, 2)) == [["a|None|0"]]
        assert time.perf_counter() - started < 10.0  # not the 20 s cap
    assert backend.usage()["retries"] == {"429": 1}
