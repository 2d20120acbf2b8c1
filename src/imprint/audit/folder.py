"""An audit folder read back for analysis: :func:`load_audit` -> :class:`Audit`.

``Audit.record`` is ``audit.json`` (the bound, the guesses, the selection); ``Audit.curves``
each attack's bound per number of guesses as a DataFrame; the canaries' run (``run/`` inside
the folder) gives ``Audit.scores`` (one row per canary, ``label`` 1 = included), ``.metrics``
and ``.manifest``.
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

    from imprint.evaluation.results import RunMetrics

__all__ = ["Audit", "load_audit"]


@dataclass
class Audit:
    """An audit folder (see the module docstring)."""

    path: Path
    record: dict[str, Any]
    run: Run

    @property
    def epsilon_lower_bound(self) -> float:
        return float(self.record["epsilon_lower_bound"])

    @property
    def scores(self) -> pd.DataFrame:
        return self.run.scores

    @property
    def metrics(self) -> RunMetrics:
        return self.run.metrics

    @property
    def manifest(self) -> dict[str, Any]:
        return self.run.manifest

    @cached_property
    def curves(self) -> pd.DataFrame:
        """One row per attack x number of guesses: the bound at each (``audit.json``'s
        ``curves``)."""
        import pandas as pd

        rows = [
            {"attack": attack, **point}
            for attack, points in self.record.get("curves", {}).items()
            for point in points
        ]
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return (
            f"Audit({str(self.path)!r}, model={self.record.get('model')!r}, "
            f"epsilon_lower_bound={self.record.get('epsilon_lower_bound')})"
        )


def load_audit(path: str | Path) -> Audit:
    """The audit folder at ``path`` (written by ``imprint audit``)."""
    folder = Path(path)
    if (folder / MARKER).is_file():  # its version first: a newer layout is refused as such
        read_json(folder / MARKER, "an imprint output folder's marker")
    if not folder.is_dir() or output_kind(folder) != "audit":
        raise DataError(
            f"{folder} is not an audit folder (written by `imprint audit`, with audit.json); "
            "for a run folder use imprint.load_run"
        )
    record = read_json(folder / "audit.json", "an audit's audit.json")
    if record.get("imprint_audit") not in (1, None):
        raise DataError(
            f"{folder / 'audit.json'} is imprint_audit {record.get('imprint_audit')!r}; this "
            "imprint reads 1. Upgrade imprint (pip install -U llm-imprint)"
        )
    return Audit(folder, record, load_run(folder / "run"))
