"""vLLM's ``prompt_logprobs`` read by the ``openai-logprobs`` backend (issue 22).

NOT a live vLLM: vLLM's server needs a CUDA build that cannot run here. The server below is a
stdlib HTTP server on 127.0.0.1 that answers ``POST /v1/completions`` in the shape vLLM's
OpenAI-compatible server defines (``CompletionResponseChoice.prompt_logprobs``: per prompt token
``null`` for the first, else ``{"<token id>": {"logprob", "rank", "decoded_token"}}`` holding the
actual token and the ``k`` best; ``prompt_token_ids`` when ``return_token_ids`` is asked, as newer
versions do), with numbers computed by the real SmolLM2-135M through transformers. So what is
verified: the backend probes the form, records it, and reads that shape exactly (scores equal the
local ``hf`` backend's); what is not: that a given vLLM version answers in this shape.
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from json_handler import JSONHandler
from typer.testing import CliRunner

from imprint.backends.base import ScoreRequest
from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
from imprint.cli import app
from imprint.errors import ConfigError

MODEL = "my-model"
TEXTS = [
    ("The Eiffel Tower was completed in 1889 for the World's Fair.", 1),
    ("A quiet river runs past the old mill near the village.", 0),
    ("Photosynthesis turns light, water and carbon dioxide into sugar.", 1),
    ("Our new office opens next week beside the central station.", 0),
]


class VLLMShaped:
    """Answers in vLLM's prompt_logprobs shape from the real model; ``shift`` misaligns the
    entries by one (to see it refused), ``ids`` adds ``prompt_token_ids``."""

    def __init__(self, lm: tuple, *, ids: bool = True, shift: int = 0) -> None:
        self.tok, self.model = lm
        self.ids, self.shift = ids, shift
        self.bodies: list[dict] = []
        server = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = self.read_json()
                server.bodies.append(body)
                self.send_json(200, server.answer(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, body: dict) -> dict:
        ids = self.tok(body["prompt"])["input_ids"]  # vLLM adds the special tokens
        with torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        entries: list[dict | None] = [None]
        for t in range(1, len(ids)):
            row = lp[min(t - 1 + self.shift, len(ids) - 1)]
            keep = [*torch.topk(row, body["prompt_logprobs"]).indices.tolist(), ids[t]]
            entries.append({
                str(i): {
                    "logprob": float(row[i]),
                    "rank": int((row > row[i]).sum()) + 1,
                    "decoded_token": self.tok.decode([i]),
                }
                for i in dict.fromkeys(keep)
            })  # fmt: skip
        choice = {
            "index": 0, "text": self.tok.decode([int(lp[-1].argmax())]), "logprobs": None,
            "finish_reason": "length", "stop_reason": None, "prompt_logprobs": entries,
        }  # fmt: skip
        if self.ids and body.get("return_token_ids"):
            choice["prompt_token_ids"] = ids
        usage = {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1}
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": MODEL,
                "choices": [choice], "usage": usage}  # fmt: skip

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def lm():
    """SmolLM2-135M's de-quantised weights (what the hf backend loads) and tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from imprint.backends.models import materialize, resolve_model

    where = materialize(resolve_model("smollm2-135m")).location
    model = AutoModelForCausalLM.from_pretrained(where, torch_dtype=torch.float32)
    return AutoTokenizer.from_pretrained(where), model.eval()


@pytest.fixture(scope="module")
def vllm(lm):
    server = VLLMShaped(lm)
    yield server
    server.close()


@pytest.fixture(scope="module")
def local():
    from imprint.backends.hf import HFLogprobBackend

    return HFLogprobBackend("smollm2-135m").score([ScoreRequest(t) for t, _ in TEXTS])


def _options(**kw) -> LogprobOptions:
    return LogprobOptions(tokenizer="smollm2-135m", concurrency=1, key_env=None, **kw)


def test_prompt_logprobs_are_probed_first_and_read_by_token_id(vllm, local):
    backend = HTTPLogprobBackend(vllm.url, MODEL, _options())
    served = backend.score([ScoreRequest(t) for t, _ in TEXTS])
    info = backend.describe()
    assert info["mode"] == "prompt_logprobs" and info["forms_probed"] == {
        "prompt_logprobs": "answered"
    }
    assert info["alignment"]["shift"] == 0 and not any("echo" in b for b in vllm.bodies)
    for s, h in zip(served, local, strict=True):
        assert (s.token_ids == h.token_ids).all()
        assert np.abs(s.logp - h.logp).max() < 1e-3
        assert (s.rank == h.rank).all() and (s.argmax == h.argmax).all()
        assert np.isnan(s.mean_logp).all()  # no full-vocabulary moments from top-k


def test_without_prompt_token_ids_the_local_tokenizer_gives_the_ids(lm, local):
    server = VLLMShaped(lm, ids=False)
    try:
        backend = HTTPLogprobBackend(server.url, MODEL, _options())
        (s,) = backend.score([ScoreRequest(TEXTS[0][0])])
    finally:
        server.close()
    assert backend.mode == "prompt_logprobs" and np.abs(s.logp - local[0].logp).max() < 1e-3


def test_misaligned_prompt_logprobs_are_refused_with_the_evidence(lm):
    server = VLLMShaped(lm, shift=1)
    try:
        with pytest.raises(ConfigError, match=r"do not predict the prompt's tokens \(of \d+"):
            HTTPLogprobBackend(server.url, MODEL, _options())
    finally:
        server.close()


def test_the_run_records_the_form_in_the_manifest(vllm, tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in TEXTS))
    out = tmp_path / "run"
    args = ["run", "--model", f"openai-logprobs:{MODEL}", "--api-base", vllm.url]
    args += ["--data", str(data), "--attacks", "loss,min_k", "--no-blind", "--bootstrap", "20"]
    args += ["--shot-holdout", "0", "--model-args", "tokenizer=smollm2-135m,key_env=", "--out"]
    result = CliRunner().invoke(app, [*args, str(out)])
    assert result.exit_code == 0, result.output
    target = json.loads((out / "manifest.json").read_text())["models"]["target"]
    assert target["mode"] == "prompt_logprobs" and target["served_models"] == [MODEL]
    assert np.isfinite(pq.read_table(Path(out) / "scores.parquet").to_pydict()["loss"]).all()


def test_a_server_without_either_form_names_both():
    class Plain(JSONHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(404)
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            self.read_json()
            self.send_json(200, {"choices": [{"text": "x", "index": 0}]})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        with pytest.raises(ConfigError, match=r"no logprobs object.*prompt_logprobs: no prompt"):
            HTTPLogprobBackend(url, MODEL, LogprobOptions(key_env=None))
        with pytest.raises(ConfigError, match="form=prompt_logprobs asked"):
            HTTPLogprobBackend(url, MODEL, LogprobOptions(key_env=None, form="prompt_logprobs"))
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_model_the_server_does_not_list_is_refused_before_any_completion(vllm):
    sent = len(vllm.bodies)
    with pytest.raises(ConfigError, match=r"'other-model' is not served .* lists 'my-model'"):
        HTTPLogprobBackend(vllm.url, "other-model", _options())
    assert len(vllm.bodies) == sent
