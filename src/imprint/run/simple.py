"""One call from Python to a finished, loaded run: :func:`simple_run`, which ``imprint.run(...)``
calls (the ``imprint.run`` package is callable; see :mod:`imprint.run`).

In the spirit of lm-evaluation-harness's ``simple_evaluate``: the model, the data and the
attacks, every other :class:`~imprint.run.config.RunConfig` field by keyword, and ``out``
optional (a new ``runs/<time>-<model>-<data>`` as the CLI without ``--out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from imprint.run.folder import Run, load_run

__all__ = ["simple_run"]


def simple_run(
    model: str | Path,
    data: str | Path,
    attacks: str | Sequence[str] = ("all",),
    *,
    out: str | Path | None = None,
    console: Any = None,
    **options: Any,
) -> Run:
    """Run ``attacks`` (``"loss,zlib"`` or ``["loss", "zlib"]``) on ``model`` and ``data`` and
    return the written folder loaded (:class:`~imprint.run.folder.Run`: ``.scores`` as a
    DataFrame, ``.metrics``, ``.manifest``). ``options`` are :class:`RunConfig` fields (e.g.
    ``n_per_label=100``, ``seed=0``); ``progress`` defaults to off here, and ``console`` (a
    ``rich.console.Console``) prints the run's table and lines as the CLI does."""
    import dataclasses

    from imprint.errors import ConfigError
    from imprint.run.config import RunConfig
    from imprint.run.execute import execute_run

    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        import difflib

        hints = [difflib.get_close_matches(u, known, n=1) for u in unknown]
        said = ", ".join(
            u + (f" (did you mean {h[0]}?)" if h else "")
            for u, h in zip(unknown, hints, strict=True)
        )
        raise ConfigError(f"imprint.run() takes no option {said}; its options are RunConfig's")
    options.setdefault("progress", False)
    _check_types({"model": model, "data": data, "out": out, **options})
    config = RunConfig(
        model=str(model),  # a local model's or data file's path may come as a Path
        data=str(data),
        attacks=attacks,  # type: ignore[arg-type]  # a string is split on commas there
        out=None if out is None else Path(out),
        **options,
    )
    result = execute_run(config, console=console)
    return load_run(result.out)


def _check_types(values: dict[str, Any]) -> None:
    """Refuse a value of the wrong type for a plain field of RunConfig (a str, bool, int,
    float or path, or None where the field allows it) naming the option, before it reaches
    code that would fail obscurely (``model=123``) or read it wrongly (``blind="no"`` is
    truthy). Fields of other types are checked by RunConfig itself."""
    import numbers
    import os
    import types
    import typing

    from imprint.errors import ConfigError
    from imprint.run.config import RunConfig

    # numbers.Integral: a numpy integer from a DataFrame counts as an int
    plain = {str: (str,), bool: (bool,), int: (numbers.Integral,), float: (numbers.Real,),
             Path: (str, os.PathLike)}  # fmt: skip
    hints = typing.get_type_hints(RunConfig)
    for name, value in values.items():
        hint = hints.get(name)
        parts = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if not all(p is type(None) or p in plain for p in parts):
            continue  # a mapping, tuple or options class: RunConfig checks it
        if value is None and type(None) in parts:
            continue
        allowed = tuple(t for p in parts if p in plain for t in plain[p])
        if name in ("model", "data", "out"):  # a local model, data file or folder: a path
            allowed = (str, os.PathLike)
        wrong_bool = isinstance(value, bool) and bool not in parts
        if wrong_bool or not isinstance(value, allowed):
            said = {str: "a string", bool: "True or False", int: "an integer",
                    float: "a number", Path: "a path", type(None): "None"}  # fmt: skip
            takes = " or ".join(said[p] for p in parts)
            if name in ("model", "data"):
                takes = "a string or a path"
            raise ConfigError(
                f"imprint.run({name}={value!r}): {name} takes {takes}, not {type(value).__name__}"
            )
