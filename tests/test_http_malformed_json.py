"""A server that answers HTTP 200 with a body that is not an OpenAI answer (not JSON, or JSON
without the fields the request needs) has a protocol error, not a transient fault: the request
is sent again at most once (a body cut short may be transient), then the run stops with one
line naming the URL, the request, what was wrong, the start of the body and the fix, and
nothing of the answer is stored. Issue 36's hostile tester saw 7 POSTs per request and advice
to raise --api-max-retries."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest
from json_handler import AnswerHandler
from typer.testing import CliRunner

from imprint.backends.base import SamplingSettings
from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
from imprint.cli import app
from imprint.errors import ImprintError
from imprint.signals.cache import SignalCache

ENV = "IMPRINT_TEST_MALFORMED_KEY"
KEY = "sk-live-Zq81malformed-never-print"
NO_WAIT = RetryPolicy(max_retries=6, base_s=0.0, cap_s=0.0)  # 6: the default budget
NGINX = b"<html>\r\n<head><title>Welcome to nginx!</title></head>\r\n<body>" + b"x" * 300


class MalformedServer:
    """A loopback server listing the model ``m`` whose POSTs answer 200 with ``bodies`` in
    turn (the last one repeated), counting the POSTs it receives."""

    def __init__(self, *bodies: bytes) -> None:
        self.bodies, self.posts, self._lock = list(bodies), 0, threading.Lock()
        owner = self

        class Handler(AnswerHandler):
            def answer(self, method: str) -> None:
                if method == "GET":
                    return self.send_json(
                        200, {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}
                    )
                self.read_json()
                with owner._lock:
                    raw = owner.bodies[min(owner.posts, len(owner.bodies) - 1)]
                    owner.posts += 1
                if raw.startswith(b"ok:"):  # a well-formed answer carrying the text after ok:
                    return self.send_json(200, {"choices": [{"text": raw[3:].decode()}]})
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> MalformedServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)


def _client(server: MalformedServer, **kwargs) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(
        server.base_url, "m", api_key_env=ENV, retry=NO_WAIT, timeout_s=5.0, **kwargs
    )


MALFORMED = [
    (NGINX, "a body that is not JSON", r"'<html>\r\n<head><title>Welcome to nginx!"),
    (b'{"choices": [{"text": "cut sho', "a body that is not JSON", '\'{"choices": [{"text": "cut'),
    (b"", "an empty body", "''"),
    (
        b'{"error": "busy", "object": "text_completion"}',
        'JSON without the field "choices" (it has "error", "object")',
        '\'{"error": "busy"',
    ),
    (b'{"choices": "hello"}', 'JSON whose "choices" is not a list of objects', "'{\"choices"),
    (b"[1, 2]", "JSON that is not an object (an array)", "'[1, 2]'"),
]


@pytest.mark.parametrize(("raw", "what", "head"), MALFORMED)
def test_a_malformed_answer_is_sent_twice_at_most_then_stops_in_one_line(raw, what, head, tmp_path):
    cache = SignalCache(tmp_path / "store.sqlite")
    with MalformedServer(raw) as server, _client(server, cache=cache, max_concurrency=1) as client:
        with pytest.raises(APIError) as err:
            client.sample(["The harbour", "A boat"], SamplingSettings(2, 4, seed=1))
        usage = client.usage()
    message = str(err.value)
    assert server.posts == 2, server.posts  # was 7: the retry budget spent on a protocol error
    assert "\n" not in message
    assert message.startswith(f"{server.base_url}/completions answered a black-box sampling")
    assert what in message and head in message, message
    assert f"body ({len(raw):,} bytes): " in message
    assert "--api-base" in message and "--api-max-retries" not in message
    assert "is not supported" in message and "not stored" in message
    assert usage["retries"] == {"malformed body": 1} and usage["failed"] == 1
    assert cache.count() == 0  # nothing of a malformed answer went to the store


def test_one_malformed_answer_is_retried_once_and_counted(tmp_path):
    """A body cut short once may be transient: the second answer is used, and usage counts it."""
    with MalformedServer(b'{"choices": [', b"ok: the quay") as server, _client(server) as client:
        out = client.sample(["The harbour"], SamplingSettings(1, 4, seed=1))
        usage = client.usage()
    assert out == [[" the quay"]] and server.posts == 2
    assert usage["retries"] == {"malformed body": 1} and usage["failed"] == 0


def test_without_retries_a_malformed_answer_still_names_the_fix():
    once = RetryPolicy(max_retries=0, base_s=0.0, cap_s=0.0)
    with MalformedServer(NGINX) as server:
        client = OpenAICompatibleBackend(server.base_url, "m", api_key_env=ENV, retry=once)
        with client, pytest.raises(APIError, match=r"not JSON.*--api-base") as err:
            client.sample(["The harbour"], SamplingSettings(1, 4, seed=1))
    assert server.posts == 1 and "--api-max-retries" not in str(err.value)


def test_the_key_a_malformed_body_echoes_is_masked():
    echo = MalformedServer(f"<p>bad key {KEY}</p>".encode())
    with echo as server, _client(server) as client, pytest.raises(APIError) as err:
        client.sample(["The harbour"], SamplingSettings(1, 4, seed=1))
    assert KEY not in str(err.value) and "'<p>bad key ***</p>'" in str(err.value)


def test_imprint_run_stops_with_one_error_line(tmp_path):
    data = tmp_path / "texts.jsonl"
    rows = [(f"Sentence number {i} about the harbour and its boats.", i % 2) for i in range(8)]
    data.write_text("\n".join(json.dumps({"text": t, "label": y}) for t, y in rows) + "\n")
    out = tmp_path / "run"
    with MalformedServer(NGINX) as server:
        args = ["run", "--model", "m", "--data", str(data), "--out", str(out), "--no-blind"]
        api = ["--api-base", server.base_url, "--api-key-env", ENV, "--attacks", "samia"]
        result = CliRunner().invoke(app, [*args, *api])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not JSON" in errors[0] and "--api-base" in errors[0], errors
    assert "--api-max-retries" not in result.output
    assert server.posts <= 2  # one request in flight at first (slow start), sent twice at most


@pytest.mark.parametrize("raw", [NGINX, b'{"error": "busy", "object": "text_completion"}'])
def test_a_gray_box_request_answered_malformed_stops_the_same_way(raw, tmp_path):
    cache = SignalCache(tmp_path / "store.sqlite")
    with MalformedServer(raw) as server:
        backend = HTTPLogprobBackend(
            server.base_url, "m", LogprobOptions(key_env=None), probe=False, cache=cache
        )
        backend._retry = NO_WAIT  # the options' backoff, without its waits
        try:
            with pytest.raises(ImprintError) as err:
                backend._first_candidates("The", 5)
        finally:
            backend.close()
    assert server.posts <= 2, server.posts  # was 7 for a body that is not JSON
    assert "--api-base" in str(err.value) and "max_retries" not in str(err.value)
    assert cache.count() == 0  # was 1: the answer without choices, read back by every rerun
