"""Fixes that the errors suggest, each checked to be a valid way to do what it says:
``--model-arg`` errors keep the backend's option names (``max_length``, not ``--max-length``,
which ``--model-arg`` reads as ``__max_length``), a value from a flag is fixed with that flag,
a short API key does not mask letters of a quoted server body, and the too-long-prefix error
does not suggest a fixed shot count the user may already be under. No model is loaded: each
run stops at the error it is about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.backends.base import ScoreRequest
from imprint.backends.http_checks import mask_secret
from imprint.cli import app
from imprint.errors import ConfigError
from imprint.requests.logprobs import check_context

runner = CliRunner()


def _run(tmp_path: Path, model: Path, *args: str) -> tuple[int, str]:
    rows = [{"text": f"member text number {i}", "label": 1} for i in range(3)]
    rows += [{"text": f"other text number {i}", "label": 0} for i in range(3)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = ["run", "--model", str(model), "--data", str(data), "--device", "cpu"]
    result = runner.invoke(app, [*argv, "--out", str(tmp_path / "out"), *args])
    return result.exit_code, " ".join(result.output.split())


def test_misspelt_model_arg_is_fixed_with_the_backends_own_name(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    code, out = _run(tmp_path, tiny_model_dir, "--model-arg", "max_lenght=5")
    assert code != 0 and "has no option 'max_lenght'" in out, out
    assert "did you mean 'max_length'?" in out, out
    assert "it takes device, dtype, max_length, start_token, stride" in out, out
    assert "--model-arg max_length=2048" in out and "--max-length" not in out, out


def test_following_the_model_arg_hint_does_not_loop(tmp_path: Path, tiny_model_dir: Path) -> None:
    code, out = _run(tmp_path, tiny_model_dir, "--model-arg", "max_length=-5")
    assert code != 0 and "option 'max_length'" in out, out
    assert "e.g. --model-arg max_length=2048" in out and "--max-length" not in out, out


def test_a_value_from_a_flag_is_fixed_with_that_flag(tmp_path: Path, tiny_model_dir: Path) -> None:
    code, out = _run(tmp_path, tiny_model_dir, "--max-length", "-5")
    assert code != 0 and "(from --max-length)" in out, out
    assert "e.g. --max-length 2048" in out and "--model-arg --max-length" not in out, out


def test_option_given_twice_names_the_model_arg_as_typed(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    code, out = _run(tmp_path, tiny_model_dir, "--max-length", "64", "--model-arg", "max_length=32")
    assert code != 0 and "by --max-length and by --model-arg max_length=..." in out, out


def test_a_short_api_key_leaves_a_quoted_body_readable() -> None:
    body = '{"id": "cmpl-1", "object": "text_completion"}'
    assert mask_secret(body, "x") == body
    assert (
        mask_secret("Authorization: Bearer x rejected", "x") == "Authorization: Bearer *** rejected"
    )


def test_a_real_api_key_is_still_masked_anywhere() -> None:
    key = "sk-proj-abcdefghijklmnop"
    assert key not in mask_secret(f"bad key{key}; echoed {key[:10]}...", key)
    assert mask_secret(f'{{"error": "key={key}"}}', key) == '{"error": "key=***"}'


class _WordBackend:
    """Counts words as tokens (plus one for BOS) in a context of 10: all ``check_context`` asks."""

    max_length = 10

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) + 1 for t in texts]


def test_too_long_prefix_suggests_fewer_shots_than_now_not_a_fixed_count() -> None:
    requests = [ScoreRequest("a text of five words", " ".join(["shot"] * 8))]
    with pytest.raises(ConfigError) as caught:
        check_context(_WordBackend(), "target", requests)
    message = str(caught.value)
    assert "n_shots=3" not in message, message  # the user may already have given 2
    assert "below its current value" in message and "n_shots=N" in message, message
