"""resolve() checks every model before any loads: a reference model that cannot be found, or
that cannot give log-probabilities, fails there, naming the reference."""

from __future__ import annotations

import pytest

from imprint.errors import ConfigError
from imprint.run import RunConfig, resolve


def test_a_missing_reference_model_fails_in_resolve_naming_it(tiny_model_dir, tmp_path):
    config = RunConfig(
        model=str(tiny_model_dir), data="wikimia:32", out=tmp_path / "o", attacks=("ref",),
        refs=(("r", "no/such/model-xyz"),),  # (a bare name is a hub id: gpt2)
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"reference model r='no/such/model-xyz': unknown"):
        resolve(config)


def test_an_api_reference_model_is_refused_as_giving_no_logprobs(tiny_model_dir, tmp_path):
    config = RunConfig(
        model="openai:gpt", api_base="http://127.0.0.1:9/v1", data="wikimia:32",
        out=tmp_path / "o", attacks=("samia",), refs=(("r", "openai:gpt"),),
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"reference model r='openai:gpt'.*no log-prob"):
        resolve(config)
