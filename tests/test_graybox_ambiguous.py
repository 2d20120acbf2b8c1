"""Ambiguous token texts on a text-keyed server, decided from the local tokenizer (issue 36).

SmolLM2 renders 38 ids as ``" "`` and splits digits, so a ``" "`` token precedes most numbers;
a server that keys candidates by text (llama-cpp-python) cannot give its log p by text. The
server here answers as llama-cpp-python 0.3.x does, computed by the real SmolLM2-135M
(``tests/llamacpp_echo_server.py``). Pinned: ``ambiguous=resolve`` (the default) asks each such
token by id (its one generated token forced with ``logit_bias``) and scores equal the local hf
backend's; ``ambiguous=drop`` leaves those texts out before any request, counted, ids in the
manifest; a server that ignores ``logit_bias`` is refused before any text is asked, naming the
option; the first token missing from its context's candidates costs one small forced request,
not the text again with every candidate, and the context request goes out once at concurrency 4.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from imprint.backends.alignment import ambiguous_texts, server_text
from imprint.cli import app

START = "<|endoftext|>"
EXACT = 49152
# the server shifts by one: only every candidate always holds a token's log p
EVERY = (f"top_logprobs={EXACT}", f"max_top_logprobs={EXACT}", "concurrency=1")
WITH_NUMBERS = [  # a " " token before each number (SmolLM2 splits digits)
    ("The bridge opened in 1932 and carried 4 lanes of traffic over the river.", 1),
    ("About 3 million people visited the museum during 2019, a record year.", 0),
    ("The team won 12 of its 15 games in the season that ended in May.", 1),
]
PLAIN = [
    ("The old harbour was rebuilt after the storm and reopened to ships.", 0),
    ("Our village library lends books, maps and records to every reader.", 1),
    ("She painted the walls of the chapel with scenes from the valley.", 0),
]


@pytest.fixture(scope="module")
def tokenizer():
    from imprint.backends.http_logprobs import _load_tokenizer

    return _load_tokenizer("smollm2-135m")


def test_the_texts_are_what_the_tests_need(tokenizer):
    table = ambiguous_texts(tokenizer)
    assert len(table[" "]) == 38
    for text, _ in WITH_NUMBERS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert any(server_text(tokenizer, i) in table for i in ids), text
    for text, _ in PLAIN:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert not any(server_text(tokenizer, i) in table for i in ids), text


def _data(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    return path


def _run(tmp: Path, model: list[str], rows, name: str):
    args = ["run", *model, "--data", str(_data(tmp / f"{name}.jsonl", rows))]
    args += ["--attacks", "loss,zlib,min_k", "--no-blind", "--bootstrap", "20"]
    args += ["--shot-holdout", "0", "--out", str(tmp / name), "--cache", str(tmp / f"{name}.db")]
    return CliRunner().invoke(app, args)


def _served(url: str, *options: str) -> list[str]:
    given = ",".join(["tokenizer=smollm2-135m", "key_env=", *options])
    return ["--model", "openai-logprobs:served-model", "--api-base", url, "--model-args", given]


def _scores(folder: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(folder / "scores.parquet").to_pydict()
    order = np.argsort(table["text"])
    return {k: np.asarray(v)[order] for k, v in table.items() if k not in ("id", "meta")}


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf")
    result = _run(tmp, ["--model", "smollm2-135m"], WITH_NUMBERS + PLAIN, "hf")
    assert result.exit_code == 0, result.output
    return _scores(tmp / "hf")


@pytest.fixture(scope="module")
def shifted():
    from llamacpp_echo_server import LlamaCppLikeServer

    with LlamaCppLikeServer() as server:
        yield server


def test_resolve_asks_each_ambiguous_token_by_id_and_equals_the_local_model(
    shifted, local, tmp_path, tokenizer
):
    rows = WITH_NUMBERS[:2]  # both labels; every candidate is asked: a few texts only
    result = _run(tmp_path, _served(shifted.base_url, *EVERY), rows, "s")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    target = manifest["models"]["target"]
    assert target["alignment"]["shift"] == 1 and target["ambiguous"]["forced_token"] == "honoured"
    table = ambiguous_texts(tokenizer)
    n_ambiguous = sum(
        server_text(tokenizer, i) in table
        for text, _ in rows
        for i in tokenizer.encode(text, add_special_tokens=False)
    )
    assert target["usage"]["forced_token_requests"] == n_ambiguous
    assert manifest["data"]["evaluated"] == len(rows)
    served = _scores(tmp_path / "s")
    these = np.isin(local["text"], [t for t, _ in rows])
    assert list(served["text"]) == list(local["text"][these])
    for column in ("loss", "zlib", "min_k"):
        np.testing.assert_allclose(served[column], local[column][these], atol=2e-3, err_msg=column)


def test_drop_leaves_them_out_before_any_request_counted_with_their_ids(shifted, tmp_path):
    shifted.posts.clear()
    rows = WITH_NUMBERS + PLAIN[:2]
    result = _run(tmp_path, _served(shifted.base_url, "ambiguous=drop", *EVERY), rows, "d")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    (reason,) = [r for r in manifest["data"]["dropped"] if "ambiguous" in r]
    assert manifest["data"]["dropped"][reason] == len(WITH_NUMBERS)
    assert manifest["data"]["evaluated"] == 2
    ids = manifest["models"]["target"]["ambiguous"]["dropped_ids"][reason]
    assert len(ids) == len(WITH_NUMBERS)
    asked = " ".join(str(p["prompt"]) for p in shifted.posts)
    assert not any(text in asked for text, _ in WITH_NUMBERS)  # never sent
    report = (tmp_path / "d" / "report.md").read_text()
    assert f"{len(WITH_NUMBERS)} dropped" in report and reason in report


def test_a_server_that_ignores_logit_bias_is_refused_before_any_text_naming_the_option(
    tmp_path,
):
    from llamacpp_echo_server import LlamaCppLikeServer

    with LlamaCppLikeServer(honour_bias=False) as server:
        result = _run(tmp_path, _served(server.base_url), WITH_NUMBERS + PLAIN, "r")
        texts = [t for t, _ in WITH_NUMBERS + PLAIN]
        asked = [p for p in server.posts if any(t in str(p["prompt"]) for t in texts)]
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "ambiguous=drop" in flat and "logit_bias ignored" in flat, flat
    assert asked == []


def test_a_missing_first_token_costs_one_forced_request_and_the_context_is_asked_once(
    local, tmp_path
):
    """An aligned server (the BOS left out of the echo): only the first token is read from the
    context's candidates; "Our" is not among the 5 best after the start token."""
    from llamacpp_echo_server import LlamaCppLikeServer

    with LlamaCppLikeServer(strip_bos=True) as server:
        result = _run(tmp_path, _served(server.base_url, "concurrency=4"), PLAIN, "a")
        context = [p for p in server.posts if p["prompt"] == START and "logit_bias" not in p]
        forced = [p for p in server.posts if "logit_bias" in p]
    assert result.exit_code == 0, result.output
    usage = json.loads((tmp_path / "a" / "manifest.json").read_text())["models"]["target"]["usage"]
    assert len(context) == 1, context  # once, though 4 texts asked at once
    assert usage["rerequested_more_candidates"] == 0
    assert usage["forced_token_requests"] >= 1 and len(forced) == usage["forced_token_requests"] + 1
    served = _scores(tmp_path / "a")
    plain = np.isin(local["text"], [t for t, _ in PLAIN])
    np.testing.assert_allclose(served["loss"], local["loss"][plain], atol=2e-3)
