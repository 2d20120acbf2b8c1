"""Attack hyperparameters from the command line or Python: coerced to the declared field types.

An attack is a frozen dataclass; its field annotations (``int``, ``float``, ``bool``, ``str``,
``tuple[float, ...]``, ``str | None`` ...) say what each parameter takes. A value given as text
(``--param pac.n_aug=10``) is parsed to that type; a value given as a Python object is checked
against it. A wrong value fails here, before any model loads, naming the attack, the parameter,
the expected type and an example. This module imports no torch (nor does ``imprint.attacks``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from imprint.attacks.registry import get_attack_class
from imprint.errors import ConfigError

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
_NONE = {"none", "null"}


class _Mismatch(Exception):
    """A value that does not fit the declared type (turned into a ConfigError by the caller)."""


def coerce_params(attack: str, cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` converted to the types ``cls`` declares; unknown annotations pass unchanged.

    Raises :class:`ConfigError` for a value that does not fit, e.g. ``pac.n_aug=2.5``.
    """
    hints = _field_types(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    out = {}
    for name, value in values.items():
        kind = hints.get(name)
        if kind is None:
            out[name] = value
            continue
        try:
            out[name] = _coerce(value, kind)
        except _Mismatch:
            raise ConfigError(
                f"attack {attack!r}, parameter {name!r}: expected {describe_type(kind)}, got "
                f"{value!r} ({type(value).__name__}); e.g. --param "
                f"{attack}.{name}={_example(kind, defaults.get(name))}"
            ) from None
    return out


def _field_types(cls: type) -> dict[str, Any]:
    """Resolved annotations of the dataclass fields (string annotations evaluated)."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation only a type checker can resolve: no coercion
        return {}
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name in hints}


def _coerce(value: Any, kind: Any) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return value
    if origin in (Union, types.UnionType):
        return _coerce_union(value, args)
    if origin is Literal:
        return _coerce_literal(value, args)
    if origin is tuple:
        return _coerce_tuple(value, args)
    scalar = _SCALARS.get(kind)
    return scalar(value) if scalar else value


def _coerce_union(value: Any, args: tuple[Any, ...]) -> Any:
    if type(None) in args and (
        value is None or (isinstance(value, str) and value.strip().lower() in _NONE)
    ):
        return None
    for arg in (a for a in args if a is not type(None)):
        try:
            return _coerce(value, arg)
        except _Mismatch:
            continue
    raise _Mismatch


def _coerce_literal(value: Any, args: tuple[Any, ...]) -> Any:
    for allowed in args:
        if value == allowed or (isinstance(value, str) and str(allowed) == value.strip()):
            return allowed
    raise _Mismatch


def _coerce_tuple(value: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    if isinstance(value, str):
        parts: list[Any] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        raise _Mismatch
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_coerce(p, args[0]) for p in parts)
    if args and len(args) != len(parts):
        raise _Mismatch
    return tuple(_coerce(p, a) for p, a in zip(parts, args, strict=False)) if args else tuple(parts)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _Mismatch from None
    raise _Mismatch


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, numbers.Real):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _Mismatch from None
    else:
        raise _Mismatch
    if not math.isfinite(number):
        raise _Mismatch
    return number


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Mismatch


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Mismatch  # from Python, 5 for a separator is a mistake; the CLI passes text


_SCALARS: dict[Any, Any] = {int: _to_int, float: _to_float, bool: _to_bool, str: _to_str}
_NAMES = {int: "an integer", float: "a finite number", bool: "true or false", str: "a string"}


def describe_type(kind: Any) -> str:
    """'an integer', 'a comma-separated list of numbers', 'a string or none' ..."""
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


def _example(kind: Any, default: Any) -> str:
    """A valid value to show: the default where it is one, else a typical value of the type."""
    if default is not dataclasses.MISSING and default not in (None, (), ""):
        if isinstance(default, tuple):
            return ",".join(str(v) for v in default)
        return str(default).lower() if isinstance(default, bool) else repr(default).strip("'")
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType):
        return _example(next(a for a in args if a is not type(None)), None)
    if origin is Literal:
        return str(args[0])
    if origin is tuple:
        one = _example(args[0], None) if args else "a"
        return f"{one},{one}"
    return {int: "10", float: "0.2", bool: "true", str: "text"}.get(kind, "VALUE")


def check_params(params: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every ``{attack: {param: value}}`` entry checked and coerced: unknown attacks, unknown
    parameters and ill-typed values raise :class:`ConfigError` (nothing is loaded yet)."""
    out: dict[str, dict[str, Any]] = {}
    for attack, values in params.items():
        cls = get_attack_class(attack)
        # prepared state (filled in by the attack's set-up) is not a parameter
        known = {f.name for f in dataclasses.fields(cls) if not f.metadata.get("prepared")}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"attack {attack!r} has no parameter(s) {unknown}; it takes {sorted(known)}"
            )
        out[attack] = coerce_params(attack, cls, values)
    return out
