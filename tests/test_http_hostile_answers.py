"""A served model's answers that no model gives are refused with the evidence, never scored:
values that are not numbers, a positive or non-finite log p, a log p that contradicts its own
candidate entry, and candidate texts repeated in an aligned answer (found by the hostile test)."""

from __future__ import annotations

import pytest

from imprint.backends.alignment import EchoAnswer, decode_answer, token_rows
from imprint.errors import ConfigError


def _choice(logprob, tops=None, offsets=(0, 1)):
    return {
        "text": "ab",
        "logprobs": {
            "tokens": ["a", "b"],
            "text_offset": list(offsets),
            "token_logprobs": [None, logprob],
            "top_logprobs": [None, {"b": -1.0, "c": -2.0} if tops is None else tops],
        },
    }


def _rows(choice):
    return token_rows(EchoAnswer.from_choice(choice, "srv"), "ab", "a", 0, None, "srv")


def test_a_well_formed_aligned_answer_is_read():
    rows = _rows(_choice(-1.0))
    assert [(r.text, r.logp) for r in rows] == [("b", -1.0)]


@pytest.mark.parametrize(
    "choice",
    [_choice(-1.0, offsets=(0, "x")), _choice("abc"), _choice(-1.0, {"b": "oops"})],
    ids=["offset", "logprob", "candidate"],
)
def test_a_value_that_is_not_a_number_names_the_answer(choice):
    with pytest.raises(ConfigError, match=r"^srv: the answer's logprobs hold a value that is not"):
        _rows(choice)


@pytest.mark.parametrize("bad", [5.0, float("nan"), float("-inf")])
def test_a_log_p_no_model_gives_is_refused(bad):
    with pytest.raises(ConfigError, match=r"srv: the server gave token 1 'b' the log-prob"):
        _rows(_choice(bad, {"b": bad, "c": -2.0}))


def test_a_log_p_that_contradicts_its_candidate_entry_is_refused():
    with pytest.raises(ConfigError, match=r"-0\.0100 but lists it among its candidates at -1\.6"):
        _rows(_choice(-0.01, {"b": -1.6, "c": -2.0}))


def test_repeated_candidate_texts_in_an_aligned_answer_are_refused():
    raw = (
        '{"text": "ab", "logprobs": {"tokens": ["a", "b"], "text_offset": [0, 1], '
        '"token_logprobs": [null, -1.6], "top_logprobs": [null, '
        '{"b": -1.6, "zzz": -0.01, "zzz": -9.0}]}}'
    )
    with pytest.raises(ConfigError, match=r"repeat the text\(s\) \['zzz'\]"):
        _rows(decode_answer(raw))
