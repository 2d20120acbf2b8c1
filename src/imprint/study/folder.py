"""An experiment (study) folder read back for analysis: :func:`load_study` -> :class:`Study`.

``Study.cells`` is ``cells.parquet`` as a DataFrame, one row per (cell, score column, figure)
with estimate, low, high and where the cell came from; ``Study.metrics.to_frame()`` the same
long table; ``Study.tables`` each paper table (``tables/*.csv``); ``Study.scores`` every cell
run's per-text scores in one DataFrame (a ``run`` column names the run folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imprint.errors import DataError
from imprint.outdir import MARKER, output_kind
from imprint.run.folder import Run, load_run, read_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Study", "StudyMetrics", "load_study"]


@dataclass(frozen=True)
class StudyMetrics:
    """A study's figures; ``to_frame()`` is the long table of ``cells.parquet``."""

    folder: Path

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.read_parquet(self.folder / "cells.parquet")


@dataclass
class Study:
    """A study folder (see the module docstring)."""

    path: Path
    manifest: dict[str, Any]  # the folder's marker (kind, format_version); {} before markers

    @property
    def metrics(self) -> StudyMetrics:
        return StudyMetrics(self.path)

    @cached_property
    def cells(self) -> pd.DataFrame:
        return self.metrics.to_frame()

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        """Each table of the study by its file name (``tables/NAME.csv``)."""
        import pandas as pd

        return {p.stem: pd.read_csv(p) for p in sorted((self.path / "tables").glob("*.csv"))}

    def runs(self) -> dict[str, Run]:
        """Each run folder the cells name (relative to the study folder), loaded; blind cells
        have none."""
        names = [r for r in dict.fromkeys(self.cells.get("run", [])) if isinstance(r, str) and r]
        return {name: load_run(self._place(name)) for name in names}

    @cached_property
    def scores(self) -> pd.DataFrame:
        """Every cell run's scores (:attr:`Run.scores`), stacked, with a ``run`` column."""
        import pandas as pd

        frames = [run.scores.assign(run=name) for name, run in self.runs().items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _place(self, name: str) -> Path:
        path = Path(name)
        return path if path.is_absolute() else self.path / path

    def __repr__(self) -> str:
        return f"Study({str(self.path)!r}, {len(self.cells)} figures)"


def load_study(path: str | Path) -> Study:
    """The study folder at ``path`` (written by ``imprint experiment FILE.yaml``)."""
    folder = Path(path)
    marker = folder / MARKER  # its version first: a newer layout is refused as such
    manifest = read_json(marker, "a study folder's marker") if marker.is_file() else {}
    if not folder.is_dir() or output_kind(folder) != "study":
        raise DataError(
            f"{folder} is not a study folder (written by `imprint experiment FILE.yaml`, with "
            "cells/ and a marker); for a run folder use imprint.load_run"
        )
    if not (folder / "cells.parquet").is_file():
        raise DataError(
            f"{folder} has no cells.parquet: the study has not finished a grid yet; rerun "
            "`imprint experiment FILE.yaml` (finished cells are reused)"
        )
    return Study(folder, manifest)
