"""A run folder read back for analysis: :func:`load_run` -> :class:`Run`.

``Run.scores`` is the per-text table as a pandas DataFrame (``id``, ``label``, ``text``, each
key of the texts' ``meta`` as a ``meta.KEY`` column, then one column per attack's score);
``Run.metrics`` the typed figures (:class:`~imprint.evaluation.results.RunMetrics`, whose
``to_frame()`` is the long table); ``Run.manifest`` how the run was made. Files of a newer
major ``format_version`` are refused (:mod:`imprint.formats`); folders written before versions
read as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imprint.errors import DataError
from imprint.evaluation.results import RunMetrics, read_metrics
from imprint.formats import check_format
from imprint.outdir import MARKER, RUN_FILES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Run", "load_run", "read_json", "scores_frame"]

#: the columns of scores.parquet that are not an attack's score
_TEXT_COLUMNS = ("id", "label", "text", "meta")


def read_json(file: Path, what: str) -> dict[str, Any]:
    """``file``'s JSON object, its ``format_version`` checked; ``what`` names the folder in
    errors."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise DataError(f"{file}: cannot read it ({err.strerror or err}); is it {what}?") from None
    except ValueError as err:
        raise DataError(f"{file} is not valid JSON ({err}); is it {what}?") from None
    if not isinstance(data, dict):
        raise DataError(f"{file} holds {type(data).__name__}, not a JSON object; is it {what}?")
    check_format(data, str(file))
    return data


def scores_frame(file: Path) -> pd.DataFrame:
    """scores.parquet as a DataFrame, each ``meta`` key a ``meta.KEY`` column (the file keeps
    ``meta`` as JSON text, as every imprint has written it; a text without the key gets NaN).
    The ``meta.`` prefix keeps a key such as ``id`` or ``label`` apart from the run's own."""
    import pandas as pd
    import pyarrow.parquet as pq

    frame = pq.read_table(file).to_pandas()
    if "meta" not in frame.columns:
        return frame
    metas = [_meta(m) for m in frame.pop("meta")]
    expanded = pd.DataFrame.from_records(metas, index=frame.index)
    expanded.columns = [f"meta.{c}" for c in expanded.columns]
    front = [c for c in ("id", "label", "text") if c in frame.columns]
    rest = [c for c in frame.columns if c not in front]
    return pd.concat([frame[front], expanded, frame[rest]], axis=1)


def _meta(text: object) -> dict[str, Any]:
    """One row's ``meta``: its JSON object ({} for an empty or non-object value)."""
    value = json.loads(text) if isinstance(text, str) and text else None
    return value if isinstance(value, dict) else {}


@dataclass
class Run:
    """A finished run folder (see the module docstring). ``attacks`` names its score columns
    in the order scores.parquet holds them."""

    path: Path
    manifest: dict[str, Any]
    metrics: RunMetrics
    attacks: tuple[str, ...] = field(default=())

    @cached_property
    def scores(self) -> pd.DataFrame:
        """One row per text: id, label (1 = member), text, ``meta.*``, a column per attack."""
        return scores_frame(self.path / "scores.parquet")

    @property
    def format_version(self) -> str | None:
        """The manifest's format version; None for a folder written before versions."""
        version = self.manifest.get("format_version")
        return version if isinstance(version, str) else None

    @property
    def config(self) -> dict[str, Any]:
        """What the run was asked (the manifest's ``config``)."""
        config = self.manifest.get("config")
        return config if isinstance(config, dict) else {}

    def __repr__(self) -> str:
        config = self.config
        return (
            f"Run({str(self.path)!r}, model={config.get('model')!r}, "
            f"data={config.get('data')!r}, attacks={list(self.attacks)})"
        )


def load_run(path: str | Path) -> Run:
    """The run folder at ``path`` (written by ``imprint run`` or :func:`imprint.run`), or the
    folder ``runs/latest`` points to when ``path`` is that link."""
    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"{folder} is not a folder; pass a run folder written by `imprint run`")
    if folder.is_symlink():  # runs/latest: the run it points to now, named as itself
        folder = folder.resolve()
    missing = [n for n in ("manifest.json", *RUN_FILES) if not (folder / n).is_file()]
    if missing:
        hint = _other_kind(folder)
        raise DataError(
            f"{folder} is not a run folder: it lacks {', '.join(missing)}{hint}. Pass a folder "
            "written by `imprint run` (e.g. runs/latest)"
        )
    if (folder / MARKER).is_file():  # checked for its version: a newer layout is refused
        read_json(folder / MARKER, "an imprint output folder's marker")
    manifest = read_json(folder / "manifest.json", "a run's manifest")
    metrics = read_metrics(folder)
    import pyarrow.parquet as pq

    names = pq.read_schema(folder / "scores.parquet").names
    attacks = tuple(n for n in names if n not in _TEXT_COLUMNS)
    return Run(folder, manifest, metrics, attacks)


def _other_kind(folder: Path) -> str:
    """`` (it is a study folder: use imprint.load_study)`` and the like, or ''."""
    from imprint.outdir import KINDS, output_kind

    kind = output_kind(folder)
    loader = {"study": "imprint.load_study", "audit": "imprint.load_audit"}.get(kind or "")
    if kind is None or kind == "run":
        return ""
    return f" (it is {KINDS[kind]}" + (f": read it with {loader})" if loader else ")")
