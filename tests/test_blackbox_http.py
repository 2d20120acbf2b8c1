"""The OpenAI-compatible client against a real loopback server backed by the tiny local model:
faults are retried and counted, the API key never leaks, refusals fail with the reason."""

from __future__ import annotations

import json
import logging

import httpx  # noqa: F401  (the api extra; installed by the dev extra)
import numpy as np
import pytest
import torch
from conftest import HashEmbedder
from fake_openai_server import FakeOpenAIServer

from imprint.attacks.samia import SaMIA
from imprint.attacks.simmia import SimMIA
from imprint.backends.base import SamplingSettings
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.text import HFTextBackend
from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError

KEY = "sk-test-3f9a1c77e2b4-do-not-log"
ENV = "IMPRINT_TEST_API_KEY"
FAST = RetryPolicy(max_retries=8, base_s=0.01, cap_s=0.05)


@pytest.fixture(scope="module")
def tiny_text(tiny_model_dir) -> HFTextBackend:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield HFTextBackend(HFLogprobBackend(str(tiny_model_dir), device="cpu"))
    torch.set_num_threads(threads)


@pytest.fixture()
def generate(tiny_text):
    def run(prompt, n, max_tokens, stop, seed, temperature):
        return tiny_text.sample(
            [prompt], SamplingSettings(n, max_tokens, stop, seed=seed, temperature=temperature)
        )[0]

    return run


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)


def client(server: FakeOpenAIServer, **kwargs) -> OpenAICompatibleBackend:
    kwargs.setdefault("retry", FAST)
    return OpenAICompatibleBackend(
        server.base_url, "tiny", api_key_env=ENV, timeout_s=0.5, max_concurrency=4, **kwargs
    )


def test_completions_survive_every_fault_and_count_retries(generate, caplog):
    faults = ["429", "500", "timeout", "malformed", "503", "drop"]
    with FakeOpenAIServer(generate, api_key=KEY, faults=faults, stall_s=1.0) as server:
        caplog.set_level(logging.DEBUG)
        with client(server) as backend:
            out = backend.sample(["The quick brown", "In 2023 the"], SamplingSettings(3, 4, seed=1))
            usage = backend.usage()
    assert [len(o) for o in out] == [3, 3] and all(isinstance(t, str) for o in out for t in o)
    assert usage["requests"] == 2 and usage["samples"] == 6 and usage["failed"] == 0
    # the stalled answer is awaited, not sent again: this server was not measured to serve
    # requests at once (it serves one at a time), so a copy would queue behind it
    assert sum(usage["retries"].values()) == len(faults) - 1 and usage["past_timeout"] == 1
    assert usage["attempts"] == 2 + len(faults) - 1
    assert {"429", "500", "503"} <= set(usage["retries"]) and "timeout" not in usage["retries"]
    assert sum(v for k, v in usage["retries"].items() if k.startswith("malformed")) == 1
    assert usage["completion_tokens"] == 6 * 4
    for text in (caplog.text, repr(backend), str(usage), str(vars(backend))):
        assert KEY not in text
    assert "retrying" in caplog.text


def test_fewer_choices_than_asked_is_learned_not_retried(generate, caplog):
    """A server that caps n (here: 2 choices for n=3) is not faulty: its answer is kept and the
    rest is asked in requests of at most 2, with no retry (issue 22)."""
    with FakeOpenAIServer(generate, api_key=KEY, faults=["short"]) as server:
        with client(server) as backend:
            out = backend.sample(["The quick brown", "In 2023 the"], SamplingSettings(3, 4, seed=1))
            usage = backend.usage()
        asked = [entry["n"] for entry in server.log]
    assert [len(o) for o in out] == [3, 3]
    assert usage["retries"] == {} and usage["attempts"] == usage["requests"] == 4
    assert asked[0] == 3 and sorted(asked[1:]) == [1, 1, 2]  # the probe, then <= 2 per request
    assert backend.describe()["limits"]["choices_per_request"] == 2
    assert "returned 2 choice(s) for n=3" in caplog.text


def test_chat_mode_asks_for_the_next_word_and_n_per_request(generate):
    with FakeOpenAIServer(generate, api_key=KEY) as server:
        with client(server, mode="chat", max_n_per_request=2) as backend:
            out = backend.sample(
                ["Hurricane Ana was"], SamplingSettings(5, 3, seed=0, task="next_word")
            )
            assert backend.usage()["requests"] == 3  # n=5 in requests of 2, 2, 1
        assert sorted(entry["n"] for entry in server.log) == [1, 2, 2]
        assert all(entry["path"] == "/v1/chat/completions" for entry in server.log)
    assert len(out[0]) == 5


def test_the_whole_sampling_law_is_sent_in_the_servers_fields(generate):
    """Each request states temperature, top-k (the attack's own; the option only for calls that
    give none), top-p 1, min-p 0 and no penalties, so no server default applies (issue 22)."""
    with FakeOpenAIServer(generate) as server:  # lists its model as vLLM's server does
        with client(server) as plain:
            plain.sample(["x"], SamplingSettings(1, 2, top_k=50))
        with client(server, top_k=40) as default_40:
            default_40.sample(["x"], SamplingSettings(1, 2))
            default_40.sample(["x"], SamplingSettings(1, 2, top_k=5))
            described = default_40.describe()
        assert [entry["top_k"] for entry in server.log] == [50, 40, 5]
        body = server.log[0]["body"]
    law = {"temperature": 1.0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}
    assert law.items() <= body.items() and body["frequency_penalty"] == 0.0
    assert described["server"]["dialect"] == "vllm"
    assert [law["top_k"] for law in described["sampling_sent"]] == [40, 5]


def test_a_top_k_the_server_cannot_be_told_is_refused_before_any_request(generate):
    with FakeOpenAIServer(generate, owned_by="openai") as server, client(server) as backend:
        with pytest.raises(ConfigError, match=r"top-k 50.*--param samia.top_k=0"):
            backend.sample(["x"], SamplingSettings(1, 2, top_k=50))
        backend.sample(["x"], SamplingSettings(1, 2, top_k=0))  # the full distribution can be said
        assert len(server.log) == 1 and "top_k" not in server.log[0]["body"]


def test_a_model_the_server_does_not_list_is_refused_naming_the_served_ones(generate):
    with FakeOpenAIServer(generate, models=("a-model", "b-model")) as server:
        with client(server) as backend, pytest.raises(ConfigError) as err:
            backend.sample(["x"], SamplingSettings(1, 2))
        assert server.log == []  # nothing was sent
    assert "'tiny' is not served" in str(err.value) and "'a-model', 'b-model'" in str(err.value)


def test_wrong_key_fails_at_once_naming_the_variable(generate, monkeypatch):
    monkeypatch.setenv(ENV, "sk-wrong")
    with FakeOpenAIServer(generate, api_key=KEY) as server, client(server) as backend:
        with pytest.raises(APIError, match=ENV) as err:
            backend.sample(["x"], SamplingSettings(1, 2))
        assert KEY not in str(err.value) and "sk-wrong" not in str(err.value)
        assert backend.usage()["attempts"] == 1


def test_gives_up_after_max_retries(generate):
    policy = RetryPolicy(max_retries=2, base_s=0.0, cap_s=0.0)
    with (
        FakeOpenAIServer(generate, api_key=KEY, faults=["500"] * 10) as server,
        client(server, retry=policy) as backend,
    ):
        with pytest.raises(APIError, match="gave up after 3 attempts"):
            backend.sample(["x"], SamplingSettings(1, 2))
        assert backend.usage()["failed"] == 1


def test_samia_and_simmia_run_over_http_with_faults(generate, tiny_text):
    texts = ["The quick brown fox jumps over the lazy dog.", "In 2023 the council met in Seoul."]
    faults = ["429", None, "500", "malformed"]
    with FakeOpenAIServer(generate, api_key=KEY, faults=faults) as srv, client(srv) as backend:
        samia = SaMIA(n_samples=3).score_with_backend(backend, texts)
        simmia = SimMIA(n_samples=4, n_shots=1, max_word_tokens=3).score_with_backend(
            backend, texts, prefix="A shot text.\n\n", embedder=HashEmbedder()
        )
        usage = backend.usage()
    assert all(v.shape == (2,) for v in (*samia.values(), *simmia.values()))
    assert sum(usage["retries"].values()) == 3
    # SimMIA asks once per word position per context: (10 - 1) + (8 - 1) prompts, twice
    assert usage["requests"] == 2 + 2 * (9 + 7)


def _labelled_texts(path):
    import json

    rows = [
        ("The quick brown fox jumps over the lazy dog near the river bank.", 1),
        ("A small boat drifted slowly past the old stone harbour wall.", 1),
        ("Rain fell over the city while the market stalls were closing.", 1),
        ("She opened the letter and read it twice before sitting down.", 1),
        ("In 2023 the council met in Seoul to discuss new transport rules.", 0),
        ("The museum added three paintings to its modern art collection.", 0),
        ("Engineers tested the bridge with heavy trucks for a full week.", 0),
        ("Farmers in the valley planted corn earlier than usual this spring.", 0),
        ("The orchestra rehearsed the symphony late into the quiet night.", 0),
    ]
    path.write_text("\n".join(json.dumps({"text": t, "label": y}) for t, y in rows) + "\n")
    return path


def test_imprint_run_targets_an_api_and_resumes_from_its_cache(generate, tmp_path):
    """`imprint run --api-base ...`: black-box attacks over HTTP through the whole pipeline, with
    faults retried, usage in the manifest, no key anywhere on disk, and a second run answered
    from the response cache without a single request."""
    import json

    from imprint.run import RunConfig, execute_run

    data = _labelled_texts(tmp_path / "texts.jsonl")
    faults = ["429", None, "500"]
    with FakeOpenAIServer(generate, api_key=KEY, faults=faults) as server:

        def config(out: str) -> RunConfig:
            return config_from_flags(
                model="tiny",
                data=str(data),
                out=tmp_path / out,
                attacks=("samia", "simmia"),
                params={
                    "samia": {"n_samples": 2},
                    "simmia": {"n_samples": 3, "n_shots": 1, "max_word_tokens": 2},
                },
                api_base=server.base_url,
                api_key_env=ENV,
                api_concurrency=2,
                shot_holdout=1,  # SimMIA's one shot, held out of the evaluation
                n_bootstrap=50,
                cache=tmp_path / "cache.sqlite",
                progress=False,
            )

        first = execute_run(config("run1"))
        sent = len(server.log)
        second = execute_run(config("run2"))
        assert len(server.log) == sent  # every answer came from the cache

    usage = first.manifest["models"]["target"]["usage"]
    assert usage["retries"] == {"429": 1, "500": 1} and usage["failed"] == 0
    assert usage["requests"] == sent - 2 and usage["cached"] == 0
    # the rerun is answered by the request layer: the client is not even asked
    assert second.manifest["models"]["target"]["usage"]["requests"] == 0
    assert all(
        c["executed"] == 0 and c["cache_hits"] == c["requests"]
        for kinds in second.manifest["requests"].values()
        for c in kinds.values()
    )
    assert set(first.scores) == {"samia", "samia_zlib", "simmia", "simmia_star"}
    assert len(first.samples) == 8  # one non-member went into the SimMIA prefix
    for column, values in first.scores.items():
        assert np.isfinite(values).all(), column
        np.testing.assert_array_equal(values, second.scores[column])
    written = [p for p in (tmp_path / "run1").rglob("*") if p.is_file()]
    assert written and not any(KEY.encode() in p.read_bytes() for p in written)
    manifest = json.loads((tmp_path / "run1" / "manifest.json").read_text())
    assert manifest["config"]["model_args"]["key_env"] == ENV  # the variable's name, never the key
    assert manifest["models"]["target"]["options"]["key_env"] == ENV
    report = (tmp_path / "run1" / "report.md").read_text()
    assert "## Queries" in report and "429: 1, 500: 1" in report


def test_imprint_run_refuses_gray_box_attacks_on_an_api_target(tmp_path):
    from typer.testing import CliRunner

    from imprint.cli import app

    data = _labelled_texts(tmp_path / "texts.jsonl")
    args = ["run", "--model", "m", "--data", str(data), "--api-base", "http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(app, [*args, "--attacks", "loss,samia"])
    assert result.exit_code == 2
    assert "loss" in result.output and "text-only API" in result.output


# -- issue 22: the sampling law in each server's words, the plan's request counts ---------------
def test_each_dialect_states_the_whole_law_and_openai_refuses_what_it_cannot_say():
    from imprint.backends.http_sampling import SamplingSpec, sampling_fields

    samia = SamplingSpec(temperature=1.0, top_k=50)
    vllm = sampling_fields(SamplingSpec(1.0, top_k=0), "vllm", 7)
    assert vllm == {
        "temperature": 1.0,
        "seed": 7,
        "top_p": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "top_k": -1,  # vLLM's "no top-k"
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
    llama = sampling_fields(samia, "llama.cpp", None)  # its defaults: 0.95, 0.05, 40, 1.1
    assert (llama["top_p"], llama["min_p"], llama["top_k"], llama["repeat_penalty"]) == (
        1.0,
        0.0,
        50,
        1.0,
    )
    law = json.loads(sampling_fields(samia, "transformers", 3)["generation_config"])
    assert law["do_sample"] is True and law["top_k"] == 50 and law["top_p"] == 1.0
    greedy = json.loads(sampling_fields(SamplingSpec(0.0), "transformers", 3)["generation_config"])
    assert greedy["do_sample"] is False
    assert "top_k" not in sampling_fields(SamplingSpec(1.0), "openai", 1)
    assert sampling_fields(SamplingSpec(0.0, top_k=50), "openai", 1)["temperature"] == 0.0
    with pytest.raises(ConfigError, match="top-k 50"):
        sampling_fields(samia, "openai", 1)


@pytest.mark.parametrize(
    ("listed", "dialect"),
    [
        ({"data": [{"id": "m", "owned_by": "vllm"}]}, "vllm"),
        ({"data": [{"id": "m", "owned_by": "me"}]}, "llama.cpp"),  # llama-cpp-python
        ({"data": [{"id": "m", "owned_by": "llamacpp"}]}, "llama.cpp"),  # llama.cpp's server
        (
            {"data": [{"id": "m", "owned_by": "local", "status": {"value": "loaded"}}]},
            "transformers",
        ),
        ({"data": [{"id": "gpt-4o-mini", "owned_by": "system"}]}, "openai"),
        (None, "openai"),  # no model list: standard fields only
    ],
)
def test_the_dialect_is_read_from_the_model_list(listed, dialect):
    from imprint.backends.http_sampling import detect_dialect

    assert detect_dialect(listed, "http://127.0.0.1:8000/v1")[0] == dialect


def test_the_plan_counts_requests_per_attack_before_any_work(generate):
    from dataclasses import replace

    from imprint.attacks.base import get_attack_class
    from imprint.run.http_plan import plan_lines, request_counts

    texts = ["one two three four five", "a b c"]  # 5 and 3 words: 4 + 2 next-word positions
    # the counts are read off the calls the attacks declare (a prepared SimMIA has its prefix P)
    simmia = replace(get_attack_class("simmia")(n_samples=5), shot_prefix="P. ")
    samia = get_attack_class("samia")(n_samples=10)
    assert request_counts([simmia, samia], texts, 1) == {"simmia": 2 * 6 * 5, "samia": 20}
    assert request_counts([simmia, samia], texts, 128) == {"simmia": 12, "samia": 2}
    with FakeOpenAIServer(generate) as server, client(server) as backend:
        (line,) = plan_lines([simmia, samia], texts, backend)
        assert server.log == []  # only GET /v1/models so far
    assert "simmia 12, samia 2; 14 in all if the server honours n" in line
    assert "80 if it returns one choice per request" in line
    assert backend.planned_requests == 80


def test_a_timeout_halves_the_requests_in_flight(generate):
    # on a server measured to serve requests at once (elsewhere a timeout is waited out)
    with (
        FakeOpenAIServer(generate, faults=["timeout"], stall_s=1.0, parallel=True) as server,
        client(server) as backend,  # 4 in flight at most
    ):
        backend.limits.parallelism = 4.0
        backend.sample(["x"], SamplingSettings(1, 2))
        assert backend._gate.limit == 2 and backend.usage()["retries"] == {"timeout": 1}
