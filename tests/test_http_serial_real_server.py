"""A request slower than the timeout on ``transformers serve`` (real, started on 127.0.0.1),
which serves one request at a time (issue 36 item 3).

Before: a timed-out request was sent again while the server was still computing the abandoned
one, so the copy queued behind it and timed out too (20 POSTs for 9 answers, 727 s). Now the
answer is awaited (the server was not measured to serve requests at once), so the POSTs are the
answers plus one per real failure, counted at a recording proxy between client and server.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from test_http_real_server import NAME, TransformersServe

from imprint.backends.http import OpenAICompatibleBackend, RetryPolicy

TIMEOUT_S = 0.5  # the docs' figure is 60 s; requests of MAX_TOKENS tokens take longer here
MAX_TOKENS = 32


class RecordingProxy:
    """Forwards every request to ``upstream`` (an API root's host) and records each POST's
    path, status and seconds upstream; it keeps waiting upstream when the client has left, as
    the server goes on computing an abandoned request."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.posts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                self._forward("GET", None)

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._forward("POST", body)

            def _forward(self, method: str, body: bytes | None) -> None:
                started = time.perf_counter()
                headers = {"Content-Type": "application/json"}
                answer = httpx.request(
                    method, proxy.upstream + self.path, content=body, headers=headers, timeout=None
                )
                if method == "POST":
                    seconds = time.perf_counter() - started
                    with proxy._lock:
                        proxy.posts.append({"status": answer.status_code, "seconds": seconds})
                try:
                    self.send_response(answer.status_code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer.content)))
                    self.end_headers()
                    self.wfile.write(answer.content)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        return Handler


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = TransformersServe(tmp_path_factory.mktemp("serve"))
    try:
        server.start(timeout_s=1800.0)  # at load 30 on 2 cores it took over 10 minutes
        with RecordingProxy(f"http://127.0.0.1:{server.port}") as proxy:
            # loaded, past the proxy: the client's own cold request is then not minutes long
            warm = {"model": NAME, "prompt": "Hello", "max_tokens": 2}
            httpx.post(f"{server.base_url}/completions", json=warm, timeout=900).raise_for_status()
            yield proxy
    finally:
        server.kill()


def _draw(backend: OpenAICompatibleBackend, prompts: list[str]) -> list[list[str]]:
    try:
        from imprint.backends.base import SamplingSettings
    except ImportError:  # the flat signature
        return backend.sample(prompts, 1, MAX_TOKENS, seed=0)
    return backend.sample(prompts, SamplingSettings(n=1, max_tokens=MAX_TOKENS, seed=0))


def test_requests_slower_than_the_timeout_are_awaited_not_sent_again(served):
    # one alone (first), one alone (warm), two at once: settled there
    prompts = [f"Chapter {i}. Once upon a time, in a small village by the sea," for i in range(4)]
    # an answer is awaited up to 0.5 s x (1 + 200) per request in flight: room for a machine
    # so loaded that 48 tokens took over 42 s
    retry = RetryPolicy(max_retries=200, base_s=0.1, cap_s=1.0)
    with OpenAICompatibleBackend(
        served.base_url, NAME, api_key_env=None, timeout_s=TIMEOUT_S, max_concurrency=4, retry=retry
    ) as backend:
        out = _draw(backend, prompts)
        usage, limits = backend.usage(), backend.limits.describe()
    seconds = [p["seconds"] for p in served.posts]
    print(f"POST seconds {[round(s, 2) for s in seconds]}; usage {usage}; limits {limits}")
    assert max(seconds) > TIMEOUT_S, seconds  # else this test would show nothing
    assert [len(row) for row in out] == [1] * len(prompts)
    assert len(served.posts) == usage["requests"] + usage["failed"] == len(prompts), usage
    assert usage["retries"] == {} and usage["past_timeout"] >= 1, usage
    assert limits["concurrency"] == 1 and limits["serial"] is True, limits
