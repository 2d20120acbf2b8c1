"""Gray-box over HTTP: RECORDED REAL answers of llama-cpp-python's server, read by imprint.

``tests/data/recorded/llamacpp_smollm2_wikimia0.json`` holds two real answers of
llama-cpp-python 0.3.36's OpenAI-compatible server (built from PyPI, serving the SmolLM2-135M
Instruct Q4_1 GGUF that the ``smollm2-135m`` alias de-quantises) to ``echo`` + ``logprobs``
requests for WikiMIA-32's first text after ``<|endoftext|>``: with 5 candidates, and with all
49,152 (stored cut to the best 20 plus the candidates named like the tokens at and after each
position, values unchanged; the full answer was 70 MB). Building the server takes 23 minutes
here, too slow for CI, so the answers are recorded; the record + replay flow over 42 texts
through ``imprint run`` is ``tests/test_http_graybox_replay.py`` (see docs/served/graybox.md).

The answers are shifted by one token (the model adds no BOS): the tests pin that imprint's
alignment reading detects it, that the corrected log-probs equal the local ``hf`` backend's on the
same weights within quantisation error, and that reading them as aligned would be wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from imprint.backends.alignment import EchoAnswer, MissingLogprob, spelled, token_rows
from imprint.backends.base import ScoreRequest

RECORDED = Path(__file__).parent / "data" / "recorded" / "llamacpp_smollm2_wikimia0.json"
START = "<|endoftext|>"


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def _answer(record, k):
    pair = next(p for p in record["pairs"] if p["request"]["logprobs"] == k)
    prompt = pair["request"]["prompt"]
    return EchoAnswer.from_choice(pair["answer"]["choices"][0], "recorded"), prompt


@pytest.fixture(scope="module")
def local(record):
    from imprint.backends.hf import HFLogprobBackend

    _, prompt = _answer(record, 5)
    (stats,) = HFLogprobBackend("smollm2-135m").score([ScoreRequest(prompt[len(START) :])])
    return stats


def test_the_recorded_answer_is_shifted_by_one(record):
    answer, prompt = _answer(record, 5)
    text, _, skip = spelled(answer, prompt, START, START)
    assert skip == 1 and text == prompt[len(START) :]  # the special start token renders as ""
    m = answer.prompt_entries(text)
    best = [max(t, key=t.__getitem__) if t else None for t in answer.top[:m]]
    same = sum(best[i] == answer.tokens[i] for i in range(1, m))
    nxt = sum(best[i] == answer.tokens[i + 1] for i in range(1, m - 1))
    assert nxt > 3 * max(same, 1), (same, nxt)


def test_corrected_logprobs_equal_the_local_hf_backend(record, local, capsys):
    answer, prompt = _answer(record, 49152)
    first = {answer.tokens[1]: float(local.logp[0])}  # the first token's entry is null: not read
    rows = token_rows(answer, prompt, START, 1, first, "recorded", START)
    served = np.array([r.logp for r in rows[1:]], np.float32)
    assert len(served) == len(local) - 1
    # candidates are keyed by token text: several SmolLM2 ids decode to " " with this server's
    # decoding, and the dict keeps the last (least likely) one, so " " tokens read wrong values;
    # they are pinned as wrong here and left out of the comparison (imprint refuses such a text:
    # tests/test_http_collisions.py)
    blank = np.array([r.text == " " for r in rows[1:]])
    assert blank.any() and (np.abs(served - local.logp[1:])[blank] > 5).all()
    keep = ~blank
    diff = np.abs(served - local.logp[1:])[keep]
    rho = float(spearmanr(served[keep], local.logp[1:][keep]).statistic)
    assert diff.max() < 0.5 and rho > 0.99, (diff.max(), rho)
    with capsys.disabled():
        print(
            f"\nrecorded llama-cpp-python vs hf, {keep.sum()} of {len(served)} tokens "
            "(' ' tokens left out: candidate text collision): log p "
            f"max|diff| {diff.max():.4f}, mean |diff| {diff.mean():.4f}, Spearman {rho:.4f}"
        )


def test_five_candidates_miss_a_token_and_say_how_to_fix_it(record, local):
    answer, prompt = _answer(record, 5)
    first = {answer.tokens[1]: float(local.logp[0])}
    with pytest.raises(MissingLogprob, match="not among the .* candidates .* max_top_logprobs"):
        token_rows(answer, prompt, START, 1, first, "recorded", START)


def test_reading_the_answer_as_aligned_would_be_wrong(record, local):
    answer, prompt = _answer(record, 49152)
    m = answer.prompt_entries(prompt[len(START) :])
    naive = np.array(answer.logprobs[2:m], np.float32)  # the server's own token_logprobs
    assert float(np.abs(naive - local.logp[1:]).mean()) > 3.0
