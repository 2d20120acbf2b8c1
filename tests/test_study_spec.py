"""Experiment files: what a valid file becomes, and the error a wrong one gets (file, place,
fix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from imprint.backends.models import default_cache_path
from imprint.errors import ConfigError
from imprint.study.spec import load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BASE: dict[str, Any] = {
    "models": ["smollm2-135m"],
    "benchmarks": ["wikimia:32"],
    "attacks": ["loss", "min_k"],
}


def parse(**changes: Any) -> Any:
    return parse_spec({**BASE, **changes}, Path("exp.yaml"))


def test_a_valid_file_becomes_typed_cells(tmp_path: Path):
    path = tmp_path / "grid.yaml"
    content = {
        "models": [
            "smollm2-135m",
            {"name": "Gemma 3", "model": "gemma3-270m", "args": {"dtype": "float32"}},
        ],
        "benchmarks": [
            "wikimia:32",
            {"name": "WikiMIA-64 短", "data": "wikimia:64", "n_per_label": 7},
        ],
        "data": {"n_per_label": 50, "truncate": 64},
        "attacks": ["loss", "min_k", "recall"],
        "params": {"recall": {"n_shots": "3"}},
        "sweep": {"min_k.k": [0.1, "0.2"]},
        "refs": {"base": "smollm2-135m"},
        "settings": {"seed": 3, "n_bootstrap": 100},
        "table": {"columns": "benchmark", "fpr": 0.05},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(content, allow_unicode=True), encoding="utf-8")
    spec = load_spec(path)
    assert spec.name == "grid" and spec.out == Path("studies/grid")
    # the grid's store is a run's ($IMPRINT_CACHE_DIR), not one of its own (issue 24)
    assert spec.cache == default_cache_path()
    assert [m.name for m in spec.models] == ["smollm2-135m", "Gemma 3"]
    assert spec.models[1].args == {"dtype": "float32"}
    assert [(b.name, b.n_per_label, b.truncate) for b in spec.benchmarks] == [
        ("wikimia:32", 50, 64),
        ("WikiMIA-64 短", 7, 64),  # its own value wins over the data defaults
    ]
    assert [v.label for v in spec.variants] == ["loss", "min_k (k=0.1)", "min_k (k=0.2)", "recall"]
    assert spec.variants[2].params == {"k": 0.2}  # text coerced to the declared type
    assert spec.variants[3].params == {"n_shots": 3}
    assert spec.refs == (("base", "smollm2-135m"),)
    assert (spec.settings.seed, spec.settings.n_bootstrap) == (3, 100)
    assert (spec.table.columns, spec.table.fpr) == ("benchmark", 0.05)
    assert load_spec(path, out=tmp_path / "o").cache == default_cache_path()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"modles": ["x"]}, r"exp\.yaml: unknown key 'modles' \(did you mean 'models'\?\)"),
        ({"attacks": ["loss", "min_kk"]}, r"unknown attack 'min_kk'; did you mean min_k"),
        ({"attacks": ["loss", "loss"]}, r"attacks: attack 'loss' is given twice"),
        ({"attacks": "loss"}, r"expected a list \(lines starting with '- '\), got 'loss'"),
        ({"params": {"min_k": {"kk": 1}}}, r"attack 'min_k' has no parameter\(s\) \['kk'\]"),
        ({"params": {"zlib": {}}}, r"params: unknown key 'zlib'"),
        ({"sweep": {"min_k.k": ["abc"]}}, r"parameter 'k': expected a finite number"),
        ({"sweep": {"zlib.x": [1]}}, r"'zlib\.x': use ATTACK\.PARAM with ATTACK one of"),
        ({"sweep": {"min_k.k": [1.5]}}, r"min_k k must be in \(0, 1\]"),
        ({"attacks": ["ref"]}, r"needs at least one reference model.*add refs: \{NAME: MODEL\}"),
        ({"models": [{"name": "a"}]}, r"models\[0\]: a model entry needs 'model'"),
        ({"models": [{"model": "x", "arg": {}}]},
         r"models\[0\]: unknown key 'arg' \(did you mean 'args'\?\)"),
        ({"models": ["a", {"name": "a", "model": "b"}]}, r"model name 'a' is given twice"),
        ({"benchmarks": [{"data": "wikimia:32", "n_per_label": 0}]},
         r"benchmarks\[0\]\.n_per_label: expected a whole number >= 1"),
        ({"benchmarks": [{"data": "x", "dedupe": "yes"}]}, r"dedupe: expected true or false"),
        ({"benchmarks": []}, r"is empty; list at least one entry"),
        ({"settings": {"n_bootstrap": 0}}, r"settings\.n_bootstrap: expected a whole number >= 1"),
        ({"settings": {"seeds": 1}}, r"settings: unknown key 'seeds' \(did you mean 'seed'\?\)"),
        ({"table": {"columns": "attack"}},
         r"table\.columns: expected one of \('model', 'benchmark'\)"),
        ({"table": {"fpr": 1}}, r"table\.fpr: expected an FPR bound in \(0, 1\)"),
        ({"refs": {"target": "x"}}, r"refs: 'target' is the model under attack"),
        ({"games": [{"name": "g", "epochs": [1], "config": {"methd": "full"}}]},
         r"games\[0\]\.config: .*methd"),
        ({"games": [{"name": "g", "epochs": [0]}]},
         r"games\[0\]\.epochs\[0\]: expected a whole number >= 1"),
    ],
)  # fmt: skip
def test_errors_name_the_file_the_place_and_the_fix(changes: dict[str, Any], message: str):
    with pytest.raises(ConfigError, match=message):
        parse(**changes)


def test_missing_sections_say_what_to_add():
    with pytest.raises(ConfigError, match=r"no 'attacks': list the attacks"):
        parse_spec({"models": ["m"], "benchmarks": ["b"]}, Path("e.yaml"))
    with pytest.raises(ConfigError, match=r"no 'models' \(nor 'games'\)"):
        parse_spec({"benchmarks": ["b"], "attacks": ["loss"]}, Path("e.yaml"))
    with pytest.raises(ConfigError, match=r"no 'benchmarks'"):
        parse_spec({"models": ["m"], "attacks": ["loss"]}, Path("e.yaml"))
    with pytest.raises(ConfigError, match=r"expected a mapping"):
        parse_spec(["loss"], Path("e.yaml"))


def test_file_level_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"experiment file .*nope\.yaml not found"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [a\nattacks: [loss]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML at line \d+, column \d+"):
        load_spec(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"empty\.yaml is empty"):
        load_spec(empty)
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text"):
        load_spec(latin)


def test_game_sweeps_are_checked_and_sorted():
    spec = parse_spec(
        {"games": [{"name": "g", "epochs": [4, 1, 2], "config": {"pool_size": 100, "words": 8}}],
         "attacks": ["loss"]},
        Path("g.yaml"),
    )  # fmt: skip
    assert spec.models == () and spec.benchmarks == ()
    assert spec.games[0].epochs == (1, 2, 4) and spec.games[0].config["pool_size"] == 100


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_file_is_valid(name: str):
    spec = load_spec(EXAMPLES / name)
    assert spec.variants and (spec.models or spec.games)


def test_the_examples_the_issue_asks_for_exist():
    names = {p.name for p in EXAMPLES.glob("*.yaml")}
    assert {"wikimia-offline.yaml", "game-epochs.yaml", "mink-k-sweep.yaml", "mimir.yaml"} <= names
    wikimia = load_spec(EXAMPLES / "wikimia-offline.yaml")
    assert [b.data for b in wikimia.benchmarks] == ["wikimia:32", "wikimia:64"]
    assert [m.model for m in wikimia.models] == ["smollm2-135m", "gemma3-270m"]


def test_the_cli_reports_a_bad_file_in_one_line_and_plans_a_good_one(tmp_path: Path):
    from typer.testing import CliRunner

    from imprint.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, "attacks": ["los"]}), encoding="utf-8")
    res = CliRunner().invoke(app, ["experiment", str(bad)])
    assert res.exit_code == 2
    assert "error:" in res.output and "unknown attack 'los'" in res.output
    assert not (tmp_path / "studies").exists()
    res = CliRunner().invoke(app, ["experiment", str(EXAMPLES / "mink-k-sweep.yaml"), "--plan"])
    assert res.exit_code == 0, res.output
    assert "attack min_k (k=0.05)" in res.output and "12 attack variant(s)" in res.output


def test_a_study_folder_with_its_own_cache_keeps_using_it(tmp_path: Path):
    """Review 22: studies before issue 24 kept their store at <out>/cache.sqlite; a rerun of
    such a folder reads it (and says so) instead of recomputing into the global store."""
    from typer.testing import CliRunner

    from imprint.cli import app

    old, new = tmp_path / "old", tmp_path / "new"
    (old / "cells").mkdir(parents=True)  # a study folder as earlier releases wrote it
    (old / "cache.sqlite").write_bytes(b"")
    spec = parse_spec(dict(BASE), Path("exp.yaml"), out=old)
    assert spec.cache == old / "cache.sqlite"
    assert "cache.sqlite" in spec.cache_note and "cache:" in spec.cache_note
    fresh = parse_spec(dict(BASE), Path("exp.yaml"), out=new)
    assert fresh.cache == default_cache_path() and fresh.cache_note == ""
    # an explicit 'cache' wins over the folder's
    chosen = parse_spec({**BASE, "cache": str(tmp_path / "c.sqlite")}, Path("e.yaml"), out=old)
    assert chosen.cache == tmp_path / "c.sqlite" and chosen.cache_note == ""
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    res = CliRunner().invoke(app, ["experiment", str(grid), "--out", str(old), "--plan"])
    assert res.exit_code == 0, res.output
    assert f"cache {old / 'cache.sqlite'}" in " ".join(res.output.split())
    assert "study folder's own store" in " ".join(res.output.split())
