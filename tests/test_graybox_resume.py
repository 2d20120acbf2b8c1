"""A gray-box run stopped mid-way resumes without asking any stored answer again (issue 36).

The server is the recorded llama-cpp-python 0.3.36 server (``tests/graybox_replay_server.py``:
the real answers ``tests/test_http_graybox_replay.py`` replays), run as its own process so it
can be killed. Between it and ``imprint run`` sits a recording proxy, a real HTTP server on
127.0.0.1 that forwards each request and counts the POSTs by body. Two stops: the client killed
(SIGKILL) right after the proxy forwarded its k-th answer, and the server killed after its k-th
answer and started again on the same port. The rerun must send no POST whose answer the store
holds, and its scores must equal an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from json_handler import AnswerHandler

from imprint.backends.http_answer_store import answer_key

HERE = Path(__file__).parent
RECORDED = HERE / "data" / "recorded" / "llamacpp_smollm2_wikimia.json"
MODEL = "served-model"
EXACT = 49152
N_TEXTS = 8
IMPRINT = str(Path(sys.executable).with_name("imprint"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``graybox_replay_server.py`` on one port; ``kill()`` is SIGKILL, ``start()`` again."""

    def __init__(self) -> None:
        self.port, self.proc = _free_port(), None

    def start(self) -> None:
        script = str(HERE / "graybox_replay_server.py")
        self.proc = subprocess.Popen(
            [sys.executable, script, str(self.port)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


class Proxy:
    """Forwards every request to ``target``; counts the POSTs it answered, by body, and calls
    ``after(n)`` once the n-th POST answer has been sent back (502 when the target is down)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.posts: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.after: Callable[[int], None] = lambda n: None
        self._lock = threading.Lock()
        proxy = self

        class Handler(AnswerHandler):
            def answer(self, method: str) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    got = httpx.request(method, proxy.target + self.path, content=raw, timeout=60)
                    status, answer = got.status_code, got.content
                except httpx.TransportError:
                    status, answer = 502, b'{"error": "upstream down"}'
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                self.wfile.flush()
                if method == "POST" and status == 200:
                    with proxy._lock:
                        body = json.loads(raw)
                        proxy.posts[json.dumps(body, sort_keys=True)] += 1
                        proxy.bodies.append(body)
                        n = len(proxy.bodies)
                    proxy.after(n)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.posts.clear()
            self.bodies.clear()
        self.after = lambda n: None


@pytest.fixture(scope="module")
def server():
    running = Server()
    running.start()
    yield running
    running.kill()


@pytest.fixture(scope="module")
def proxy(server):
    forward = Proxy(f"http://127.0.0.1:{server.port}")
    yield forward
    forward.httpd.shutdown()
    forward.httpd.server_close()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    record = json.loads(RECORDED.read_text(encoding="utf-8"))
    rows = record["texts"][: N_TEXTS // 2] + record["texts"][-N_TEXTS // 2 :]
    path = tmp_path_factory.mktemp("data") / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _command(api: str, data: Path, out: Path, cache: Path) -> list[str]:
    options = (
        f"tokenizer=smollm2-135m,top_logprobs={EXACT},max_top_logprobs={EXACT},"
        "topk_moments=true,concurrency=1,key_env=,max_retries=1"
    )
    return [
        IMPRINT, "--quiet", "run", "--model", f"openai-logprobs:{MODEL}", "--api-base", api,
        "--model-args", options, "--data", str(data), "--attacks", "loss,zlib,min_k",
        "--no-blind", "--bootstrap", "20", "--shot-holdout", "0", "--out", str(out),
        "--cache", str(cache),
    ]  # fmt: skip


def _run(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _stored_keys(cache: Path) -> set[str]:
    with sqlite3.connect(cache) as conn:
        rows = conn.execute("SELECT key FROM request_results WHERE kind='response'").fetchall()
    return {key for (key,) in rows}


def _scores(out: Path) -> dict[str, list[Any]]:
    table = pq.read_table(out / "scores.parquet").to_pydict()
    order = sorted(range(len(table["text"])), key=table["text"].__getitem__)
    return {k: [v[i] for i in order] for k, v in table.items()}


@pytest.fixture(scope="module")
def uninterrupted(proxy, data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    proxy.reset()
    done = _run(_command(proxy.url, data, tmp / "out", tmp / "c.sqlite"))
    output, _ = done.communicate(timeout=900)
    assert done.returncode == 0, output
    posts = sum(proxy.posts.values())
    assert max(proxy.posts.values()) == 1, proxy.posts.most_common(2)  # nothing asked twice
    return _scores(tmp / "out"), posts


def _rerun_sends_nothing_stored(proxy, data, tmp: Path, uninterrupted) -> None:
    cache = tmp / "c.sqlite"
    stored = _stored_keys(cache)
    assert stored, "the stopped run stored no answer"
    proxy.reset()
    again = _run(_command(proxy.url, data, tmp / "out", cache))
    output, _ = again.communicate(timeout=900)
    assert again.returncode == 0, output
    resent = [
        b for b in proxy.bodies if answer_key(f"{proxy.url}#{MODEL}", "completions", b) in stored
    ]
    scores, whole_posts = uninterrupted
    print(f"\nstored before the rerun {len(stored)}, rerun POSTs {len(proxy.bodies)}, "
          f"uninterrupted run POSTs {whole_posts}, resent {len(resent)}")  # fmt: skip
    assert resent == []
    assert len(proxy.bodies) == whole_posts - len(stored)  # each answer asked once in all
    assert _scores(tmp / "out") == scores


def test_a_killed_client_resumes_without_asking_a_stored_answer(
    proxy, data, tmp_path, uninterrupted
):
    proxy.reset()
    client = _run(_command(proxy.url, data, tmp_path / "out", tmp_path / "c.sqlite"))
    k = 6  # the two probes, the context request, 3 texts

    def kill(n: int) -> None:
        if n == k:
            time.sleep(0.5)  # the answer reaches the client and is stored (or not: either way)
            client.send_signal(signal.SIGKILL)

    proxy.after = kill
    client.communicate(timeout=900)
    assert client.returncode == -signal.SIGKILL
    assert not (tmp_path / "out" / "scores.parquet").exists()
    _rerun_sends_nothing_stored(proxy, data, tmp_path, uninterrupted)


def test_a_killed_server_resumes_without_asking_a_stored_answer(
    server, proxy, data, tmp_path, uninterrupted
):
    proxy.reset()
    k = 5

    def kill(n: int) -> None:
        if n == k:
            server.kill()

    proxy.after = kill
    try:
        client = _run(_command(proxy.url, data, tmp_path / "out", tmp_path / "c.sqlite"))
        output, _ = client.communicate(timeout=900)
    finally:
        server.kill()
        server.start()
    assert client.returncode != 0 and "gave up" in output, output
    _rerun_sends_nothing_stored(proxy, data, tmp_path, uninterrupted)
