"""Ctrl-C keeps finished work (issue 37 item 3): token batches hold at most a few seconds of work
at the model's known rate, each is stored as it ends, and the interrupted command says what the
store kept; the same command then executes only what is missing."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import imprint.executors.local as local_executor
import imprint.run.estimate as estimate
from imprint.backends.base import LOGPROBS, Backend, TokenStats
from imprint.cli import app
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.runner import MIN_BATCH_TOKENS, RequestRunner
from imprint.requests.store import RequestStore


def _texts(n: int = 40, words: int = 60) -> list[str]:
    rng = np.random.default_rng(0)
    vocab = ["alpha", "river", "stone", "cloud", "seven", "market", "garden", "signal"]
    return [" ".join(rng.choice(vocab, size=words)) + f" n{i}" for i in range(n)]


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, tokens: int) -> list[int]:
    """Ctrl-C once ``tokens`` tokens of work are done: it lands inside the batch running then
    (whose results are lost), as a real one does. Returns the rows of each finished batch."""
    real = local_executor.run_local
    finished: list[int] = []
    done = 0

    def run_local(kind, backend, batch, advance):
        nonlocal done
        if done + batch.units > tokens:
            raise KeyboardInterrupt
        results = real(kind, backend, batch, advance)
        done += batch.units
        finished.append(len(batch.requests))
        return results

    monkeypatch.setattr(local_executor, "run_local", run_local)
    return finished


class _Words(Backend):
    """Whitespace tokens, one token per word plus a start token."""

    fingerprint = "words"
    capabilities = frozenset({LOGPROBS})
    batch_tokens = 4096
    max_length = 512

    def count_tokens(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def score(self, requests):
        out = []
        for r in requests:
            f = np.zeros(len(r.text.split()), np.float32)
            i = np.zeros(len(r.text.split()), np.int32)
            out.append(TokenStats(i, f, f, f, i, i))
        return out


def test_a_known_rate_caps_a_token_batch_to_seconds_of_work():
    runner = RequestRunner(RequestStore(None))
    assert runner.batch_budget("words", 4096) == 4096  # no rate known: the budget
    runner.rates["words"] = 500.0  # tokens/s: 10 s of work hold 5,000 tokens
    assert runner.batch_budget("words", 16384) == 4096  # halved until it fits
    runner.rates["words"] = 1.0
    assert runner.batch_budget("words", 16384) == MIN_BATCH_TOKENS == 2048
    runner.rates["words"] = 1e6
    assert runner.batch_budget("words", 4096) == 4096  # a fast device fills the budget
    runner.batch_seconds = None
    runner.rates["words"] = 1.0
    assert runner.batch_budget("words", 4096) == 4096  # no cap asked for


def test_the_runner_measures_the_rate_and_an_interrupt_keeps_stored_batches(monkeypatch):
    store = RequestStore(None)
    runner = RequestRunner(store)
    requests = [LogprobRequest(t) for t in _texts(words=100)]
    backend = _Words()
    runner.run("target", "words", requests[:10], backend)  # 1,020 tokens: a rate is measured
    assert runner.rates["words"] > 0
    runner.rates["words"] = 100.0  # a slow device: batches of 2,048 tokens (the floor)
    finished = _interrupt_at(monkeypatch, 2500)  # 25 s of work at that rate
    with pytest.raises(KeyboardInterrupt):
        runner.run("target", "words", requests, backend)
    assert finished == [20]  # 2,048 // 102 tokens: one batch, not all 30 texts (3,060) at once
    assert store.count("logprobs") == 10 + 20  # the finished batch is stored


def test_ctrl_c_says_what_was_kept_and_the_rerun_resumes(tmp_path, tiny_model_dir, monkeypatch):
    data = tmp_path / "texts.jsonl"
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(_texts(words=25))]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # this device's rate as the plan measures it (a loaded CPU): batches of 2,048 tokens (the
    # floor; 10 s hold 500), a part of the 40 texts (one batch of the default budget, 4,096)
    monkeypatch.setattr(estimate, "_rate", lambda *a: (50.0, "measured in the test"))
    cache = tmp_path / "signals.sqlite"
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--attacks", "loss",
            "--cache", str(cache), "--no-blind", "--n-bootstrap", "50"]  # fmt: skip
    finished = _interrupt_at(monkeypatch, 2500)  # 50 s of work at that rate
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 130, result.output
    kept = sum(finished)
    assert kept > 0  # one token batch of the 40 texts kept nothing
    said = re.search(r"interrupted: (\d+) requests kept in the store; rerun the same "
                     r"command to resume \((\d+) of (\d+) left\)",
                     " ".join(result.output.split()))  # fmt: skip
    assert said is not None, result.output
    assert int(said[1]) == kept
    monkeypatch.undo()
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(tmp_path / "imprint-cache"))
    monkeypatch.setattr(estimate, "_rate", lambda *a: (50.0, "measured in the test"))
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    counts = manifest["requests"]["target"]["logprobs"]
    assert counts["cache_hits"] == kept and counts["executed"] == int(said[2]) > 0
    assert int(said[3]) == kept + int(said[2])
