"""The recorded llama-cpp-python server (``tests/test_http_graybox_replay.py``'s answers) as its
own process on a fixed port, so a test can kill it (SIGKILL) and start it again on that port.

``python tests/graybox_replay_server.py PORT`` prints ``ready`` once it listens.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).parent / "data" / "recorded" / "llamacpp_smollm2_wikimia.json"


def _key(method: str, path: str, body: Any) -> str:  # as test_http_graybox_replay keys them
    return json.dumps([method, path, body], sort_keys=True)


def serve(port: int) -> None:
    record = json.loads(RECORDED.read_text(encoding="utf-8"))
    answers = {
        _key(p["method"], p["path"], p["request"]): (p["status"], p["answer"])
        for p in record["pairs"]
    }

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            status, answer = answers.get(
                _key(method, self.path, body), (404, {"error": "not recorded"})
            )
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self._answer("POST")

        def do_GET(self) -> None:  # noqa: N802
            self._answer("GET")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
