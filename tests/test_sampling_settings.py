"""One SamplingSettings object is what every backend's sample() takes; stored answers keep the
keys earlier releases wrote them under."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from imprint.backends.base import SAMPLING, Backend, SamplingSettings
from imprint.errors import ConfigError
from imprint.requests import RequestRunner, RequestStore
from imprint.requests.client import ModelRequests

# store keys as the release before SamplingSettings wrote them (commit 44bdc7d), per request kind:
# (kind, key, how ModelRequests asks for it)
EARLIER_KEYS = [
    (
        "sample",
        "59e7db22c92017a381abb165fc6941fd98fffe6b4c3758794de6b98f245400ab",
        ("Once upon", 3, 5, {"seed": 7, "top_k": 50, "stop": ["\n"]}),
    ),
    (
        "greedy",
        "019fe8b01c918968b251b037b6670f62cd65afbc5646d0f14e6bd5513290baed",
        ("Once upon", 1, 4, {"temperature": 0.0}),
    ),
    (
        "sample",
        "e8107fb45c08aa31e51d139f73a3ae6c1787dcd6965f050860638338d3316f7f",
        ("Hurricane", 2, 3, {"seed": 1, "task": "next_word"}),
    ),
]


class _NoCalls(Backend):
    """A text backend that fails the test when asked anything."""

    capabilities = frozenset({SAMPLING})
    fingerprint = "fp-earlier"

    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        pytest.fail(f"a model call for {list(prompts)} under {settings}")


def test_answers_stored_by_the_earlier_release_serve_a_rerun_without_model_calls(
    tmp_path: Path,
) -> None:
    store = RequestStore(tmp_path / "earlier.sqlite")
    for i, (kind, key, (_, n, _, _)) in enumerate(EARLIER_KEYS):
        answers = [f"stored {i}.{j}" for j in range(n)]
        store.put_keys("fp-earlier", kind, [(key, json.dumps(answers).encode())])
    client = ModelRequests({"target": _NoCalls()}, RequestRunner(store))
    for i, (_, _, (prompt, n, max_tokens, law)) in enumerate(EARLIER_KEYS):
        got = client.sample("target", [prompt], n, max_tokens, **law)
        assert got == [[f"stored {i}.{j}" for j in range(n)]]
    counts = client.runner.counts.to_dict()["target"]
    assert sum(c["cache_hits"] for c in counts.values()) == 3
    assert sum(c["executed"] for c in counts.values()) == 0
    store.close()


def test_a_sample_with_the_flat_signature_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"OldStyle.sample takes \(prompts, n, max_tokens"):

        class OldStyle(Backend):  # a plugin written for the signature before SamplingSettings
            capabilities = frozenset({SAMPLING})

            def sample(self, prompts, n, max_tokens, stop=None, *, seed=None, **kw):  # type: ignore[no-untyped-def]
                return [["x"] * n for _ in prompts]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"n": 0, "max_tokens": 4}, r"n \(samples per prompt\) must be >= 1, got 0"),
        ({"n": 1, "max_tokens": 0}, "max_tokens must be >= 1, got 0"),
        ({"n": 1, "max_tokens": 4, "temperature": -1.0}, "temperature must be >= 0"),
        ({"n": 1, "max_tokens": 4, "top_k": -5}, "top_k must be >= 0"),
        ({"n": 1, "max_tokens": 4, "task": "summarise"}, "task must be one of"),
    ],
)
def test_settings_are_refused_when_made_before_any_model_call(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        SamplingSettings(**settings)  # type: ignore[arg-type]


def test_a_backends_defaults_fill_only_what_the_settings_leave_open() -> None:
    asked = SamplingSettings(2, 8, stop=["\n"], seed=3, top_k=0)
    law = asked.with_defaults(1.0, 50)
    assert (law.temperature, law.top_k, law.stop, law.seed) == (1.0, 0, ("\n",), 3)
    assert SamplingSettings(2, 8, stop=("\n",), seed=3, top_k=0) == asked  # hashable, one group
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        asked.with_defaults(-0.5, 50)  # a backend's own bad default is refused too
