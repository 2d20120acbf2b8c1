"""The shared value coercion (imprint.coerce) under both callers' rules: typed attack parameters
(PARAM_RULES) and typed backend options (OPTION_RULES), including where they differ on purpose."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal

import pytest

import imprint.coerce as coerce_module
from imprint.attacks.params import PARAM_RULES
from imprint.backends.options import OPTION_RULES
from imprint.coerce import Mismatch, TextRules, coerce, describe_type

BOTH = [PARAM_RULES, OPTION_RULES]


@pytest.mark.parametrize("rules", BOTH)
@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (" 12 ", int, 12),
        ("-3", int, -3),
        ("١٢", int, 12),  # Arabic-Indic digits are digits to Python
        ("１２", int, 12),  # full-width digits too
        (7, int, 7),
        ("0.25", float, 0.25),
        (" 1e-3 ", float, 0.001),
        (3, float, 3.0),
        ("YES", bool, True),
        (" off ", bool, False),
        ("ünïcødé ✓ 文本", str, "ünïcødé ✓ 文本"),
        ("Null", int | None, None),
        (None, float | None, None),
        (" chat ", Literal["completions", "chat"], "chat"),
        ("x" * 100_000, str, "x" * 100_000),  # a long text passes through unchanged
        ("anything", Any, "anything"),
    ],
)
def test_values_that_fit(rules: TextRules, value: Any, kind: Any, expected: Any) -> None:
    got = coerce(value, kind, rules)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("rules", BOTH)
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2.5", int),
        (True, int),  # a bool is never a count
        ("", int),
        ("nan", float),
        ("inf", float),
        ("-Infinity", float),
        (True, float),
        ("maybe", bool),
        ("真", bool),
        (2, bool),
        (5, str),  # from Python, a number for a text option is a mistake
        ("gpt", Literal["completions", "chat"]),
        ("abc", int | None),
        ([1], int),
    ],
)
def test_values_that_do_not_fit(rules: TextRules, value: Any, kind: Any) -> None:
    with pytest.raises(Mismatch):
        coerce(value, kind, rules)


def test_where_the_callers_differ_each_keeps_its_behaviour() -> None:
    # parameters: Python's int() spelling, a Python 0/1 for a bool, "a,b" tuples; "" stays text
    assert coerce("1_000", int, PARAM_RULES) == 1000
    assert coerce(1, bool, PARAM_RULES) is True and coerce(0, bool, PARAM_RULES) is False
    assert coerce("0.1, 0.2,", tuple[float, ...], PARAM_RULES) == (0.1, 0.2)
    assert coerce(["1", 2], tuple[int, int], PARAM_RULES) == (1, 2)
    assert coerce("", str | None, PARAM_RULES) == ""
    # options: digits only, words only for a bool, no tuple parsing, "" means none
    for value, kind in (("1_000", int), (1, bool)):
        with pytest.raises(Mismatch):
            coerce(value, kind, OPTION_RULES)
    assert coerce("1,2", tuple[int, ...], OPTION_RULES) == "1,2"
    assert coerce("  ", int | None, OPTION_RULES) is None


def test_tuples_check_their_items_and_length() -> None:
    with pytest.raises(Mismatch):
        coerce("1,2,3", tuple[int, int], PARAM_RULES)
    with pytest.raises(Mismatch):
        coerce("0.1,abc", tuple[float, ...], PARAM_RULES)
    with pytest.raises(Mismatch):
        coerce(0.1, tuple[float, ...], PARAM_RULES)
    assert coerce("a,b", tuple, PARAM_RULES) == "a,b"  # a bare tuple: not a known annotation


def test_describe_type() -> None:
    assert describe_type(int | None) == "an integer or none"
    assert describe_type(Literal["a", "b"]) == "one of 'a', 'b'"
    assert describe_type(tuple[float, ...]) == "a comma-separated list, each a finite number"
    assert describe_type(bool) == "true or false"


def test_bottom_layer_imports_only_the_stdlib() -> None:
    tree = ast.parse(Path(coerce_module.__file__).read_text(encoding="utf-8"))
    roots = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    assert roots <= {"__future__", "math", "numbers", "re", "types", "typing", "dataclasses"}
