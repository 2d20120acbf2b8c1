"""``imprint run --config run.yaml``: every ``run`` flag from a YAML file, the command line winning.

A key is a flag without its dashes (``n-per-label: 20``; ``n_per_label`` reads the same). The
file is read strictly (:mod:`imprint.strict_yaml`: a key given twice is refused), an unknown key
is refused with the closest flag, and each value must have the flag's type (``n-per-label:
"20"`` is refused: quoting makes it text). A repeatable flag takes a list, or a mapping where
its values are ``KEY=VALUE`` (``model-args: {dtype: bfloat16}``, ``param: {min_k.k: 0.2}``);
``attacks`` takes a list too. A flag typed on the command line overrides the file's value.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError

__all__ = ["read_run_file"]

_LIST_FLAGS = ("attacks",)  # comma-separated text flags that also take a YAML list


def read_run_file(path: Path, ctx: Any, hints: dict[str, Any]) -> dict[str, Any]:
    """The values of ``path`` for the options of ``ctx``'s command that the command line did
    not give (``option name -> value``, typed as the command line would give them); ``hints``:
    each option's Python type."""
    from imprint.strict_yaml import safe_load

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror or err})") from None
    try:
        loaded = safe_load(text)
    except Exception as err:  # a YAML syntax error or a repeated key: one line, with the place
        raise ConfigError(f"--config {path}: {' '.join(str(err).split())}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(
            f"--config {path}: expected flag: value lines (e.g. n-per-label: 20), "
            f"got {type(loaded).__name__}"
        )
    params = _by_spelling(ctx)
    out: dict[str, Any] = {}
    for key, value in loaded.items():
        param = params.get(str(key).removeprefix("--").replace("_", "-"))
        if param is None or param.name == "config":
            known = sorted({_flag(p) for p in params.values() if p.name != "config"})
            close = difflib.get_close_matches(str(key).replace("_", "-"), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"--config {path}: unknown key {key!r}{hint} (keys are `imprint run` flags "
                f"without the dashes: {', '.join(known)})"
            )
        if param.name in out:
            raise ConfigError(f"--config {path}: {_flag(param)!r} is given twice ({key!r})")
        if _given_on_command_line(ctx, param.name):
            continue  # the command line wins
        out[param.name] = _typed(param, hints[param.name], value, f"--config {path}: {key}")
    return out


def _by_spelling(ctx: Any) -> dict[str, Any]:
    """Every option of the command by each of its spellings without dashes (``--model-args``,
    ``--model-arg`` and ``--model_args`` all name one option)."""
    out = {}
    for param in ctx.command.params:
        for opt in (*param.opts, *param.secondary_opts):
            out[opt.lstrip("-").replace("_", "-")] = param
    return out


def _flag(param: Any) -> str:
    """The option's first spelling without dashes, the key the docs show."""
    return str(param.opts[0]).lstrip("-")


def _given_on_command_line(ctx: Any, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _typed(param: Any, hint: Any, value: Any, where: str) -> Any:
    """``value`` checked against the option's Python type ``hint`` (``int | None``,
    ``list[str]`` ...); no quiet coercion of text to numbers."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = type(None) in typing.get_args(hint)
    kind = args[0] if optional and len(args) == 1 else hint
    if value is None:
        if typing.get_origin(kind) in (list, tuple):
            return []
        if optional:
            return None
        raise ConfigError(f"{where}: empty; give a value or drop the key")
    if typing.get_origin(kind) in (list, tuple):
        return [_scalar_text(v, where) for v in _items(value, where)]
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if param.name in _LIST_FLAGS and isinstance(value, list):
        value = ",".join(_scalar_text(v, where) for v in value)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{where}: expected a whole number, got {value!r}")
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if kind in (str, Path) and not isinstance(value, str):
        raise ConfigError(f"{where}: expected text, got {value!r} (quote it if it is text)")
    return Path(value) if kind is Path else value


def _items(value: Any, where: str) -> list[Any]:
    """A repeatable flag's values: a list, one scalar, or a mapping read as KEY=VALUE items."""
    if isinstance(value, Mapping):
        return [f"{k}={_scalar_text(v, where)}" for k, v in value.items()]
    return list(value) if isinstance(value, list) else [value]


def _scalar_text(value: Any, where: str) -> str:
    if isinstance(value, Mapping | list):
        raise ConfigError(f"{where}: expected a list of values, got a nested {value!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
