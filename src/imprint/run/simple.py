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
    model: str,
    data: str,
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
    config = RunConfig(
        model=model,
        data=data,
        attacks=attacks,  # type: ignore[arg-type]  # a string is split on commas there
        out=None if out is None else Path(out),
        **options,
    )
    result = execute_run(config, console=console)
    return load_run(result.out)
