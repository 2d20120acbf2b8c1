"""The ``documents`` entry of ``metrics.json`` (``--unit document``): typed, with its JSON form.

Kept apart from :mod:`imprint.evaluation.documents` (which computes it) so that
:mod:`imprint.evaluation.results` can read it back without importing the document step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imprint.evaluation import jsonread as js
from imprint.evaluation.columns import summary_from_dict
from imprint.metrics import Interval, MetricSummary

__all__ = ["DocumentMetrics", "DocumentRow"]


@dataclass(frozen=True)
class DocumentRow:
    """One document-level score: its attack column (None for Meeus and the blind baseline), the
    aggregation, figures over documents, and the paired sequence-level AUC and gain."""

    attack: str | None
    aggregation: str
    metrics: MetricSummary
    sequence_auc: Interval | None = None
    gain: Interval | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attack": self.attack, "aggregation": self.aggregation}
        out["metrics"] = self.metrics.to_dict()
        for name in ("sequence_auc", "gain"):
            value = getattr(self, name)
            out[name] = None if value is None else value.to_dict()
        if self.sequence_auc is not None or self.gain is not None:
            out["paired_resamples"] = "documents"  # the paired intervals' unit, stated
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> DocumentRow:
        data = js.obj(data, where)
        pairs = {
            k: None if data.get(k) is None else js.interval(data[k], f"{where}.{k}")
            for k in ("sequence_auc", "gain")
        }
        return cls(
            attack=js.text(data.get("attack"), f"{where}.attack", optional=True),
            aggregation=js.text(js.get(data, "aggregation", where), f"{where}.aggregation"),
            metrics=summary_from_dict(js.get(data, "metrics", where), f"{where}.metrics"),
            **pairs,
        )


@dataclass(frozen=True)
class DocumentMetrics:
    """The ``documents`` entry of metrics.json (see :mod:`imprint.evaluation.documents`)."""

    n_documents: int
    n_members: int
    n_nonmembers: int
    n_sequences: int
    rows: dict[str, DocumentRow]
    dataset: dict[str, Any] = field(default_factory=dict)  # dataset inference, JSON-ready
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("n_documents", "n_members", "n_nonmembers")}
        out["n_sequences"] = self.n_sequences
        out["rows"] = {name: row.to_dict() for name, row in self.rows.items()}
        out.update(dataset=self.dataset, notes=list(self.notes))
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> DocumentMetrics:
        data = js.obj(data, where)
        counts = {
            k: js.integer(js.get(data, k, where), f"{where}.{k}")
            for k in ("n_documents", "n_members", "n_nonmembers", "n_sequences")
        }
        rows = js.obj(js.get(data, "rows", where), f"{where}.rows")
        return cls(
            rows={n: DocumentRow.from_dict(r, f"{where}.rows[{n!r}]") for n, r in rows.items()},
            dataset=js.obj(data.get("dataset", {}), f"{where}.dataset"),
            notes=tuple(js.text(n, f"{where}.notes") for n in data.get("notes", [])),
            **counts,
        )
