"""PETAL's default surrogate (issue 19 item 13): ``auto`` never picks the target itself, records
what it picked and why, and stops before any model loads when no offline model fits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import HashEmbedder, wikimia_subset

from imprint.attacks.base import RunContext, build_attacks, hyperparameters
from imprint.attacks.petal import PETAL, choose_surrogate
from imprint.backends.base import SAMPLING, Backend
from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError
from imprint.run import execute_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _petal(target_spec: str, **params) -> PETAL:
    (attack,) = build_attacks(
        ["petal"], RunContext(target_spec=target_spec), params={"petal": params} if params else None
    )
    assert isinstance(attack, PETAL)
    return attack


def test_auto_surrogate_is_never_the_default_target():
    # the project's own default target: its default surrogate was the same model
    attack = _petal("smollm2-135m")
    assert attack.surrogate == "gemma3-270m"
    assert attack.surrogate_choice == "chosen automatically ('smollm2-135m' is the target)"
    # the other way round, and any other target takes the first offline model
    assert _petal("gemma3-270m").surrogate == "smollm2-135m"
    assert _petal("some/other-model").surrogate == "smollm2-135m"
    # the manifest records the choice; a surrogate given is recorded as given
    recorded = hyperparameters(attack)
    assert recorded["surrogate"] == "gemma3-270m"
    assert "is the target" in recorded["surrogate_choice"]
    given = _petal("smollm2-135m", surrogate="gguf:/x.gguf")
    assert (given.surrogate, given.surrogate_choice) == ("gguf:/x.gguf", "given (petal.surrogate)")


def test_no_fitting_offline_model_is_refused_up_front(monkeypatch):
    monkeypatch.setattr(
        "imprint.attacks.petal.alias_installed", lambda spec: spec == "smollm2-135m"
    )
    with pytest.raises(ConfigError, match=r"--param petal\.surrogate=SPEC") as err:
        _petal("smollm2-135m")
    assert "'gemma3-270m' is not installed" in str(err.value)
    assert "'smollm2-135m' is the target" in str(err.value)
    assert choose_surrogate("gemma3-270m")[0] == "smollm2-135m"

    class Target(Backend):
        spec = "smollm2-135m"
        capabilities = frozenset({SAMPLING})

    with pytest.raises(ConfigError, match="petal.surrogate"):
        PETAL().check_backend(Target())  # a library caller without a run: same refusal


def test_an_explicit_surrogate_that_is_the_target_is_still_refused():
    class Target(Backend):
        spec = "smollm2-135m"
        capabilities = frozenset({SAMPLING})

        def sample(self, prompts, settings):
            return [["x"] * settings.n for _ in prompts]

    with pytest.raises(ConfigError, match="is the target itself"):
        PETAL(surrogate="smollm2-135m").check_backend(Target())
    PETAL().check_backend(Target())  # auto: gemma3-270m is installed here


def test_run_whose_target_is_the_first_offline_model_takes_the_next(
    tiny_model_dir, tiny_ref_dir, tmp_path, monkeypatch, caplog
):
    """`imprint run --model M --attacks petal` where M is the first auto candidate (as
    smollm2-135m is by default): the run takes the next candidate, scores, and records it."""
    monkeypatch.setattr(
        "imprint.attacks.petal.AUTO_SURROGATES", (str(tiny_model_dir), str(tiny_ref_dir))
    )
    monkeypatch.setattr("imprint.requests.embed.default_embedder", HashEmbedder)
    result = execute_run(
        config_from_flags(
            model=str(tiny_model_dir),
            data=str(wikimia_subset(tmp_path, 3)),
            out=tmp_path / "run",
            attacks=("petal",),
            truncate_words=8,
            device="cpu",
            cache=tmp_path / "signals.sqlite",
            progress=False,
            n_bootstrap=20,
            blind=False,
        )
    )
    assert np.isfinite(result.scores["petal"]).all()
    recorded = json.loads((tmp_path / "run" / "manifest.json").read_text())["attacks"]["petal"]
    assert recorded["surrogate"] == str(tiny_ref_dir)
    assert (
        recorded["surrogate_choice"]
        == f"chosen automatically ({str(tiny_model_dir)!r} is the target)"
    )
    assert result.manifest["requests"]["surrogate"]["logprobs"]["executed"] > 0
    assert any("petal: surrogate" in r.getMessage() for r in caplog.records)
