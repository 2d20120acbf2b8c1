"""A real OpenAI-compatible HTTP server on loopback for tests, with scheduled faults.

``FakeOpenAIServer(generate, api_key=..., faults=[...])`` serves ``POST /v1/completions`` and
``POST /v1/chat/completions`` from a thread (``http.server.ThreadingHTTPServer``). ``generate``
maps (prompt, n, max_tokens, stop, seed, temperature) to ``n`` continuations, e.g. a local
:class:`imprint.backends.text.HFTextBackend` over the tiny test model.

``faults`` is consumed one entry per request, in arrival order (then no more faults):
``None`` (serve normally), ``"429"`` (rate limit, ``Retry-After: <retry_after>``, default
``0``), ``"500"``, ``"503"``,
``"timeout"`` (sleep ``stall_s`` before answering, longer than the client's timeout),
``"malformed"`` (200 with a body that is not JSON), ``"short"`` (200 with one choice fewer
than asked, as a server that caps ``n``),
``"drop"`` (close the connection without an answer); bodies of the wrong shape, as broken
servers send them: ``"usage_str"`` (``usage`` a string), ``"tokens_float"`` (``prompt_tokens``
2.5), ``"tokens_str"`` (``completion_tokens`` ``"40"``), ``"text_null"`` (the first choice's text,
or chat content, null), ``"echo_key"`` (400 quoting the ``Authorization`` header whole and cut
short, as servers that log bad keys do). ``prompt_faults`` maps a prompt to the fault every
request for it gets (before the scheduled ones), for tests that need a fault on a given request
whatever the arrival order.

``GET /v1/models`` lists ``models`` (default ``("tiny",)``; None: 404, as servers that do not
list them) as ``owned_by`` (default ``"vllm"``: the client then sends vLLM's sampling fields,
which ``generate`` ignores apart from the temperature). The real-server tests
(``tests/test_http_real_server.py``) start ``transformers serve``; this server stays for the
faults a real server cannot be made to produce on cue. ``parallel=True`` calls ``generate``
from each request's thread at once (default: one at a time, as a server with one model).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Generate = Callable[[str, int, int, "list[str] | None", "int | None", float], list[str]]
TEXT_MARKER = "Text: "


class FakeOpenAIServer:
    """See the module docstring. Use as a context manager; ``base_url`` ends with ``/v1``."""

    def __init__(
        self,
        generate: Generate,
        *,
        api_key: str | None = None,
        faults: Sequence[str | None] = (),
        prompt_faults: dict[str, str] | None = None,
        stall_s: float = 1.0,
        models: Sequence[str] | None = ("tiny",),
        owned_by: str = "vllm",
        retry_after: str = "0",
        parallel: bool = False,
    ) -> None:
        self.generate, self.api_key, self.stall_s = generate, api_key, stall_s
        self.retry_after, self.parallel = retry_after, parallel
        self.models, self.owned_by = models, owned_by
        self.faults, self.prompt_faults = list(faults), dict(prompt_faults or {})
        self.log: list[dict[str, Any]] = []  # path, fault, n, top_k, ok: never the key
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_fault(self, body: dict[str, Any] | None = None) -> str | None:
        prompt = (body or {}).get("prompt")
        if isinstance(prompt, str) and prompt in self.prompt_faults:
            return self.prompt_faults[prompt]
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON answer to a well-formed request."""
        n, max_tokens = int(body.get("n", 1)), int(body.get("max_tokens", 16))
        chat = path.endswith("/chat/completions")
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        if chat:  # answer the instruction by continuing the text after its marker
            prompt = prompt.split(TEXT_MARKER, 1)[-1]
        with self._model_lock if not self.parallel else contextlib.nullcontext():
            texts = self.generate(
                prompt,
                n,
                max_tokens,
                body.get("stop"),
                body.get("seed"),
                float(body.get("temperature", 1.0)),
            )
        if chat:
            choices = [
                {"index": i, "message": {"role": "assistant", "content": t.strip()}}
                for i, t in enumerate(texts)
            ]
        else:
            choices = [
                {"index": i, "text": t, "finish_reason": "length"} for i, t in enumerate(texts)
            ]
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n * max_tokens}
        return {"object": "text_completion", "choices": choices, "usage": usage}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                if self.path != "/v1/models" or server.models is None:
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                data = [
                    {"id": m, "object": "model", "owned_by": server.owned_by} for m in server.models
                ]
                self._send(200, {"object": "list", "data": data})

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                authorised = server.api_key is None or (
                    self.headers.get("Authorization") == f"Bearer {server.api_key}"
                )
                fault = server.next_fault(body) if authorised else None
                with server._lock:
                    server.log.append(
                        {
                            "path": self.path,
                            "fault": fault,
                            "n": body.get("n"),
                            "top_k": body.get("top_k"),
                            "body": {k: v for k, v in body.items() if k != "prompt"},
                            "ok": authorised,
                        }
                    )
                if not authorised:
                    return self._send(401, {"error": {"message": "invalid API key"}})
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._serve(fault, body)

            def _serve(self, fault: str | None, body: dict[str, Any]) -> None:
                if fault in ("429", "500", "503"):
                    headers = {"Retry-After": server.retry_after} if fault == "429" else {}
                    return self._send(int(fault), {"error": {"message": fault}}, headers)
                if fault == "drop":
                    self.close_connection = True
                    return None
                if fault == "timeout":
                    time.sleep(server.stall_s)
                if fault == "echo_key":
                    sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    message = f"key {sent} is not allowed here (seen: {sent[:10]}...)"
                    return self._send(400, {"error": {"message": message}})
                if fault == "malformed":
                    return self._send_raw(200, b'{"choices": [ {"text": "trunc')
                answer = server.answer(self.path, body)
                if fault == "short":
                    answer["choices"] = answer["choices"][:-1]
                self._send(200, _misshape(answer, fault))

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None):
                self._send_raw(status, json.dumps(payload).encode(), headers)

            def _send_raw(self, status: int, raw: bytes, headers: dict[str, str] | None = None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        return Handler


def _misshape(answer: dict[str, Any], fault: str | None) -> dict[str, Any]:
    """``answer`` with the field a wrong-shape fault names broken (unchanged otherwise)."""
    if fault == "usage_str":
        answer["usage"] = "lots of tokens"
    elif fault == "tokens_float":
        answer["usage"]["prompt_tokens"] = 2.5
    elif fault == "tokens_str":
        answer["usage"]["completion_tokens"] = "40"
    elif fault == "text_null":
        first = answer["choices"][0]
        if "message" in first:
            first["message"]["content"] = None
        else:
            first["text"] = None
    return answer
