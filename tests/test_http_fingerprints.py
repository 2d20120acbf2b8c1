"""The request store is keyed by a backend's fingerprint: answers computed under other options
must never be served as this run's (review of issue 22's code, items 2 and 3)."""

from __future__ import annotations

import pytest

from imprint.backends.http import OpenAICompatibleBackend
from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions

URL = "http://127.0.0.1:9/v1"  # never contacted: probe=False, no request sent


def _fp(**kw) -> str:
    backend = HTTPLogprobBackend(URL, "m", LogprobOptions(key_env=None, **kw), probe=False)
    try:
        return backend.fingerprint
    finally:
        backend.close()


@pytest.mark.parametrize(
    "other",
    [
        {"topk_moments": True},  # mean/var filled, or NaN
        {"top_logprobs": 20},  # rank 0 when the token is not among the candidates
        {"max_top_logprobs": 49152},  # a shifted answer re-asked with more candidates
        {"tokenizer": "smollm2-135m"},  # real ids, not crc32 hashes of token texts
        {"form": "echo"},  # which form is read
    ],
)
def test_gray_box_options_that_change_the_stats_change_the_fingerprint(other):
    assert _fp(**other) != _fp()


def test_the_black_box_fingerprint_says_the_whole_law_is_sent_and_the_server_option():
    plain = OpenAICompatibleBackend(URL, "m", api_key_env=None)
    forced = OpenAICompatibleBackend(URL, "m", api_key_env=None, server="llama.cpp")
    # answers stored before the whole sampling law was sent (the server's defaults applied)
    # carried the old fingerprint, "<spec>|<mode>|<temperature>|<top_k>": never served again
    old = f"{plain.spec}|{plain.mode}|{plain.temperature}|{plain.top_k}"
    assert plain.fingerprint != old and "law=whole" in plain.fingerprint
    assert forced.fingerprint != plain.fingerprint


@pytest.mark.parametrize(
    ("field", "value"),
    [("concurrency", 0), ("timeout", 0.0), ("max_retries", -1), ("form", "logits")],
)
def test_a_bad_option_is_named_as_itself(field, value):
    """Each bad value names its own option (review item 6: all were reported as concurrency)."""
    from imprint.backends.options import OptionError

    with pytest.raises(OptionError, match=f"option '{field}'"):
        LogprobOptions(**{field: value})
