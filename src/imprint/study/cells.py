"""Cells of an experiment grid: their content keys and the folder that stores them.

A cell is one (model, benchmark, attack with its parameters) of the grid, or the model-less
blind baseline of one benchmark. Its key is a hash of everything its figures depend on (the
model's content digest, the evaluated data's fingerprint, the attack and its typed parameters,
the seed and the run settings), never of where or when it ran: a grid re-run finds a cell whose
key exists and reads it back. Each cell is written alone, atomically (a temporary file renamed
into place), so a grid killed at any point keeps every cell it finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.errors import DataError
from imprint.evaluation.columns import summary_from_dict
from imprint.metrics import MetricSummary

__all__ = ["BLIND", "CellRecord", "CellStore", "cell_key"]

BLIND = "blind"  # the attack name of a blind-baseline cell
#: a blind cell's row of the suite's strongest classifier, whose intervals are Bonferroni-
#: adjusted for being picked from several (the SoK forest's row is fixed in advance)
STRONGEST_BLIND = "blind (strongest: "  # + the classifier's name + ")"
#: a blind cell's provenance key: the strongest classifier's out-of-fold scores by sample id
BLIND_SCORES = "blind_scores"
CELL_FORMAT = 1  # bump when a cell's meaning changes: older cells are then recomputed


def cell_key(content: dict[str, Any]) -> str:
    """A short content hash of ``content`` (JSON with sorted keys; values made text)."""
    text = json.dumps({"format": CELL_FORMAT, **content}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class CellRecord:
    """A finished cell: where it sits in the grid and its figures per score column.

    ``row`` labels the attack with its swept parameters (``min_k (k=0.2)``); ``columns`` maps
    each score column the attack wrote (``ref[base]`` and ``ref_ratio[base]`` for ``ref``) to
    its metrics; ``provenance`` holds the run folder, fingerprints and request counts.
    """

    key: str
    model: str  # the model's name in the grid; "" for a blind cell
    benchmark: str
    attack: str
    row: str
    params: dict[str, Any]
    columns: dict[str, MetricSummary]
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": CELL_FORMAT,
            "key": self.key,
            "model": self.model,
            "benchmark": self.benchmark,
            "attack": self.attack,
            "row": self.row,
            "params": self.params,
            "columns": {name: m.to_dict() for name, m in self.columns.items()},
            "provenance": self.provenance,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> CellRecord:
        try:
            return cls(
                key=str(data["key"]),
                model=str(data["model"]),
                benchmark=str(data["benchmark"]),
                attack=str(data["attack"]),
                row=str(data["row"]),
                params=dict(data["params"]),
                columns={
                    name: summary_from_dict(m, f"{where}.columns[{name!r}]")
                    for name, m in data["columns"].items()
                },
                provenance=dict(data.get("provenance", {})),
            )
        except (KeyError, TypeError, AttributeError) as err:
            raise DataError(f"{where}: not a cell record ({err!r}); delete the file") from None


class CellStore:
    """``<folder>/<key>.json``, one file per finished cell, each written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> CellRecord | None:
        """The cell stored under ``key``; None when absent, unreadable or of an older format
        (it is then recomputed, never trusted half-read)."""
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != CELL_FORMAT:
            return None
        try:
            return CellRecord.from_dict(data, str(path))
        except DataError:
            return None

    def put(self, record: CellRecord) -> Path:
        """Write ``record``: a temporary file in the same folder, flushed, renamed into place
        (a reader or a killed grid sees the old file or the whole new one, never a part)."""
        from imprint.report import to_jsonable

        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(to_jsonable(record.to_dict()), indent=1, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(prefix=f".{record.key}.", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path(record.key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(record.key)
