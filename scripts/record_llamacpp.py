"""Record llama-cpp-python's real HTTP answers to imprint's gray-box client, for replay in CI.

Starts ``python -m llama_cpp.server`` on 127.0.0.1 serving a GGUF file (one server per worker),
puts a recording proxy in front of it, and drives imprint's ``openai-logprobs`` backend through
the proxy with every candidate asked (``top_logprobs = max_top_logprobs = 49152``, SmolLM2's
vocabulary: the server's answers are shifted by one, so a token's log p is read from the previous
entry's candidates, and only the full list always holds it). Requests: ``GET /v1/models``, the
alignment probe, the start token's next-token candidates, then one echo request per text.

Each answer is stored REDUCED, as a genuine subset of the real answer: ``tokens``,
``text_offset``, ``token_logprobs`` and the generated text unchanged; each ``top_logprobs`` entry
cut to its best :data:`KEEP` candidates plus the candidates named like the tokens at and after
that position (what the client reads under either alignment; the context-only answer keeps the
candidates named like any token of the recorded texts); values unchanged. A full answer is ~1.5
MB per token. Each (request, reduced answer) is written to ``--work/<sha>.json`` as soon as it
arrives, so a killed recording resumes where it stopped (nothing asked twice); ``--assemble``
then writes ``tests/data/recorded/<name>.json``, which ``tests/test_http_graybox_replay.py``
serves from a stdlib HTTP server: real answers of a real server, not hand-made ones.

Texts: WikiMIA-32 texts (both labels, file order) that hold no token text the server renders
ambiguously (" " is the rendering of 38 SmolLM2 ids, "" of 260: their candidates collide, and
imprint refuses such texts on a shifted server, see ``alignment.ambiguous_texts``).

Building the server from PyPI (``pip install 'llama-cpp-python[server]'``) compiles llama.cpp
(23 minutes on 2 busy cores, too slow for CI), hence record + replay:

    nice -n 10 python scripts/record_llamacpp.py --python /tmp/llamavenv/bin/python \\
        --texts 42 --workers 2 --work /tmp/served/rec
    python scripts/record_llamacpp.py --assemble --texts 42 --work /tmp/served/rec
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
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "recorded"
EXACT = 49152  # SmolLM2's vocabulary: every candidate, so a shifted answer is exact
KEEP = 10  # best candidates kept per position
MODEL = "served-model"


def _wikimia() -> list[dict]:
    path = Path(os.environ.get("IMPRINT_DATA_DIR", "/work/shared/data")) / "wikimia"
    return [json.loads(line) for line in (path / "WikiMIA_length32.jsonl").open()]


def pick_texts(n: int, tokenizer: object) -> list[dict]:
    """``n`` WikiMIA-32 rows, alternating labels in file order, without ambiguous tokens."""
    from imprint.backends.alignment import ambiguous_texts, local_token_texts

    amb = ambiguous_texts(tokenizer)
    clean = {0: [], 1: []}
    for row in _wikimia():
        if not set(local_token_texts(tokenizer, row["input"])) & set(amb):
            clean[row["label"]].append({"text": row["input"], "label": row["label"]})
    out = []
    for a, b in zip(clean[1], clean[0], strict=False):
        out += [a, b]
    if len(out) < n:
        raise SystemExit(f"only {len(out)} clean texts")
    return out[:n]


def reduce_answer(answer: object, keep_named: set[str]) -> tuple[object, dict]:
    """A genuine subset of ``answer``: see the module docstring."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    lp = choices[0].get("logprobs") if choices and isinstance(choices[0], dict) else None
    tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
    if not tops:
        return answer, {}
    size = len(json.dumps(answer))
    full = [len(top) if top else 0 for top in tops]
    cut(lp, keep_named)
    return answer, {
        "reduced": f"top_logprobs cut to the best {KEEP} plus the candidates the client reads; "
        f"values unchanged; full answer {size} bytes",
        "full_candidates_per_entry": full,
    }


def cut(lp: dict, keep_named: set[str]) -> None:
    """Each entry of ``lp["top_logprobs"]`` cut, in place, to its best :data:`KEEP` plus the
    candidates named like the tokens at and after it; a one-entry answer (the context alone:
    its candidates are the first token of every text) also keeps those named in
    ``keep_named``."""
    tokens, tops = lp["tokens"], lp["top_logprobs"]
    extra = list(keep_named) if len(tops) == 1 else []
    for i, top in enumerate(tops):
        if top:
            best = sorted(top, key=top.__getitem__, reverse=True)[:KEEP]
            named = [t for t in [*tokens[i : i + 2], *extra] if t in top]
            tops[i] = {k: top[k] for k in dict.fromkeys([*best, *named])}


def key_of(method: str, path: str, request: object) -> str:
    raw = json.dumps([method, path, request], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


class Recorder:
    """A proxy to ``upstream`` writing each (request, reduced answer) to ``work`` at once."""

    def __init__(self, upstream: str, work: Path, keep_named: set[str]) -> None:
        self.upstream, self.work, self.keep_named = upstream, work, keep_named

    def handler(self) -> type[BaseHTTPRequestHandler]:
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, method: str) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else None
                request = json.loads(raw) if raw else None
                file = rec.work / f"{key_of(method, self.path, request)}.json"
                if file.exists():  # resumed: the (reduced) answer recorded before
                    pair = json.loads(file.read_text(encoding="utf-8"))
                    status, body = pair["status"], json.dumps(pair["answer"]).encode()
                else:
                    req = urllib.request.Request(
                        rec.upstream + self.path, data=raw, method=method,
                        headers={"content-type": "application/json"},
                    )  # fmt: skip
                    t0 = time.time()
                    try:
                        with urllib.request.urlopen(req, timeout=7200) as resp:
                            status, body = resp.status, resp.read()
                    except urllib.error.HTTPError as err:
                        status, body = err.code, err.read()
                    answer, note = reduce_answer(json.loads(body), rec.keep_named)
                    pair = {"method": method, "path": self.path, "request": request,
                            "status": status, "seconds": round(time.time() - t0, 1),
                            "answer": answer, **note}  # fmt: skip
                    tmp = file.with_suffix(".part")
                    tmp.write_text(json.dumps(pair, ensure_ascii=False), encoding="utf-8")
                    tmp.replace(file)
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(python: str, gguf: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
    ]  # fmt: skip
    out = log.open("wb")  # to a file: a pipe nobody reads fills up and blocks the server
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return proc
        except OSError:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise SystemExit(f"server exited: {tail}") from None
            time.sleep(1)
    proc.kill()
    raise SystemExit("server did not start in 600 s")


def worker(
    args: argparse.Namespace, rows: list[dict], tokenizer: object, every: list[dict]
) -> None:
    """One server + proxy; scores ``rows`` one text at a time (resumable); the context-only
    answer keeps the candidates named like any token of ``every`` text (workers share it)."""
    from imprint.backends.alignment import local_token_texts
    from imprint.backends.base import ScoreRequest
    from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
    from imprint.backends.models import ALIASES

    gguf = ALIASES[args.gguf]() if args.gguf in ALIASES else args.gguf
    named = {t for r in every for t in local_token_texts(tokenizer, r["text"])}
    port, proxy_port = free_port(), free_port()
    server = start_server(args.python, gguf, port, args.work / f"server-{args.worker}.log")
    proxy = ThreadingHTTPServer(
        ("127.0.0.1", proxy_port), Recorder(f"http://127.0.0.1:{port}", args.work, named).handler()
    )
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{proxy_port}/v1"
    try:
        urllib.request.urlopen(f"{base}/models", timeout=60).read()
        options = LogprobOptions(
            top_logprobs=EXACT, max_top_logprobs=EXACT, tokenizer=args.tokenizer,
            topk_moments=True, concurrency=1, timeout=7200,
        )  # fmt: skip
        backend = HTTPLogprobBackend(base, MODEL, options)
        for i, row in enumerate(rows):
            t0 = time.time()
            try:
                backend.score([ScoreRequest(row["text"])])
                print(
                    f"[w{args.worker}] {i + 1}/{len(rows)} in {time.time() - t0:.0f} s", flush=True
                )
            except Exception as err:  # recorded as it is; reported, the next text goes on
                print(f"[w{args.worker}] {i + 1} refused: {err}", flush=True)
    finally:
        proxy.shutdown()
        server.terminate()
        server.wait(30)


def assemble(args: argparse.Namespace, rows: list[dict], tokenizer: object) -> None:
    from imprint.backends.alignment import local_token_texts

    pairs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.work.glob("*.json"))]
    asked = {(p["request"] or {}).get("prompt") for p in pairs if (p["request"] or {}).get("echo")}
    done = [r for r in rows if any(a and a.endswith(r["text"]) for a in asked)]
    print(f"{len(done)} of {len(rows)} texts recorded")
    rows = done
    named = {t for r in rows for t in local_token_texts(tokenizer, r["text"])}
    for pair in pairs:  # answers recorded before a fix of cut() kept more: cut them again
        choices = pair["answer"].get("choices") if isinstance(pair["answer"], dict) else None
        lp = choices[0].get("logprobs") if choices else None
        if isinstance(lp, dict) and lp.get("top_logprobs"):
            cut(lp, named)
    version = subprocess.run(
        [args.python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    from imprint.backends.models import ALIASES

    gguf = ALIASES[args.gguf]() if args.gguf in ALIASES else args.gguf
    record = {
        "what": "real HTTP answers of llama-cpp-python's OpenAI-compatible server, recorded by "
        "scripts/record_llamacpp.py and REDUCED (see 'reduced' per pair); replayed by "
        "tests/test_http_graybox_replay.py",
        "server": f"llama-cpp-python {version} (python -m llama_cpp.server, n_ctx 2048)",
        "model_file": Path(gguf).name,
        "model_sha256": hashlib.sha256(Path(gguf).read_bytes()).hexdigest(),
        "assembled": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recording_seconds": round(sum(p.get("seconds", 0) for p in pairs), 1),
        "texts": rows,
        "pairs": pairs,
    }
    RECORDED.mkdir(parents=True, exist_ok=True)
    out = RECORDED / f"{args.name}.json"
    out.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", "utf-8")
    print(f"{len(pairs)} answers -> {out} ({out.stat().st_size / 1e6:.2f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="python with llama_cpp installed")
    ap.add_argument("--gguf", default="smollm2-135m", help="alias or GGUF path")
    ap.add_argument("--name", default="llamacpp_smollm2_wikimia")
    ap.add_argument("--tokenizer", default="smollm2-135m")
    ap.add_argument("--texts", type=int, default=42)
    ap.add_argument("--workers", type=int, default=1, help="servers run side by side")
    ap.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument(
        "--reverse", action="store_true", help="one more worker: every text, last first (meets "
        "the others halfway; answers already recorded are served from --work)",
    )  # fmt: skip
    ap.add_argument("--work", type=Path, default=Path("/tmp/served/rec"))
    ap.add_argument("--assemble", action="store_true", help="write the fixture from --work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    from imprint.backends.http_logprobs import _load_tokenizer

    tokenizer = _load_tokenizer(args.tokenizer)
    rows = pick_texts(args.texts, tokenizer)
    if args.assemble:
        return assemble(args, rows, tokenizer)
    if args.reverse:
        args.worker = args.workers
        return worker(args, rows[::-1], tokenizer, rows)
    if args.worker >= 0:
        return worker(args, rows[args.worker :: args.workers], tokenizer, rows)
    procs = [
        subprocess.Popen([sys.executable, *sys.argv, "--worker", str(w)])
        for w in range(args.workers)
    ]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
