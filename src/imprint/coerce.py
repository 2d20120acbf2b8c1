"""Values from a command line or Python, coerced to a declared type (``int``, ``str | None``,
``Literal[...]``, ``tuple[float, ...]`` ...).

One implementation shared by typed attack parameters (:mod:`imprint.attacks.params`) and typed
backend options (:mod:`imprint.backends.options`). This module only says whether a value fits:
it raises :class:`Mismatch`, and each caller turns that into its own :class:`ConfigError` naming
the attack and parameter, or the provider and key. Where the two callers read text differently
on purpose, a :class:`TextRules` says how. Bottom layer: stdlib only (no torch, no imprint).
"""

from __future__ import annotations

import math
import numbers
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})
_NAMES = {int: "an integer", float: "a finite number", bool: "true or false", str: "a string"}
_DIGITS = re.compile(r"\s*[+-]?\d+\s*")


class Mismatch(Exception):
    """A value that does not fit the declared type (the caller raises the ConfigError)."""


@dataclass(frozen=True)
class TextRules:
    """The points where callers read a value differently (each keeps its documented behaviour)."""

    none_words: frozenset[str] = frozenset({"none", "null"})  # text meaning None in ``X | None``
    tuples: bool = False  # ``tuple[...]`` annotations take "a,b" text or a list/tuple
    int_underscores: bool = False  # "1_000" is an integer (Python's int() spelling)
    int_bools: bool = False  # a Python 0 or 1 is accepted where a bool is declared


def coerce(value: Any, kind: Any, rules: TextRules) -> Any:
    """``value`` converted to ``kind``; an annotation it does not know passes the value unchanged.

    Raises :class:`Mismatch` when the value does not fit.
    """
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return value
    if origin in (Union, types.UnionType):
        return _coerce_union(value, args, rules)
    if origin is Literal:
        return _coerce_literal(value, args)
    if origin is tuple and rules.tuples:
        return _coerce_tuple(value, args, rules)
    if kind is int:
        return _to_int(value, rules.int_underscores)
    if kind is float:
        return _to_float(value)
    if kind is bool:
        return _to_bool(value, rules.int_bools)
    if kind is str:
        return _to_str(value)
    return value


def _coerce_union(value: Any, args: tuple[Any, ...], rules: TextRules) -> Any:
    if type(None) in args and (value is None or _is_word(value, rules.none_words)):
        return None
    for arg in (a for a in args if a is not type(None)):
        try:
            return coerce(value, arg, rules)
        except Mismatch:
            continue
    raise Mismatch


def _coerce_literal(value: Any, args: tuple[Any, ...]) -> Any:
    for allowed in args:
        if value == allowed or (isinstance(value, str) and value.strip() == str(allowed)):
            return allowed
    raise Mismatch


def _coerce_tuple(value: Any, args: tuple[Any, ...], rules: TextRules) -> tuple[Any, ...]:
    if isinstance(value, str):
        parts: list[Any] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        raise Mismatch
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(coerce(p, args[0], rules) for p in parts)
    if args and len(args) != len(parts):
        raise Mismatch
    if not args:  # a bare ``tuple``: items as given
        return tuple(parts)
    return tuple(coerce(p, a, rules) for p, a in zip(parts, args, strict=True))


def _is_word(value: Any, words: frozenset[str]) -> bool:
    return isinstance(value, str) and value.strip().lower() in words


def _to_int(value: Any, underscores: bool) -> int:
    if isinstance(value, bool):  # True is an int to Python, never an intended count
        raise Mismatch
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, str) and (underscores or _DIGITS.fullmatch(value)):
        try:
            return int(value.strip())
        except ValueError:
            raise Mismatch from None
    raise Mismatch


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise Mismatch
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise Mismatch from None
    if not math.isfinite(number):  # nan/inf as a hyperparameter is a typo, not a choice
        raise Mismatch
    return number


def _to_bool(value: Any, int_bools: bool) -> bool:
    if isinstance(value, bool):
        return value
    if int_bools and isinstance(value, int) and value in (0, 1):
        return bool(value)
    if _is_word(value, TRUE_WORDS | FALSE_WORDS):
        return _is_word(value, TRUE_WORDS)
    raise Mismatch


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise Mismatch  # from Python, 5 for a separator or 0 for a device is a mistake


def describe_type(kind: Any) -> str:
    """'an integer', 'a string or none', 'one of 'a', 'b'', 'a comma-separated list, each ...'."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType):
        parts = [describe_type(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or none" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        inner = describe_type(args[0]) if args else "a value"
        return f"a comma-separated list, each {inner}"
    return _NAMES.get(kind, getattr(kind, "__name__", str(kind)))


def name_list(value: Any, flag: str) -> tuple[str, ...]:
    """A list of names as given in Python or on a command line: ``"loss, zlib"`` (split on
    commas and stripped, empty items skipped, as the flag reads it: ``"loss,,zlib"`` is two
    names, ``""`` none) or a list or tuple of strings, in order.

    A string is never iterated letter by letter (``"loss"`` is one name, not four); another
    type, or an item of a list that is not a string or is empty, raises :class:`Mismatch`
    naming ``flag`` (the caller raises it as its ConfigError).
    """
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    if not isinstance(value, list | tuple):
        raise Mismatch(
            f"{flag} takes names as a comma-separated string ('loss,zlib') or a list of "
            f"strings, not {type(value).__name__}"
        )
    names = []
    for item in value:
        if not isinstance(item, str):
            raise Mismatch(f"{flag}: {item!r} is not a name (a string); pass e.g. 'loss,zlib'")
        if not item.strip():
            raise Mismatch(f"{flag} {list(value)!r} has an empty name; pass e.g. 'loss,zlib'")
        names.append(item.strip())
    return tuple(names)
