"""Attack hyperparameters from the command line or Python: coerced to the declared field types.

An attack is a frozen dataclass; its field annotations (``int``, ``float``, ``bool``, ``str``,
``tuple[float, ...]``, ``str | None`` ...) say what each parameter takes. A value given as text
(``--param pac.n_aug=10``) is parsed to that type; a value given as a Python object is checked
against it. A wrong value fails here, before any model loads, naming the attack, the parameter,
the expected type and an example. This module imports no torch (nor does ``imprint.attacks``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from imprint.attacks.registry import get_attack_class
from imprint.coerce import Mismatch, TextRules, coerce, describe_type
from imprint.errors import ConfigError

__all__ = ["TypedParams", "check_params", "coerce_params", "describe_type"]

# Parameters take "a,b" lists for tuple fields, Python's int() spelling ("1_000") and a Python
# 0/1 for a bool; only the words none/null mean None (an empty text stays the empty string).
PARAM_RULES = TextRules(tuples=True, int_underscores=True, int_bools=True)


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
            out[name] = coerce(value, kind, PARAM_RULES)
        except Mismatch:
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


class TypedParams(dict[str, dict[str, Any]]):
    """Attack parameters as :func:`check_params` returned them: checked and typed, so whoever
    receives them (``build_attacks`` after ``resolve``) does not check them again."""


def check_params(params: Mapping[str, Mapping[str, Any]]) -> TypedParams:
    """Every ``{attack: {param: value}}`` entry checked and coerced: unknown attacks, unknown
    parameters and ill-typed values raise :class:`ConfigError` (nothing is loaded yet)."""
    out = TypedParams()
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
