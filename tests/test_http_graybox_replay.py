"""Gray-box attacks through a served model equal the local ``hf`` backend's (issue 22).

REPLAYS RECORDED ANSWERS OF A REAL SERVER: ``tests/data/recorded/llamacpp_smollm2_wikimia.json``
holds the HTTP answers llama-cpp-python's OpenAI-compatible server (``python -m
llama_cpp.server``, built from PyPI; version in the file) gave imprint's ``openai-logprobs``
client, serving the SmolLM2-135M-Instruct Q4_1 GGUF whose de-quantised weights the
``smollm2-135m`` alias loads locally. Building that server compiles llama.cpp (23 minutes here),
too slow for CI, so ``scripts/record_llamacpp.py`` recorded the answers once and this test serves
them from a stdlib HTTP server on 127.0.0.1 keyed by the exact request body (a request that was
not recorded gets a 404: re-record after changing what the client sends).

The answers are stored REDUCED (a genuine subset of each real answer): ``tokens``,
``text_offset``, ``token_logprobs`` and the generated text as returned; each ``top_logprobs``
entry cut from all 49,152 candidates to the best 10 plus the candidates named like the tokens at
and after that position (the values are the server's). So loss, zlib and Min-K% read exactly
what the server said; ``min_k_pp_topk`` (Min-K%++ from top-k moments, an approximation named as
such) sees the best ~10 candidates, not the 49,152 the server gave.

The server shifts SmolLM2's prompt log-probs by one token: the test pins that the probe detects
it and the client corrects it, and that reading the answers as aligned would be wrong.
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from graybox_replay_server import recorded_answers, replay_handler
from scipy.stats import spearmanr
from typer.testing import CliRunner

from imprint.attacks.base import get_attack_class
from imprint.backends.alignment import EchoAnswer
from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
from imprint.cli import app
from imprint.run.http_plan import plan_lines

RECORDED = Path(__file__).parent / "data" / "recorded" / "llamacpp_smollm2_wikimia.json"
MODEL = "served-model"
EXACT = 49152  # SmolLM2's vocabulary: a shifted answer read from every candidate is exact
START = "<|endoftext|>"
#: attack column through the server -> the local hf column it estimates, and the bounds held
#: (max |difference| of the scores, Spearman of the two columns over the texts)
BOUNDS = {  # measured on the 42 recorded texts: 0.060 / 0.9961, 0.0004 / 0.9992, 0.176 / 0.9966
    "loss": ("loss", 0.1, 0.99),
    "zlib": ("zlib", 0.002, 0.99),
    "min_k": ("min_k", 0.3, 0.99),
    # approximate by design, here from the ~10 candidates the fixture keeps (Spearman 0.454):
    # only its direction is asserted; its scale differs (sigma over 10 candidates is small)
    "min_k_pp_topk": ("min_k_pp", None, 0.3),
}


class Replay:
    """A real HTTP server on 127.0.0.1 answering recorded requests with the recorded answers."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.answers = recorded_answers(record)
        self.missed: list[str] = []
        self.httpd = ThreadingHTTPServer(
            ("127.0.0.1", 0), replay_handler(self.answers, self.missed)
        )
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def replay(record):
    server = Replay(record)
    yield server
    server.close()


def _args(model: list[str], data: Path, attacks: str, out: Path) -> list[str]:
    return [
        "run", *model, "--data", str(data), "--attacks", attacks, "--no-blind",
        "--bootstrap", "20", "--shot-holdout", "0", "--out", str(out),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def runs(record, replay, tmp_path_factory):
    """The same texts scored through the replayed server and by the local hf backend, both
    by ``imprint run`` (the normal run path; the same start token, auto: <|endoftext|>)."""
    tmp = tmp_path_factory.mktemp("replay")
    data = tmp / "texts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in record["texts"]), encoding="utf-8")
    served = ["--model", f"openai-logprobs:{MODEL}", "--api-base", replay.url, "--model-args"]
    served.append(
        f"tokenizer=smollm2-135m,top_logprobs={EXACT},max_top_logprobs={EXACT},"
        "topk_moments=true,concurrency=1,key_env="
    )
    attacks = ",".join(BOUNDS)
    out = {}
    for name, model, atk in (
        ("served", served, attacks),
        ("hf", ["--model", "smollm2-135m"], ",".join(v[0] for v in BOUNDS.values())),
    ):
        args = _args(model, data, atk, tmp / name)
        result = CliRunner().invoke(app, [*args, "--cache", str(tmp / f"{name}.sqlite")])
        assert result.exit_code == 0, result.output
        out[name] = tmp / name
    assert not replay.missed, replay.missed
    return out


def _scores(folder: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(folder / "scores.parquet").to_pydict()
    order = np.argsort(table["text"])  # the same texts, in one order
    return {k: np.asarray(v)[order] for k, v in table.items() if k not in ("id", "text", "meta")}


def test_the_run_detects_and_corrects_the_shift_by_one(runs, record):
    target = json.loads((runs["served"] / "manifest.json").read_text())["models"]["target"]
    assert target["mode"] == "echo"
    assert target["forms_probed"]["prompt_logprobs"] == "no prompt_logprobs in the answer"
    assert target["alignment"]["shift"] == 1 and "Boston" in target["alignment"]["example"]
    assert target["served_models"] == [MODEL]
    assert record["server"].startswith("llama-cpp-python 0.3.36")


def test_scores_through_the_server_equal_the_local_hf_backend_per_attack(runs, record):
    served, local = _scores(runs["served"]), _scores(runs["hf"])
    n = len(record["texts"])
    head = "| attack (served) | vs hf | max abs diff | Spearman | texts |\n|---|---|---|---|---|"
    lines, measured = [head], {}
    for col, (ref, _, _) in BOUNDS.items():
        a, b = served[col], local[ref]
        assert np.isfinite(a).all() and np.isfinite(b).all(), col
        measured[col] = float(np.abs(a - b).max()), float(spearmanr(a, b).statistic)
        lines.append(f"| {col} | {ref} | {measured[col][0]:.4f} | {measured[col][1]:.4f} | {n} |")
    print("\n" + "\n".join(lines))
    assert n >= 40 and len(served["loss"]) == n
    for col, (_, max_diff, min_rho) in BOUNDS.items():
        diff, rho = measured[col]
        assert max_diff is None or diff < max_diff, (col, diff)
        assert rho > min_rho, (col, rho)


def test_reading_the_answers_as_aligned_would_be_wrong(record, runs):
    """The server's own token_logprobs (entry t = log p of token t under the distribution that
    predicts token t + 1) are far from the local model's log-probs."""
    local = _scores(runs["hf"])["loss"]
    naive = []
    for row in sorted(record["texts"], key=lambda r: r["text"]):
        pair = next(
            p for p in record["pairs"]
            if (p["request"] or {}).get("echo") and p["request"]["prompt"] == START + row["text"]
        )  # fmt: skip
        answer = EchoAnswer.from_choice(pair["answer"]["choices"][0], "recorded")
        m = answer.prompt_entries(row["text"])
        naive.append(float(np.mean([v for v in answer.logprobs[1:m] if v is not None])))
    assert float(np.abs(np.array(naive) - local).mean()) > 1.0


def test_the_probe_alone_tells_the_form_and_the_shift(replay):
    options = LogprobOptions(
        tokenizer="smollm2-135m", top_logprobs=EXACT, max_top_logprobs=EXACT, key_env=None
    )
    backend = HTTPLogprobBackend(replay.url, MODEL, options)
    assert backend.mode == "echo" and backend.alignment is not None
    evidence = backend.alignment.describe()
    assert evidence["shift"] == 1
    assert evidence["argmax_is_next_token"] > 0.7 * evidence["probe_positions"]
    assert evidence["argmax_is_this_token"] < 0.1 * evidence["probe_positions"]

    attacks = [get_attack_class("loss")(), get_attack_class("lowercase")()]
    (line,) = plan_lines(attacks, ["a", "b", "c"], backend)
    assert "(echo): 3 text(s) x 2 pass(es) = 6, plus 1 per distinct context" in line
