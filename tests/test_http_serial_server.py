"""Concurrency and timeouts on a server that serves one request at a time (issue 36, items 3-4).

A real loopback server (``tests/fake_openai_server.py``, which by default computes one request
at a time, as a server with one model does) whose ``generate`` sleeps a fixed time, the first
call longer (a cold start). llama-cpp-python answered 4 concurrent requests at 0.94, 1.80, 2.68
and 3.57 s, yet the client, timing one request by the cold first one, settled on 3 and reported
an effective parallelism of 9.8 with 8 in flight; a request past the timeout was sent again and
queued behind the copy the server was still computing (``transformers serve``: 20 POSTs for 9
answers).
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from fake_openai_server import FakeOpenAIServer

from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.http_adapt import ServerLimits

FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05)


def timed(seconds: float, first_s: float | None = None):
    """A ``generate`` taking ``seconds`` per request, the first ``first_s`` (cold)."""
    calls = itertools.count()
    lock = threading.Lock()

    def run(prompt, n, max_tokens, stop, seed, temperature):
        with lock:
            cold = next(calls) == 0
        time.sleep(first_s if cold and first_s is not None else seconds)
        return [f"{prompt}|{seed}|{i}" for i in range(n)]

    return run


def draw(backend: OpenAICompatibleBackend, prompts: list[str]) -> list[list[str]]:
    """One continuation per prompt (through whichever ``sample`` signature the backend has)."""
    try:
        from imprint.backends.base import SamplingSettings
    except ImportError:  # the flat signature
        return backend.sample(prompts, 1, 2, seed=0)
    return backend.sample(prompts, SamplingSettings(n=1, max_tokens=2, seed=0))


def client(server: FakeOpenAIServer, **kwargs) -> OpenAICompatibleBackend:
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("timeout_s", 10.0)
    return OpenAICompatibleBackend(server.base_url, "tiny", api_key_env=None, **kwargs)


def posts(server: FakeOpenAIServer) -> int:
    return sum(entry["path"].endswith("/completions") for entry in server.log)


def test_the_issues_llama_cpp_timings_settle_at_one_request_in_flight():
    # the cold first request (3.0 s) is kept apart; one warm request alone took 3.0 s too
    # (a slow warm timing), the wave's first answer 0.94 s: P = 4 x 0.94 / 3.57 = 1.05
    limits = ServerLimits(8)
    assert not limits.observe(1, 1, 3.0, full=True)
    assert limits.first_s == 3.0 and limits.solo_s is None  # never the one-request timing
    assert not limits.observe(1, 1, 3.0, full=True)
    limits.wave = 4
    finishes = (0.94, 1.80, 2.68, 3.57)
    assert limits.observe(4, 4, 3.57, True, 4, finishes)
    assert limits.concurrency == 1 and limits.serial is True
    assert limits.parallelism == pytest.approx(1.05, abs=0.01)
    assert limits.describe()["settling_wave_answers_s"] == list(finishes)


def test_parallelism_is_never_reported_above_the_requests_in_flight():
    # a quotient above the wave's size (a one-request timing slower than the whole wave, as
    # when it came from a cold request) is clipped to the wave's size, and the clip is said
    limits = ServerLimits(4, first_s=9.0, solo_s=5.0, wave=4)
    assert limits.observe(4, 4, 2.0, True, 4, ())  # no arrival times: t1 alone
    assert limits.parallelism == 4.0 and limits.clipped_from == pytest.approx(10.0)
    assert limits.describe()["parallelism_clipped_from"] == 10.0


def test_a_serial_server_with_a_cold_start_settles_at_one_from_warm_timings():
    # 0.25 s per request, one at a time; the first takes 1 s. Timed by the cold request, waves
    # of 2, 4 and 8 looked 4 x parallel and settled at 4 in flight
    server = FakeOpenAIServer(timed(0.25, first_s=1.0))
    with server, client(server, max_concurrency=8) as backend:
        draw(backend, [f"p{i}" for i in range(16)])
        limits = backend.limits.describe()
    assert limits["concurrency"] == 1 and limits["serial"] is True, limits
    assert limits["parallelism"] < 1.5 and limits["first_request_s"] >= 1.0, limits
    assert limits["solo_request_s"] < 0.6, limits  # a warm request, not the cold one
    answers = limits["settling_wave_answers_s"]
    assert len(answers) == 2 and answers[1] > 1.6 * answers[0], limits  # t, 2t: one at a time


def test_a_parallel_server_is_measured_parallel_and_within_the_requests_in_flight():
    server = FakeOpenAIServer(timed(0.3, first_s=1.2), parallel=True)
    with server, client(server, max_concurrency=4) as backend:
        draw(backend, [f"p{i}" for i in range(8)])
        limits = backend.limits.describe()
    assert limits["serial"] is False and limits["concurrency"] >= 3, limits
    assert limits["parallelism"] <= 4, limits  # timed by the cold request: 4 x 1.2 / 0.3 = 16


def test_a_timeout_on_a_serial_server_waits_for_the_answer_instead_of_sending_it_again():
    # every request takes 0.6 s, one at a time, past the 0.25 s timeout: re-sent, each copy
    # queued behind the abandoned one and timed out too
    server = FakeOpenAIServer(timed(0.6))
    with server, client(server, max_concurrency=4, timeout_s=0.25) as backend:
        out = draw(backend, [f"p{i}" for i in range(5)])
        usage = backend.usage()
    assert [row[0].split("|")[0] for row in out] == [f"p{i}" for i in range(5)]
    assert posts(server) == 5 and usage["attempts"] == 5 and usage["retries"] == {}, usage
    assert usage["past_timeout"] >= 1 and usage["failed"] == 0, usage


def test_a_request_unanswered_even_after_the_wait_fails_once_and_is_not_sent_again():
    # the wait is the time the retries would have had: 0.2 s x (1 + 2) x 1 in flight
    server = FakeOpenAIServer(timed(0.0), faults=["timeout"], stall_s=2.0)
    retry = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05)
    with server, client(server, timeout_s=0.2, retry=retry) as backend:
        with pytest.raises(APIError) as err:
            draw(backend, ["p0"])
        usage = backend.usage()
    assert "answer awaited 0.6 s" in str(err.value) and "not sent again" in str(err.value)
    assert posts(server) == 1 and usage["failed"] == 1 and usage["retries"] == {}, usage


def test_a_timeout_on_a_server_measured_parallel_is_still_retried():
    # the abandoned request does not hold up the others there: retried, limit halved
    server = FakeOpenAIServer(timed(0.0), faults=["timeout"], stall_s=1.0, parallel=True)
    with server, client(server, max_concurrency=4, timeout_s=0.3) as backend:
        backend.limits.parallelism, backend.limits.concurrency = 4.0, 4  # measured before
        body = {"model": "tiny", "n": 1, "max_tokens": 2, "prompt": "p0"}
        assert backend._request_all([body], 4)[0][0].startswith("p0|")
        usage = backend.usage()
    assert usage["retries"] == {"timeout": 1} and posts(server) == 2, usage
