"""The run's end line counts the POSTs a served target was sent, not only the requests (issue 36).

llama-cpp-python ignores ``n`` (one choice per request), so SaMIA's 2 continuations of each of 4
texts are 4 requests but 8 POSTs. The hostile tester's black-box run printed "target sample 4
requests executed" while the manifest's ``requests.target.sample.sent`` said 8; the end line now
says the POSTs and the answers read back from the store, from the manifest's own numbers. Runs
``imprint run`` as a user does (its output piped) against the real server on 127.0.0.1
(``tests/llama_server.py``; skipped, loudly, only without llama-cpp-python).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llama_server import NAME, LlamaServer

TEXTS = [("The bridge fell.", 1), ("Birds sang today.", 1), ("Our team won.", 0),
         ("She painted walls.", 0)]  # fmt: skip


def _run(base_url: str, tmp_path: Path, out: str) -> tuple[str, dict]:
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in TEXTS))
    imprint = str(Path(sys.executable).with_name("imprint"))
    args = [imprint, "run", "--api-base", base_url, "--model", NAME, "--data", str(data),
            "--attacks", "samia", "--param", "samia.n_samples=2", "--shot-holdout", "0",
            "--n-bootstrap", "20", "--cache", str(tmp_path / "cache.sqlite"),
            "--out", str(tmp_path / out)]  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": "unused-by-this-server"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    manifest = json.loads((tmp_path / out / "manifest.json").read_text())
    return " ".join((done.stdout + done.stderr).split()), manifest


def test_the_end_line_says_the_posts_sent_and_the_answers_read_back(tmp_path) -> None:
    with LlamaServer(tmp_path) as server:
        said, manifest = _run(server.base_url, tmp_path, "first")
        posts = server.posts()
        # the same run again into a new folder: the store answers every request, nothing sent
        again, stored = _run(server.base_url, tmp_path, "second")
        assert server.posts() == posts
    counts = manifest["requests"]["target"]["sample"]
    assert counts["executed"] == 4 and counts["sent"] == posts == 8, (counts, posts)
    assert manifest["models"]["target"]["usage"]["requests"] == 8
    assert "target sample 4 requests executed (8 POSTs sent, 0 read back from" in said, said
    assert "target sample 0 requests executed, 4 answered by the store" in again, again
    assert stored["requests"]["target"]["sample"].get("sent") is None
