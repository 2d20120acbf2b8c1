"""The OpenAI-compatible client's failure modes, against the real loopback server: credentials in
the API root are refused before any work, an error quoting a server's body masks the key, the
first request that gives up stops the rest, and bodies of the wrong shape fail with the field
and the fix instead of a traceback or a text scored as "None"."""

from __future__ import annotations

import json

import pytest
from fake_openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from imprint.backends.base import SamplingSettings
from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.http_checks import mask_secret, usage_tokens
from imprint.cli import app
from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError
from imprint.run import RunConfig, resolve

KEY = "sk-live-7Hq2wZ0pXc9Lm4Rt-never-print"
ENV = "IMPRINT_TEST_SAFETY_KEY"
NO_WAIT = RetryPolicy(max_retries=1, base_s=0.0, cap_s=0.0)
NON_LATIN = ["서울에서 회의가 열렸다 ٢٠٢٣ 年", "Ελληνικά και русский 😀"]


def generate(prompt, n, max_tokens, stop, seed, temperature):
    """The server's "model": fixed non-Latin continuations, so round trips are checkable."""
    return [NON_LATIN[i % 2] for i in range(n)]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)


def client(server: FakeOpenAIServer, **kwargs) -> OpenAICompatibleBackend:
    kwargs.setdefault("retry", NO_WAIT)
    kwargs.setdefault("max_concurrency", 1)
    return OpenAICompatibleBackend(
        server.base_url, "tiny", api_key_env=ENV, timeout_s=kwargs.pop("timeout_s", 2.0), **kwargs
    )


def _texts(path):
    rows = [(f"Sentence number {i} about the harbour and its boats.", i % 2) for i in range(8)]
    path.write_text("\n".join(json.dumps({"text": t, "label": y}) for t, y in rows) + "\n")
    return path


# -- item 12: credentials never reach the manifest, logs or errors --------------------------------
SECRET_URLS = [
    ("http://alice:pw-0f3c9e2b71@127.0.0.1:8000/v1", "pw-0f3c9e2b71"),
    ("http://sk-live-aa11bb22cc33@127.0.0.1:8000/v1", "sk-live-aa11bb22cc33"),
    ("http://사용자:비밀번호-한국어@127.0.0.1:8000/v1", "비밀번호-한국어"),
    ("https://api.example.com/v1?api_key=sk-live-aa11bb22cc33", "sk-live-aa11bb22cc33"),
    ("https://api.example.com/v1?sk-live-aa11bb22cc33", "sk-live-aa11bb22cc33"),
    ("https://api.example.com/v1#sk-live-aa11bb22cc33", "sk-live-aa11bb22cc33"),
    # issue 19 item 15: path parameters (";token=...") went into every request URL and the manifest
    ("http://127.0.0.1:8000/v1;token=sk-live-aa11bb22cc33", "sk-live-aa11bb22cc33"),
    ("http://127.0.0.1:8000;key=sk-live-aa11bb22cc33/v1", "sk-live-aa11bb22cc33"),
    ("https://api.example.com/v1/;sk-live-aa11bb22cc33", "sk-live-aa11bb22cc33"),
]


@pytest.mark.parametrize(("url", "secret"), SECRET_URLS)
def test_api_base_with_credentials_is_refused_without_echoing_them(url, secret, tmp_path):
    with pytest.raises(ConfigError, match="--api-key-env") as err:
        RunConfig(model="m", data="d.jsonl", out=tmp_path / "run", api_base=url)
    assert secret not in str(err.value) and "***" in str(err.value)
    with pytest.raises(ConfigError, match="--api-key-env") as err:
        OpenAICompatibleBackend(url, "m", api_key_env=ENV)
    assert secret not in str(err.value)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1/", "http://[::1]:8000/v1"]
)
def test_plain_api_roots_are_accepted(url, tmp_path):
    assert RunConfig(model="m", data="d", out=tmp_path, api_base=url).api_base == url


@pytest.mark.parametrize("url", ["ftp://host/v1", "http:///v1", "http://host:99999/v1", "host/v1"])
def test_unusable_api_roots_are_refused(url, tmp_path):
    with pytest.raises(ConfigError, match="api_base"):
        RunConfig(model="m", data="d", out=tmp_path, api_base=url)


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        ("alice:pw-0f3c9e2b71@127.0.0.1:8000/v1", "pw-0f3c9e2b71", "'***@127.0.0.1:8000/v1'"),
        ("http:pw-0f3c9e2b71@host/v1", "pw-0f3c9e2b71", "'***@host/v1'"),
        ("//alice:pw-0f3c9e2b71@host/v1", "pw-0f3c9e2b71", "'//***@host/v1'"),
        ("ftp://alice:pw-0f3c9e2b71@host/v1;t=x", "pw-0f3c9e2b71", "'ftp://***@host/v1***'"),
        ("localhost:8000/v1", None, "'localhost:8000/v1'"),
        ("127.0.0.1:8000/v1", None, "'127.0.0.1:8000/v1'"),
    ],
)
def test_a_url_without_http_scheme_is_quoted_as_given_with_credentials_masked(
    url, secret, shown, tmp_path
):
    # urlsplit reads 'alice' or 'localhost' as the scheme; the error rebuilt the URL from those
    # parts ('alice://pw-...@...', 'localhost://8000/v1'), echoing the password
    with pytest.raises(ConfigError, match="http://") as err:
        RunConfig(model="m", data="d", out=tmp_path, api_base=url)
    message = str(err.value)
    assert shown in message, message
    assert secret is None or secret not in message


def test_cli_refuses_a_key_in_the_url_before_writing_anything(tmp_path):
    data, out = _texts(tmp_path / "texts.jsonl"), tmp_path / "run"
    url = "http://127.0.0.1:9/v1?key=sk-live-aa11bb22cc33"
    args = ["run", "--model", "m", "--data", str(data), "--out", str(out), "--api-base", url]
    result = CliRunner().invoke(app, [*args, "--attacks", "samia"])
    assert result.exit_code == 2, result.output
    assert "--api-key-env" in result.output and "sk-live-aa11bb22cc33" not in result.output
    assert not out.exists()


def test_an_error_quoting_the_server_masks_the_key_whole_or_cut_short():
    with (
        FakeOpenAIServer(generate, api_key=KEY, faults=["echo_key"]) as server,
        client(server) as backend,
        pytest.raises(APIError, match="answered 400") as err,
    ):
        backend.sample(["x"], SamplingSettings(1, 2))
    message = str(err.value)
    assert KEY not in message and KEY[:10] not in message and "***" in message


def test_mask_secret_masks_before_the_snippet_is_cut():
    body = "x" * 190 + " " + KEY + " tail"
    assert KEY[:8] not in mask_secret(body, KEY)[:200]
    assert mask_secret("no secret here", KEY) == "no secret here"
    assert mask_secret("anything", None) == "anything"


# -- item 15: the first request that gives up stops the others ------------------------------------
def test_first_request_to_give_up_stops_the_queued_ones():
    """p0 answers slowly (but in time); p1 fails for good meanwhile: p2..p19 must not be sent."""
    prompts = [f"p{i}" for i in range(20)]
    faults = {"p0": "timeout", **{p: "500" for p in prompts[1:]}}
    with FakeOpenAIServer(generate, prompt_faults=faults, stall_s=1.0) as server:
        with client(server, max_concurrency=2, timeout_s=5.0) as backend:
            with pytest.raises(APIError, match="gave up after 2 attempts") as err:
                backend.sample(prompts, SamplingSettings(1, 2))
            usage = backend.usage()
        sent = len(server.log)
    assert sent <= 5  # before: all 19 failing prompts were sent twice while p0 stalled
    assert usage["attempts"] == sent and usage["cancelled"] >= 17 and usage["requests"] == 1
    message = str(err.value)
    assert "--api-max-retries (now 1)" in message and "--api-timeout (now 5 s)" in message
    assert "other requests of this call were cancelled" in message


def test_a_timeout_names_the_timeout_option_and_sends_nothing_more():
    with FakeOpenAIServer(generate, faults=["timeout"] * 10, stall_s=0.8) as server:
        with (
            client(server, retry=RetryPolicy(max_retries=0), timeout_s=0.2) as backend,
            pytest.raises(APIError, match=r"last: timeout.*--api-timeout \(now 0.2 s\)"),
        ):
            backend.sample(["a", "b", "c", "d", "e"], SamplingSettings(1, 2))
        assert len(server.log) == 1


def test_a_refusal_stops_requests_that_are_waiting_to_retry():
    slow = RetryPolicy(max_retries=8, base_s=0.5, cap_s=0.5)
    with FakeOpenAIServer(generate, api_key=KEY, faults=["echo_key"] + ["500"] * 200) as server:
        with (
            client(server, retry=slow, max_concurrency=2) as backend,
            pytest.raises(APIError) as err,
        ):
            backend.sample([f"p{i}" for i in range(10)], SamplingSettings(1, 2))
        assert len(server.log) <= 4  # before: the 9 others were each tried 9 times
    assert "answered 400" in str(err.value)  # the cause, not a retried request's complaint


def test_cli_api_timeout_and_max_retries_reach_the_client(tmp_path):
    data, out = _texts(tmp_path / "texts.jsonl"), tmp_path / "run"
    with FakeOpenAIServer(generate, faults=["500"] * 100, models=("m",)) as server:
        args = ["run", "--model", "m", "--data", str(data), "--out", str(out), "--no-blind"]
        api = ["--api-base", server.base_url, "--api-key-env", ENV, "--api-concurrency", "1"]
        result = CliRunner().invoke(
            app,
            [*args, *api, "--attacks", "samia", "--api-max-retries", "0", "--api-timeout", "7.5"],
        )
        assert len(server.log) == 1  # one attempt, then nothing else was sent
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "--api-max-retries (now 0)" in flat and "--api-timeout (now 7.5 s)" in flat
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"api_timeout": 0.0}, "'timeout'"),
        ({"api_timeout": float("nan")}, "'timeout'"),
        ({"api_max_retries": -1}, "'max_retries'"),
    ],
)
def test_bad_api_retry_options_are_refused(options, match, tmp_path):
    with pytest.raises(ConfigError, match=match):  # the HTTP backend's options, before any work
        resolve(
            config_from_flags(
                model="m", data="d", out=tmp_path, api_base="http://127.0.0.1:9/v1", **options
            )
        )


def test_api_retry_options_without_an_api_target_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="--api-base"):
        config_from_flags(model="m", data="d", out=tmp_path, api_max_retries=2)


# -- item 11 (API part): bodies of the wrong shape ------------------------------------------------
@pytest.mark.parametrize(
    ("fault", "mode", "field"),
    [
        ("usage_str", "completions", '"usage" is "lots of tokens"'),
        ("tokens_float", "completions", '"usage.prompt_tokens" is 2.5'),
        ("tokens_str", "completions", '"usage.completion_tokens" is "40"'),
        ("text_null", "completions", "choice 0 has text = null"),
        ("text_null", "chat", "choice 0 has message.content = null"),
    ],
)
def test_a_body_of_the_wrong_shape_fails_at_once_naming_the_field(fault, mode, field):
    with FakeOpenAIServer(generate, faults=[fault]) as server, client(server, mode=mode) as backend:
        with pytest.raises(APIError) as err:
            backend.sample(NON_LATIN + ["third"], SamplingSettings(2, 3))
        usage = backend.usage()
    message = str(err.value)
    assert field in message and "answered 200" in message
    assert usage["attempts"] == 1 and usage["failed"] == 1 and usage["cancelled"] == 2
    assert "OpenAI-compatible" in message or "no text" in message


def test_well_formed_non_latin_answers_round_trip_exactly():
    with FakeOpenAIServer(generate) as server, client(server, max_n_per_request=3) as backend:
        out = backend.sample(NON_LATIN, SamplingSettings(4, 3))
        usage = backend.usage()
    assert out == [[NON_LATIN[0], NON_LATIN[1], NON_LATIN[0], NON_LATIN[0]]] * 2
    assert usage["completion_tokens"] == 2 * 4 * 3 and "None" not in str(out)


def test_usage_counts_accept_absent_and_integral_values_only():
    assert usage_tokens(None) == (0, 0)
    assert usage_tokens({}) == (0, 0)
    assert usage_tokens({"prompt_tokens": 12.0, "completion_tokens": 3}) == (12, 3)
    for bad in ("12", True, -1, 2.5, [3]):
        assert isinstance(usage_tokens({"prompt_tokens": bad}), str)
    assert isinstance(usage_tokens("lots"), str) and isinstance(usage_tokens([1, 2]), str)
