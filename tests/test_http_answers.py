"""Gray-box answers of the wrong shape get one-line errors naming the answer (review item 7),
and an empty ``openai-logprobs:`` model name is refused like ``openai:`` (review item 12)."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest
from json_handler import JSONHandler

from imprint.backends.alignment import EchoAnswer, token_rows
from imprint.backends.http_logprobs import HTTPLogprobBackend, LogprobOptions
from imprint.backends.registry import provider_for
from imprint.errors import ConfigError, ImprintError


@pytest.fixture()
def no_choices():
    """A real loopback server whose completions answer 200 without choices."""

    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.read_json()
            self.send_json(200, {"object": "text_completion", "error": "busy"})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_a_first_token_answer_without_choices_is_refused_quoting_it(no_choices):
    backend = HTTPLogprobBackend(no_choices, "m", LogprobOptions(key_env=None), probe=False)
    try:
        # asked twice, then refused naming the request and quoting the body (was a raw KeyError)
        with pytest.raises(
            ImprintError,
            match=r"context 'The'\).*without the field \"choices\".*\"error\": \"busy\"",
        ):
            backend._first_candidates("The", 5)
    finally:
        backend.close()


def test_an_empty_candidates_entry_is_refused_naming_the_token():
    # aligned (shift 0): the token's log p is the server's, but its candidates are {} (no
    # best candidate, no rank): the stats crashed on max({})
    choice = {
        "text": "ab",
        "logprobs": {
            "tokens": ["a", "b"],
            "text_offset": [0, 1],
            "token_logprobs": [None, -1.0],
            "top_logprobs": [None, {}],
        },
    }
    answer = EchoAnswer.from_choice(choice, "recorded")
    with pytest.raises(
        ConfigError, match=r"recorded: .*no candidates for token 1 'b' \(got \{\}\)"
    ):
        token_rows(answer, "ab", "a", 0, None, "recorded")


@pytest.mark.parametrize("spec", ["openai-logprobs:", "openai-logprobs:  ", "openai:", ""])
def test_an_empty_served_model_name_is_refused(spec):
    with pytest.raises(ConfigError, match="--model is empty"):
        provider_for(spec, api_base="http://127.0.0.1:1/v1")
