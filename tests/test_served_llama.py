"""What llama-cpp-python's real server does, as the served docs say it (issue 36).

The server (``tests/llama_server.py``: llama-cpp-python 0.3.36 on SmolLM2-135M-Instruct Q4_1,
127.0.0.1) serves one request at a time, which is why the docs' gray-box command says
``concurrency=1``; it answers any model name with the model it serves, so imprint refuses a name
``GET /v1/models`` does not list before any completion. Skipped, loudly, only when
llama-cpp-python is not installed (``./scripts/setup --served``).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from llama_server import NAME, LlamaServer
from typer.testing import CliRunner

from imprint.cli import app


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    with LlamaServer(tmp_path_factory.mktemp("llama")) as server:
        yield server


def _complete(base_url: str, prompt: str, done: list[float], started: float) -> None:
    body = {"model": NAME, "prompt": prompt, "max_tokens": 12, "temperature": 0}
    httpx.post(f"{base_url}/completions", json=body, timeout=300).raise_for_status()
    done.append(time.monotonic() - started)


def test_the_server_answers_one_request_at_a_time(llama) -> None:
    """4 warm requests sent together finish one after another, each about one request's time
    after the last (a server that computes them together finishes them together)."""
    warm: list[float] = []
    _complete(llama.base_url, "The harbour of", warm, time.monotonic())  # warm it up
    done: list[float] = []
    started = time.monotonic()
    threads = [
        threading.Thread(
            target=_complete, args=(llama.base_url, f"Fact {i}: the river", done, started)
        )
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.sort()
    gaps = [b - a for a, b in zip(done, done[1:], strict=False)]
    assert len(done) == 4 and min(gaps) > 0.4 * done[0], done


def test_a_model_name_it_does_not_list_is_refused_before_any_completion(
    llama, tmp_path, monkeypatch
) -> None:
    data = tmp_path / "t.jsonl"
    data.write_text(
        '{"text": "The bridge fell.", "label": 1}\n{"text": "Our team won.", "label": 0}\n'
    )
    sent = llama.posts()
    for model in ("openai-logprobs:my-modle", "my-modle"):  # gray-box, black-box
        args = ["run", "--model", model, "--api-base", llama.base_url, "--data", str(data)]
        args += ["--attacks", "loss" if model.startswith("openai") else "samia"]
        result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / model[-8:])])
        flat = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert "'my-modle' is not served" in flat and f"'{NAME}'" in flat
    assert llama.posts() == sent
