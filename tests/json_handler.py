"""The request handler the tests' small loopback servers share: JSON in, JSON out, no log lines."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    def read_json(self) -> Any:
        """The request's JSON body, or None when it has none."""
        size = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(size)) if size else None

    def send_json(self, status: int, payload: Any) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:  # a test's output stays readable
        pass


class AnswerHandler(JSONHandler):
    """GET and POST both go to ``answer(method)`` (replays and proxies key on the method)."""

    def answer(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self.answer("POST")
