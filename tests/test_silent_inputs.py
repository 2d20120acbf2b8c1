"""Inputs that were accepted silently or refused only after work (issue 37, items 16 and 19):
an empty attack list, a clamped --model-args max_length, an experiment plan that passes what
its run refuses, a text of zero-width characters only."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import yaml
from cli_helpers import cli, small_data

from imprint.errors import ConfigError

# -- run --attacks "" ----------------------------------------------------------------------------


@pytest.mark.parametrize("attacks", ["", " , ,"])
def test_run_with_no_attack_named_is_refused_before_any_work(tmp_path: Path, attacks: str) -> None:
    out = tmp_path / "run"
    code, output = cli("run", "--model", tmp_path / "no-such-model", "--data",
                       small_data(tmp_path), "--attacks", attacks, "--out", out)  # fmt: skip
    assert code == 2, output
    assert "--attacks" in output and "no attack" in output and "loss" in output, output
    assert not out.exists()


def test_a_run_config_without_attacks_is_refused() -> None:
    from imprint.run import RunConfig

    with pytest.raises(ConfigError, match="--attacks names no attack"):
        RunConfig(model="m", data="d", out=Path("o"), attacks=())


# -- experiment --plan refuses the games its run refuses -----------------------------------------


def _game_grid(tmp_path: Path, model: Path, **config: object) -> Path:
    sweep = config.pop("sweep", [1])
    rng = random.Random(0)
    words = ["the", "cat", "dog", "ran", "sat", "on", "mat", "house", "tree", "river", "blue"]
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(" ".join(rng.choice(words) for _ in range(10)) for _ in range(40)))
    game = {"model": str(model), "pool": str(pool), "pool_size": 20, "words": 8,
            "batch_size": 8, "max_length": 64, "canary_repetitions": [1],
            "canaries_per_repetition": 2, "canary_generator": "random", "canary_words": 6,
            **config}  # fmt: skip
    grid = tmp_path / "g.yaml"
    spec = {"games": [{"name": "tiny", "epochs": sweep, "config": game}],
            "attacks": ["loss"], "settings": {"n_bootstrap": 20, "device": "cpu"}}  # fmt: skip
    grid.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return grid


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"dp_epsilon": 8.0, "method": "lora", "sweep": [1, 2]},
            r"games\[0\] \(tiny\): a DP game is built for one epoch count, not \[1, 2\]",
        ),
        (
            {"pool_size": 40, "heldout": 10},
            r"games\[0\] \(tiny\): pool .* has 40 usable texts.*heldout=10",
        ),
    ],
)
def test_experiment_plan_refuses_a_game_its_run_refuses(
    tmp_path: Path, tiny_model_dir: Path, config: dict, match: str
) -> None:
    grid = _game_grid(tmp_path, tiny_model_dir, **config)
    for plan in ("--plan", None):  # the plan says what the run says, before any training
        code, output = cli("experiment", grid, "--out", tmp_path / "study", *([plan] * bool(plan)))
        assert code == 2, output
        assert re.search(r"g\.yaml: " + match, output), output
    assert not (tmp_path / "study" / "games").exists()


# -- max_length beyond the model's context --------------------------------------------------------


def test_a_max_length_beyond_the_context_is_refused_not_clamped(tiny_model_dir: Path) -> None:
    """It was clamped to the context (128 here) while the manifest's config kept the value."""
    from imprint.backends.hf import HFLogprobBackend

    with pytest.raises(ConfigError) as refused:
        HFLogprobBackend(str(tiny_model_dir), device="cpu", max_length=999_999_999)
    message = str(refused.value)
    assert "999999999" in message and "128 tokens" in message and "max_length" in message
    assert "--max-length" in message and "--model-args" in message
    assert HFLogprobBackend(str(tiny_model_dir), device="cpu", max_length=128).max_length == 128


# -- a text of zero-width characters only is empty -------------------------------------------------

INVISIBLE = "\u200b\u200c\u200d\ufeff"


def test_a_text_of_zero_width_characters_only_is_refused_as_empty(tmp_path: Path) -> None:
    import json

    from imprint.data.loaders import load_file
    from imprint.errors import DataError

    rows = [{"text": "a member text", "label": 1}, {"text": INVISIBLE, "label": 0},
            {"text": "a non-member text", "label": 0}]  # fmt: skip
    path = tmp_path / "zw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2.*empty.*invisible"):
        load_file(path)
    dropped = load_file(path, on_bad="drop")
    assert len(dropped.samples) == 2 and dropped.dropped == {"empty text": 1}


def test_a_zero_width_line_is_skipped_like_an_empty_line_in_every_txt_pool(tmp_path: Path) -> None:
    from imprint.data.pools import load_shot_pool
    from imprint.game.texts import load_pool

    pool = tmp_path / "pool.txt"
    pool.write_text(f"first text here\n\n{INVISIBLE}\n \u2060\u00ad \nsecond text here\n", "utf-8")
    shots = load_shot_pool("nonmembers", str(pool))
    assert [s.text for s in shots] == ["first text here", "second text here"]
    texts, _, _ = load_pool(str(pool), words=None)
    assert [s.text for s in texts] == ["first text here", "second text here"]


def test_is_blank_keeps_visible_text_and_marks_invisible_text() -> None:
    from imprint.data.text_checks import is_blank

    assert is_blank("") and is_blank(" \t\n") and is_blank(INVISIBLE) and is_blank("\u2060 \x00")
    assert not is_blank("a\u200b") and not is_blank("\u0301e") and not is_blank("日本")


def test_experiment_plan_passes_a_game_its_run_builds(tmp_path: Path, tiny_model_dir: Path) -> None:
    grid = _game_grid(tmp_path, tiny_model_dir, sweep=[1, 2])
    code, output = cli("experiment", grid, "--out", tmp_path / "study", "--plan")
    assert code == 0 and "game tiny: epochs [1, 2]" in output, output
    assert not (tmp_path / "study" / "games").exists()  # a plan trains nothing
