"""The recorded llama-cpp-python server (``tests/test_http_graybox_replay.py``'s answers): its
handler (used in-process by that test), and as its own process on a fixed port, so a test can
kill it (SIGKILL) and start it again on that port.

``python tests/graybox_replay_server.py PORT`` prints ``ready`` once it listens.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from json_handler import AnswerHandler

RECORDED = Path(__file__).parent / "data" / "recorded" / "llamacpp_smollm2_wikimia.json"


def _key(method: str, path: str, body: Any) -> str:
    return json.dumps([method, path, body], sort_keys=True)


def recorded_answers(record: dict[str, Any]) -> dict[str, tuple[int, Any]]:
    """(method, path, request body) key -> (status, answer) of a recording."""
    return {
        _key(p["method"], p["path"], p["request"]): (p["status"], p["answer"])
        for p in record["pairs"]
    }


def replay_handler(
    answers: dict[str, tuple[int, Any]], missed: list[str] | None = None
) -> type[BaseHTTPRequestHandler]:
    """A handler answering recorded requests with their recorded answers (404 otherwise, the
    request's key appended to ``missed``)."""

    class Handler(AnswerHandler):
        def answer(self, method: str) -> None:
            key = _key(method, self.path, self.read_json())
            if key not in answers and missed is not None:
                missed.append(key[:200])
            status, answer = answers.get(
                key, (404, {"error": "not recorded: re-run scripts/record_llamacpp.py"})
            )
            self.send_json(status, answer)

    return Handler


def serve(port: int) -> None:
    answers = recorded_answers(json.loads(RECORDED.read_text(encoding="utf-8")))
    httpd = ThreadingHTTPServer(("127.0.0.1", port), replay_handler(answers))
    print("ready", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
