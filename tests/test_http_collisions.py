"""Token-text collisions in a server's prompt log-probs: detected and refused with the evidence.

llama-cpp-python's server keys each position's candidates by the token's text, decoded with
``errors="ignore"``: 38 SmolLM2 ids render to " " (a space plus bytes of a split character) and
260 to "", so one key holds one of their values (the least likely one), then the entry's own
token's key is overwritten with that token's log p. On a shifted answer a token's log p is read
from those keys, so an ambiguous text is refused, never read. Tested on llama-cpp-python's real
recorded answer (``tests/data/recorded/llamacpp_smollm2_wikimia0.json``) and on hand-made answers
shaped like that server's (tokens / text_offset / token_logprobs / top_logprobs, entry 0 null).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imprint.backends.alignment import (
    EchoAnswer,
    TokenCollision,
    ambiguous_texts,
    token_rows,
)
from imprint.errors import ConfigError

RECORDED = Path(__file__).parent / "data" / "recorded" / "llamacpp_smollm2_wikimia0.json"
START = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer():
    from imprint.backends.http_logprobs import _load_tokenizer

    return _load_tokenizer("smollm2-135m")


def _choice(tokens, tops, logprobs=None):
    """A choice shaped as llama-cpp-python's echo answer (its start token renders as "")."""
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append(pos)
        pos += len(tok)
    lps = logprobs or [None] + [-1.0] * (len(tokens) - 1)
    return {
        "text": "".join(tokens),
        "logprobs": {
            "tokens": tokens,
            "text_offset": offsets,
            "token_logprobs": lps,
            "top_logprobs": [None, *tops[1:]],
        },
    }


def test_smollm2_renders_blank_texts_for_many_ids(tokenizer):
    amb = ambiguous_texts(tokenizer)
    assert len(amb[" "]) >= 30 and len(amb[""]) >= 200, {k: len(v) for k, v in amb.items()}
    assert 216 in amb[" "]  # the plain space token is one of them


def test_the_real_recorded_answer_with_a_space_token_is_refused(tokenizer):
    rec = json.loads(RECORDED.read_text(encoding="utf-8"))
    pair = next(p for p in rec["pairs"] if p["request"]["logprobs"] == 49152)
    answer = EchoAnswer.from_choice(pair["answer"]["choices"][0], "recorded")
    prompt = pair["request"]["prompt"]
    first = {answer.tokens[1]: -5.0}
    with pytest.raises(TokenCollision, match=r"ambiguous: token \d+ ' ' \(rendered so by 38 ids"):
        token_rows(
            answer, prompt, START, 1, first, "recorded", START,
            ambiguous=ambiguous_texts(tokenizer), asked=49152,
        )  # fmt: skip


def test_clean_text_passes_the_same_check(tokenizer):
    tokens = ["", "The", " cat", " sat"]
    tops = [None, {" cat": -1.0, " dog": -2.0}, {" sat": -0.5, " ran": -1.5}, {".": -0.1}]
    answer = EchoAnswer.from_choice(_choice(tokens, tops), "hand-made")
    rows = token_rows(
        answer, START + "The cat sat", START, 1, {"The": -3.0}, "hand-made", START,
        ambiguous=ambiguous_texts(tokenizer), asked=2,
    )  # fmt: skip
    assert [(r.text, r.logp) for r in rows] == [("The", -3.0), (" cat", -1.0), (" sat", -0.5)]


def test_without_a_tokenizer_merged_candidates_are_refused():
    # 3 candidates asked, 2 distinct texts came back: two ids share " "
    tokens = ["", "In", " ", "1"]
    tops = [None, {" ": -0.2, " the": -2.0}, {"1": -0.1, "2": -2.5, "3": -3.0}, {"9": -0.1}]
    answer = EchoAnswer.from_choice(_choice(tokens, tops), "hand-made")
    first = {"In": -4.0, "The": -1.0, "A": -2.0}
    with pytest.raises(
        TokenCollision, match=r"token 1 ' ' \(2 distinct candidates of 3\).*tokenizer"
    ):
        token_rows(answer, START + "In 1", START, 1, first, "hand-made", START, asked=3)


def test_without_a_tokenizer_a_repeated_token_text_is_refused_on_a_shifted_answer():
    # entry 2 (" ") predicts token 3, also " ": the server overwrote that key with token 2's
    # own log p, right only if both are the same id, which the answer does not tell
    tokens = ["", "A", " ", " ", "b"]
    tops = [None, {" ": -1.0, "x": -2.0}, {" ": -7.0, "b": -0.5}, {"b": -0.2, "c": -3.0}, {}]
    answer = EchoAnswer.from_choice(_choice(tokens, tops), "hand-made")
    first = {"A": -4.0, "The": -1.0}
    with pytest.raises(TokenCollision, match=r": token 2 ' ' \(same text as the token before it\)"):
        token_rows(answer, START + "A  b", START, 1, first, "hand-made", START, asked=2)


def test_offsets_that_do_not_spell_the_prompt_are_refused_with_the_evidence():
    choice = _choice(["", "The", " cat"], [None, {" cat": -1.0}, {".": -0.5}])
    choice["logprobs"]["text_offset"] = [0, 0, 4]  # " cat" claimed at 4, the prompt has it at 3
    answer = EchoAnswer.from_choice(choice, "hand-made")
    with pytest.raises(ConfigError, match=r"token 2 ' cat' at offset 4 does not match the prompt"):
        token_rows(answer, START + "The cat", START, 1, {"The": -3.0}, "hand-made", START)


def test_a_missing_token_with_an_ambiguous_text_is_refused_before_more_candidates(tokenizer):
    # " " is not among the 2 candidates: a wider request could not be read either
    tokens = ["", "In", " ", "1"]
    tops = [None, {" the": -1.0, " a": -2.0}, {"1": -0.1, "2": -2.5}, {"9": -0.1}]
    answer = EchoAnswer.from_choice(_choice(tokens, tops), "hand-made")
    with pytest.raises(TokenCollision):
        token_rows(
            answer, START + "In 1", START, 1, {"In": -4.0}, "hand-made", START,
            ambiguous=ambiguous_texts(tokenizer), asked=2,
        )  # fmt: skip


def test_a_key_the_json_repeats_is_refused_not_read_as_its_last_value():
    """A server that writes each candidate as it comes repeats a text key; json.loads alone
    would keep the last value silently (review item 1)."""
    from imprint.backends.alignment import decode_answer

    raw = (
        '{"choices": [{"text": "", "logprobs": {"tokens": ["", "In", " ", "1"],'
        ' "text_offset": [0, 0, 2, 3], "token_logprobs": [null, -1.0, -1.0, -1.0],'
        ' "top_logprobs": [null, {" ": -0.2, " the": -2.0, " ": -17.8}, {"1": -0.1, "2": -2.5},'
        ' {"9": -0.1}]}}]}'
    )
    choice = decode_answer(raw)["choices"][0]
    answer = EchoAnswer.from_choice(choice, "hand-made")
    first = {"In": -4.0, "The": -1.0}
    with pytest.raises(TokenCollision, match=r"token 1 ' ' \(a key the answer repeats\)"):
        token_rows(answer, START + "In 1", START, 1, first, "hand-made", START, asked=2)
