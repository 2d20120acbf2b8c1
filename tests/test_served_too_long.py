"""A text longer than a real server's context window (issue 36, tester): llama-cpp-python
refuses it with 400 "maximum context length", and the run stops naming the fix (the served
backend takes no --max-length: --truncate, or a longer --n_ctx), never scoring it silently.
Skipped, loudly, only when llama-cpp-python is not installed (``./scripts/setup --served``)."""

from __future__ import annotations

import json

import pytest
from llama_server import NAME, LlamaServer
from typer.testing import CliRunner

from imprint.cli import app


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    with LlamaServer(tmp_path_factory.mktemp("llama")) as server:
        yield server


def test_a_text_past_the_context_window_stops_the_run_naming_the_fix(llama, tmp_path) -> None:
    long = " ".join(["The quick brown fox jumps over the lazy dog."] * 300)  # ~3,000 tokens
    rows = [{"text": long, "label": 0}, {"text": "Our team won the cup.", "label": 1}]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["run", "--model", f"openai-logprobs:{NAME}", "--api-base", llama.base_url]
    args += ["--model-args", "tokenizer=smollm2-135m,concurrency=1,max_retries=0"]
    args += ["--data", str(data), "--attacks", "loss", "--no-blind", "--bootstrap", "20"]
    args += ["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite")]
    result = CliRunner().invoke(app, args)
    flat = " ".join(result.output.split())
    assert result.exit_code != 0, result.output
    assert "maximum context length" in flat, result.output
    assert "--truncate N words" in flat and "--n_ctx" in flat, result.output
    assert not (tmp_path / "out" / "scores.parquet").exists()
