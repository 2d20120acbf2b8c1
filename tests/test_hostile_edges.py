"""Regression tests from the round-3 hostile test (issue 19, items 6-8, 10-12 and two of 15):
repeated YAML keys, output folders of another kind, unwritable --out, an unreachable Ray address,
and what ``imprint experiment --plan`` checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imprint.errors import ConfigError
from imprint.strict_yaml import DuplicateKeyError, safe_load

SRC = Path(__file__).resolve().parents[1] / "src" / "imprint"


# -- item 8: a YAML key given twice ---------------------------------------------------------------


def test_strict_yaml_names_both_lines_of_a_repeated_key() -> None:
    with pytest.raises(DuplicateKeyError, match=r"'attacks' is given twice \(first at line 1, "
                       r"again at line 3\)"):  # fmt: skip
        safe_load("attacks: [loss, zlib]\nmodels: [m]\nattacks: [min_k]\n")
    nested = "models:\n  - {name: a, model: x, name: b}\n"
    with pytest.raises(DuplicateKeyError, match="'name' is given twice"):
        safe_load(nested)


def test_strict_yaml_still_reads_merge_keys_and_plain_files() -> None:
    text = "base: &b {k: 1, m: 2}\nuse:\n  <<: *b\n  k: 3\n"
    assert safe_load(text) == {"base": {"k": 1, "m": 2}, "use": {"k": 3, "m": 2}}
    assert safe_load("a: [1, 2]\nb: {c: d}\n") == {"a": [1, 2], "b": {"c": "d"}}


def test_a_grid_file_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    from imprint.study.spec import load_spec

    path = tmp_path / "g.yaml"
    path.write_text("models: [m]\nbenchmarks: [x.jsonl]\nattacks: [loss, zlib]\n"
                    "attacks: [min_k]\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError, match=r"g.yaml: not valid YAML at line 4.*'attacks' is "
                       r"given twice \(first at line 3, again at line 4\)"):  # fmt: skip
        load_spec(path)


def test_a_training_manifest_listing_a_model_twice_is_refused(tmp_path: Path) -> None:
    from imprint.training_manifest import load_reference_set

    path = tmp_path / "refs.yaml"
    path.write_text("m1: [a, b]\nm1: [c]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"refs.yaml.*'m1' is given twice \(first at line 1"):
        load_reference_set(str(path))


def test_every_yaml_read_goes_through_the_strict_loader() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        if path.name != "strict_yaml.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\byaml\.(safe_load|load|full_load|unsafe_load)\(", line)
    ]
    assert offenders == []
