"""Issue 24, naming: scikit-learn-style metric names, --model-args, one-line CLI errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from imprint import metrics
from imprint.metrics import roc_auc_score


def test_roc_auc_score_is_the_area_from_labels_and_scores():
    labels = np.array([1, 1, 0, 0, 1, 0])
    scores = np.array([0.9, 0.4, 0.5, 0.1, 0.8, 0.3])
    # brute force: P(member outscores non-member), ties 1/2
    pairs = [(m, n) for m in scores[labels == 1] for n in scores[labels == 0]]
    expected = sum(1.0 if m > n else 0.5 if m == n else 0.0 for m, n in pairs) / len(pairs)
    assert roc_auc_score(labels, scores) == pytest.approx(expected)
    assert "roc_auc_score" in metrics.__all__


def test_auc_is_a_deprecated_alias_that_warns():
    labels, scores = [1, 0, 1, 0], [0.7, 0.2, 0.4, 0.5]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = metrics.auc(labels, scores)
    assert value == roc_auc_score(labels, scores)
    assert any(
        issubclass(w.category, FutureWarning) and "roc_auc_score" in str(w.message) for w in caught
    )


# -- --model-args as lm-eval users type it ----------------------------------------------------


def test_model_args_split_like_lm_eval():
    from imprint.cli.run import split_model_args

    assert split_model_args(["dtype=bfloat16,max_length=512", "device=cpu"]) == [
        "dtype=bfloat16",
        "max_length=512",
        "device=cpu",
    ]
    assert split_model_args(["stop=a,b,dtype=float32"]) == ["stop=a,b", "dtype=float32"]
    # a trailing or doubled comma is an empty part, dropped as lm-eval drops it (hostile test)
    assert split_model_args(["dtype=float32,"]) == ["dtype=float32"]
    assert split_model_args(["dtype=float32,,max_length=64"]) == ["dtype=float32", "max_length=64"]


@pytest.mark.parametrize(
    "item", ["stop=a,,b", "stop=a,,,b,dtype=float32", "dtype=float32,stop=x,,y"]
)
def test_an_empty_part_inside_a_value_is_refused_not_dropped(item, tiny_model_dir, tmp_path):
    """Review 26: 'stop=a,,b' became stop=a,b silently; an empty part with value text after
    it is refused in one line (between pairs or at the end it is still dropped)."""
    from typer.testing import CliRunner

    from imprint.cli import app
    from imprint.cli.run import split_model_args
    from imprint.errors import ConfigError

    with pytest.raises(ConfigError, match=r"an empty part inside the value of 'stop'"):
        split_model_args([item])
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a b c", "label": 1}\n{"text": "d e f", "label": 0}\n')
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--out",
            str(tmp_path / "o"), "--model-args", item]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "empty part inside the value" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag", ["--model-args", "--model_args", "--model-arg"])
def test_model_args_flags_reach_the_backend_options(flag, tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from imprint.cli import app

    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a b c", "label": 1}\n{"text": "d e f", "label": 0}\n')
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--out",
            str(tmp_path / "o"), flag, "dtype=float32,bogus_key=1"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    # both pairs were read: the typed options refuse the unknown one, naming it
    assert "bogus_key" in result.output and "dtype" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


# -- every CLI error one line -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--model", "x"], "Missing option '--data'"),
        (["run", "--model", "x", "--data", "y", "--no-such-flag"], "--no-such-flag"),
        (["run", "--model", "x", "--data", "y", "--seed", "abc"], "--seed"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["attacks", "--format", "xml"], "xml"),
    ],
)
def test_usage_errors_are_one_error_line_with_exit_2(args, needle):
    from typer.testing import CliRunner

    from imprint.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert needle in lines[0] and "--help" in lines[0]


def test_api_names_work_on_the_command_line_and_in_a_grid(tmp_path):
    import typer

    from imprint.cli import app
    from imprint.study.spec import load_spec

    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    flags = {opt for param in run.params for opt in param.opts}
    for flag in ("--truncate-words", "--n-bootstrap", "--model-args", "--shot-holdout"):
        assert flag in flags, flag
    grid = tmp_path / "g.yaml"
    grid.write_text(
        "models: [{name: m, model: smollm2-135m, model_args: {dtype: float32}}]\n"
        "benchmarks: [{data: wikimia:32, truncate_words: 16}]\nattacks: [loss]\n"
    )
    spec = load_spec(grid)
    assert spec.models[0].args == {"dtype": "float32"}
    assert spec.benchmarks[0].truncate == 16
