"""Record llama-cpp-python's real HTTP answers to imprint's gray-box client, for replay in CI.

Starts ``python -m llama_cpp.server`` on 127.0.0.1 serving a GGUF file, puts a recording proxy
in front of it, and drives imprint's ``openai-logprobs`` backend through the proxy: the alignment
probe, then fixed texts (WikiMIA texts of both labels, a non-Latin text), then the
CLI command that ``tests/test_http_graybox_replay.py`` runs. Every request body and the server's
answer, byte for byte as JSON, go to ``tests/data/recorded/<name>.json`` with the server's version,
the GGUF file's digest and the date. The replay test serves these answers from a stdlib HTTP
server; they are real answers of a real server, not hand-made ones.

Building the server from PyPI (``pip install 'llama-cpp-python[server]'``) compiles llama.cpp:
23 minutes on 2 busy cores, too slow for CI, hence record + replay.

    nice -n 15 python scripts/record_llamacpp.py --python /tmp/llamavenv/bin/python \\
        --gguf smollm2-135m --name llamacpp_smollm2
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "recorded"
NON_LATIN = "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。Москва — столица России."


def fixed_texts(n_per_label: int = 1) -> list[str]:
    """The texts the replay test scores: WikiMIA-32 of both labels and a non-Latin text (few:
    on this project's shared CPU a full-vocabulary answer took minutes)."""
    path = Path(os.environ.get("IMPRINT_DATA_DIR", "/work/shared/data")) / "wikimia"
    rows = [json.loads(line) for line in (path / "WikiMIA_length32.jsonl").open()]
    picked = [r["input"] for r in rows if r["label"] == 1][:n_per_label]
    picked += [r["input"] for r in rows if r["label"] == 0][:n_per_label]
    return [*picked, NON_LATIN]


CLI_ATTACKS = "loss,zlib,min_k,min_k_pp_topk"
EXACT = 49152  # SmolLM2's vocabulary: every candidate, so a shifted answer is exact


def write_cli_data(path: Path) -> None:
    """The WikiMIA texts of :func:`fixed_texts`, with their labels, as a jsonl file."""
    root = Path(os.environ.get("IMPRINT_DATA_DIR", "/work/shared/data")) / "wikimia"
    rows = [json.loads(line) for line in (root / "WikiMIA_length32.jsonl").open()]
    keep = set(fixed_texts())
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            if r["input"] in keep:
                f.write(json.dumps({"text": r["input"], "label": r["label"]}) + "\n")


def cli_args(api_base: str, data: Path, out: str) -> list[str]:
    """``imprint run`` through the server: the command the replay test runs."""
    return [
        "run", "--model", "openai-logprobs:served-model", "--api-base", api_base,
        "--data", str(data), "--attacks", CLI_ATTACKS, "--no-blind", "--bootstrap", "20",
        "--model-arg", "tokenizer=smollm2-135m", "--model-arg", "topk_moments=true",
        "--model-arg", "concurrency=1", "--model-arg", f"max_top_logprobs={EXACT}",
        "--model-arg", "timeout=1800",
        "--cache", f"{out}/cache.sqlite", "--out", f"{out}/run",
    ]  # fmt: skip


KEEP = 20  # candidates kept per position in recordings of answers with more


def trim(answer: dict) -> tuple[dict, dict]:
    """An answer with more than :data:`KEEP` candidates per position, cut to the best KEEP plus
    the candidates named like the tokens at and after that position (what the client reads);
    the values are the server's, unchanged. A full-vocabulary answer is ~1.4 MB per token."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    lp = choices[0].get("logprobs") if choices and isinstance(choices[0], dict) else None
    tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
    if not tops or max(len(t or {}) for t in tops) <= KEEP:
        return answer, {}
    size = len(json.dumps(answer))
    tokens = lp["tokens"]
    for i, top in enumerate(tops):
        if top:
            best = sorted(top, key=top.__getitem__, reverse=True)[:KEEP]
            named = [t for t in tokens[i : i + 2] if t in top]
            tops[i] = {k: top[k] for k in dict.fromkeys([*best, *named])}
    note = f"top_logprobs cut to the best {KEEP} plus the tokens at and after each position"
    return answer, {"trimmed": f"{note}; values unchanged; full answer {size} bytes"}


def cli_fields() -> dict:
    """The replay test's CLI command (placeholders {api_base}, {data}, {out}) and its data."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        write_cli_data(Path(tmp) / "t.jsonl")
        rows = [json.loads(line) for line in (Path(tmp) / "t.jsonl").open()]
    return {"cli_args": cli_args("{api_base}", Path("{data}"), "{out}"), "cli_data": rows}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Recorder:
    """A proxy to ``upstream`` that keeps every (request, answer) pair."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.pairs, self.lock = upstream, list[dict](), threading.Lock()
        self.seen: dict[str, tuple[int, bytes]] = {}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, method: str) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else None
                req = urllib.request.Request(
                    recorder.upstream + self.path, data=raw, method=method,
                    headers={"content-type": "application/json"},
                )  # fmt: skip
                request = json.loads(raw) if raw else None
                key = json.dumps([method, self.path, request], sort_keys=True)
                with recorder.lock:
                    seen = recorder.seen.get(key)
                if seen is not None:  # asked again (the CLI run): the answer already recorded
                    status, body = seen
                else:
                    try:
                        with urllib.request.urlopen(req, timeout=1800) as resp:
                            status, body = resp.status, resp.read()
                    except urllib.error.HTTPError as err:
                        status, body = err.code, err.read()
                    answer, note = trim(json.loads(body))
                    with recorder.lock:
                        recorder.seen[key] = (status, body)
                        recorder.pairs.append({
                            "method": method, "path": self.path, "request": request,
                            "status": status, "answer": answer, **note,
                        })  # fmt: skip
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self._forward("POST")

            def do_GET(self) -> None:  # noqa: N802
                self._forward("GET")

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def start_server(python: str, gguf: str, alias: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [
        python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", alias,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2",
    ]  # fmt: skip
    log = open(f"/tmp/llama-server-{port}.log", "wb")  # noqa: SIM115 (lives with the server)
    # to a file: a pipe nobody reads fills with llama.cpp's log and blocks the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return proc
        except OSError:
            if proc.poll() is not None:
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                raise SystemExit(f"server exited: {tail}") from None
            time.sleep(1)
    proc.kill()
    raise SystemExit("server did not start in 300 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="python with llama_cpp installed")
    ap.add_argument("--gguf", default="smollm2-135m", help="alias or GGUF path")
    ap.add_argument("--name", default="llamacpp_smollm2")
    ap.add_argument("--tokenizer", default="smollm2-135m")
    ap.add_argument("--cli", action="store_true", help="also record the replay test's CLI run")
    args = ap.parse_args()
    from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
    from imprint.backends.models import ALIASES

    gguf = ALIASES[args.gguf]() if args.gguf in ALIASES else args.gguf
    version = subprocess.run(
        [args.python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    port, proxy_port = free_port(), free_port()
    server = start_server(args.python, gguf, "served-model", port)
    recorder = Recorder(f"http://127.0.0.1:{port}")
    proxy = ThreadingHTTPServer(("127.0.0.1", proxy_port), recorder.handler())
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{proxy_port}/v1"
    try:
        started = time.time()
        from imprint.backends.base import ScoreRequest

        texts = fixed_texts()
        # the WikiMIA texts exactly (every candidate when one is missing); the non-Latin one
        # with 5 candidates and no second request
        for cap, part in ((EXACT, texts[:-1]), (5, texts[-1:])):
            options = LogprobOptions(
                tokenizer=args.tokenizer, concurrency=1, max_top_logprobs=cap, timeout=1800
            )
            backend = HTTPLogprobBackend(base, "served-model", options)
            for text in part:
                t0 = time.time()
                try:
                    backend.score([ScoreRequest(text)])
                    print(f"scored {text[:30]!r} in {time.time() - t0:.0f} s", flush=True)
                except Exception as err:  # recorded as it is: the test asserts the same refusal
                    print(f"refused {text[:30]!r}: {err}", flush=True)
        if args.cli:  # the replay test's CLI run, so every body it sends is recorded
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "texts.jsonl"
                write_cli_data(data)
                cmd = [str(Path(sys.executable).parent / "imprint"), *cli_args(base, data, tmp)]
                subprocess.run(cmd, check=False)
        elapsed = time.time() - started
    finally:
        proxy.shutdown()
        server.terminate()
        server.wait(30)
    record = {
        "what": "real HTTP answers of llama-cpp-python's OpenAI-compatible server, recorded by "
        "scripts/record_llamacpp.py; replayed by tests/test_http_graybox_replay.py",
        "server": f"llama-cpp-python {version} (python -m llama_cpp.server, n_ctx 2048)",
        "model_file": Path(gguf).name,
        "model_sha256": hashlib.sha256(Path(gguf).read_bytes()).hexdigest(),
        "recorded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recording_seconds": round(elapsed, 1),
        **cli_fields(),
        "pairs": recorder.pairs,
    }
    RECORDED.mkdir(parents=True, exist_ok=True)
    out = RECORDED / f"{args.name}.json"
    out.write_text(json.dumps(record, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{len(recorder.pairs)} answers -> {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
