"""An HTTP server on 127.0.0.1 that answers ``POST /v1/completions`` as llama-cpp-python 0.3.x
does, computed by the real SmolLM2-135M (the ``smollm2-135m`` alias, float32, transformers).

Its ``logprobs`` object follows ``Llama._create_completion`` line by line (llama-cpp-python's
source, ``llama_cpp/llama.py``): with ``echo`` every prompt token gets the log-softmax of the
logits row at its own index (the row that predicts the NEXT token: shifted by one for a model
that adds no BOS), entry 0 is null; without ``echo`` the generated token gets the row that
predicts it. ``top_logprobs`` is a dict keyed by each candidate's text (bytes decoded with
``errors="ignore"``, special tokens as ``""``), filled best first, so among ids that render
alike the LAST (least likely) value stays; then the entry's own token's key is overwritten
with that token's value in the same row. ``logit_bias`` (ids as strings) is added to the
logits the greedy sampler reads, never to the reported log-probs. ``strip_bos``: the model
adds a BOS equal to the prompt's first token, which echo leaves out (then entries align).

The real server (``tests/llama_server.py``, built from PyPI) is preferred where it is built;
this one exists because building it takes about 23 minutes, and it reproduces the two things
the tests need: ids that render alike, and a forced token's log p by id.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from json_handler import JSONHandler


class LlamaCppLikeServer:
    """See the module docstring; ``with LlamaCppLikeServer() as s: s.base_url``."""

    def __init__(self, *, honour_bias: bool = True, strip_bos: bool = False) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from imprint.backends.models import materialize, resolve_model

        where = materialize(resolve_model("smollm2-135m")).location
        self.tokenizer = AutoTokenizer.from_pretrained(where)
        self.model = AutoModelForCausalLM.from_pretrained(where, torch_dtype=torch.float32).eval()
        self.honour_bias, self.strip_bos = honour_bias, strip_bos
        self.posts: list[dict[str, Any]] = []
        self._texts = [self._render(i) for i in range(len(self.tokenizer))]
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> LlamaCppLikeServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _render(self, token_id: int) -> str:
        text = self.tokenizer.decode([token_id], skip_special_tokens=True)
        return str(text).replace("\ufffd", "")  # bytes of a split character: ignored

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        import torch

        prompt, k = str(body["prompt"]), body.get("logprobs")
        ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        with self._lock, torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0].double().numpy()
        rows = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)  # log-softmax
        last = logits[-1].copy()
        if self.honour_bias:
            for token, bias in (body.get("logit_bias") or {}).items():
                last[int(token)] += float(bias)
        generated = int(np.argmax(last))
        out: dict[str, Any] = {
            "index": 0,
            "text": self._texts[generated],
            "finish_reason": "length",
        }
        if k is not None:
            out["logprobs"] = self._logprobs(prompt, ids, generated, rows, int(k), body.get("echo"))
        if body.get("echo"):
            out["text"] = prompt + out["text"]
        return {"object": "text_completion", "model": body.get("model"), "choices": [out]}

    def _logprobs(self, prompt, ids, generated, rows, k, echo) -> dict[str, Any]:
        if echo:
            tokens = ids[1:] if self.strip_bos else list(ids)
            # entry i: the logits row at index i of the evaluated prompt (BOS included), so
            # without a BOS it predicts token i + 1; no row for the generated token
            entries = list(range(len(tokens)))
            base = 0
        else:
            tokens, entries, base = [generated], [len(ids) - 1], len(prompt)
        out: dict[str, list[Any]] = {
            "tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []
        }  # fmt: skip
        offset = base
        for token, row_index in zip(tokens, entries, strict=True):
            row = rows[row_index]
            text = self._texts[token]
            order = np.lexsort((np.arange(len(row)), row))[::-1][:k]  # best first, as sorted()
            top = {self._texts[i]: float(row[i]) for i in order}  # the last of alike ids stays
            top.update({text: float(row[token])})
            out["tokens"].append(text)
            out["text_offset"].append(offset)
            out["token_logprobs"].append(float(row[token]))
            out["top_logprobs"].append(top)
            offset += len(text)
        if echo and out["tokens"]:
            out["token_logprobs"][0] = None
            out["top_logprobs"][0] = None
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                model = {"id": "served-model", "object": "model", "owned_by": "me"}
                self.send_json(200, {"object": "list", "data": [model]})

            def do_POST(self) -> None:  # noqa: N802
                body = self.read_json()
                server.posts.append(body)
                self.send_json(200, server.complete(body))

        return Handler
