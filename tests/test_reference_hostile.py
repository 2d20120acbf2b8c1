"""Regression tests from a hostile test of reference models: manifests where no sample is OUT, a
single model for LiRA, typo'd keys and a model listed twice are teaching errors before any
model work (they were NaN columns, an unexplained error after scoring, or silently ignored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_runs import logprob_rows, run_with_references

from imprint.attacks import RunContext, build_attacks
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.training_manifest import ReferenceModel, ReferenceSet, load_reference_set

SAMPLES = [Sample("x", "北京 text", 1), Sample("y", "Москва text", 0)]
ALL_IN = ReferenceSet(
    tuple(ReferenceModel(f"r{i}", "s", frozenset({"x", "y"})) for i in range(2))
)  # fmt: skip


@pytest.mark.parametrize(
    ("attack", "modes", "match"),
    [
        ("rmia", ("online", "offline"), "offline mode: every reference model trained on every"),
        ("rmia", ("offline",), "rmia.modes=online"),
        ("lira", ("online",), "online mode: every reference model trained on every"),
        ("lira", ("offline",), "no OUT distribution"),
    ],
)
def test_no_sample_out_for_any_model_is_refused_at_preparation(attack, modes, match) -> None:
    run = RunContext(references=ALL_IN)
    (built,) = build_attacks([attack], run, params={attack: {"modes": modes}})
    with pytest.raises(ConfigError, match=match):
        built.prepare(SAMPLES, run)


def test_rmia_online_needs_no_out_model() -> None:
    run = RunContext(references=ALL_IN)
    (rmia,) = build_attacks(["rmia"], run, params={"rmia": {"modes": ("online",)}})
    assert rmia.prepare(SAMPLES, run).attack.membership is not None


def test_lira_with_one_reference_model_is_refused_at_preparation() -> None:
    one = ReferenceSet((ReferenceModel("r0", "s", frozenset({"x"})),))
    run = RunContext(references=one)
    (lira,) = build_attacks(["lira"], run)
    with pytest.raises(ConfigError, match="at least 2 reference models.*rmia works with one"):
        lira.prepare(SAMPLES, run)
    # one model is enough for rmia with a fixed offline a (a=auto needs a second to tune a)
    (rmia,) = build_attacks(["rmia"], run, params={"rmia": {"a": 0.3}})
    assert rmia.prepare(SAMPLES, run).attack.membership == {"北京 text": (1,), "Москва text": (0,)}
    with pytest.raises(ConfigError, match="at least 2 reference models"):
        build_attacks(["rmia"], run)  # before any model loads


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("typo.yaml", "models:\n  - {spec: s, members: [x], nonmember: [y]}", r"'nonmember'"),
        ("top.yaml", "modles: []\nmodels:\n  - {spec: s, members: [x]}", r"'modles'"),
        ("twice.json", '{"m1": ["x"], "m1": ["y"]}', "'m1' appears twice"),
    ],
)
def test_manifest_typos_and_repeated_models_are_refused(tmp_path: Path, name, content, match):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=match):
        load_reference_set(str(path))


def test_cli_refuses_an_all_in_manifest_before_any_forward_pass(
    tmp_path: Path, tiny_model_dir: Path, tiny_ref_dir: Path
) -> None:
    rows = [{"text": f"текст {i} words", "label": i % 2} for i in range(6)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    ids = [f"d:{i + 1}" for i in range(6)]  # the run's ids: file stem and line
    manifest = tmp_path / "m.json"
    models = [{"spec": str(m), "members": ids} for m in (tiny_model_dir, tiny_ref_dir)]
    manifest.write_text(json.dumps({"models": models}))
    result = run_with_references(tmp_path, tiny_model_dir, data, manifest)
    assert result.exit_code != 0 and "no OUT distribution" in result.output
    assert not (tmp_path / "out").exists()
    # was: every pass scored, then 'no population text z has a finite ratio'
    assert logprob_rows(tmp_path / "c.sqlite") == 0
