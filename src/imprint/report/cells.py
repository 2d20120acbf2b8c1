"""Table cells shared by the run report and its document section: intervals and TPR@FPR."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from imprint.metrics import DEFAULT_FPR_BOUNDS, Interval, MetricSummary
from imprint.metrics.resolution import MIN_FALSE_POSITIVES, min_nonmembers

__all__ = ["NOT_MEASURABLE", "TprColumns", "by_auc", "fmt", "tpr_cell", "tpr_columns"]

NOT_MEASURABLE = "not measurable"


def fmt(interval: Interval | None) -> str:
    """'0.734 [0.681, 0.790]' for an interval; 'n/a' when it is missing or undefined (NaN);
    '(score bound)' after one whose bootstrap collapsed (the run warning says why)."""
    if interval is None or math.isnan(interval.estimate):
        return "n/a"
    shown = f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
    return shown + (" (score bound)" if interval.basis else "")


def tpr_cell(column: MetricSummary, bound: float) -> str:
    """A TPR@FPR cell: its interval, or 'not measurable' (the reason goes in a note)."""
    if bound in column.not_measurable:
        return NOT_MEASURABLE
    return fmt(column.tpr(bound))


def by_auc(aucs: Mapping[str, Interval]) -> list[str]:
    """Names by AUC estimate, highest first; undefined (NaN) last; ties keep their order."""

    def key(name: str) -> tuple[bool, float]:
        value = aucs[name].estimate
        return (math.isnan(value), 0.0 if math.isnan(value) else -value)

    return sorted(aucs, key=key)


def _percent(bound: float) -> str:
    return f"{round(bound * 100, 10):g}%"


class TprColumns:
    """Which TPR@FPR columns a table shows: the one rule every table of a run follows (the
    terminal's, report.md's, report.html's, the document table's). A bound that no row can
    measure (:mod:`~imprint.metrics.resolution`: every row lists it in ``not_measurable``) is
    dropped, and :attr:`note` says so in one line; the lowest bound left is then labelled
    "lowest measurable FPR", the figure shown instead of the dropped ones."""

    def __init__(
        self, rows: Sequence[MetricSummary], bounds: Sequence[float] = DEFAULT_FPR_BOUNDS
    ) -> None:
        rows = list(rows)
        self.dropped = [b for b in bounds if rows and all(b in r.not_measurable for r in rows)]
        self.bounds = [b for b in bounds if b not in self.dropped]
        self.note = self._note(rows)

    def headers(self) -> list[str]:
        """One header per shown bound, e.g. ``TPR@5%FPR``; ``TPR@10% (lowest measurable FPR)``
        for the lowest shown when lower ones were dropped."""
        lowest = min(self.bounds) if self.bounds and self.dropped else None
        return [
            f"TPR@{_percent(b)} (lowest measurable FPR)" if b == lowest else f"TPR@{_percent(b)}FPR"
            for b in self.bounds
        ]

    def cells(self, row: MetricSummary) -> list[str]:
        return [tpr_cell(row, b) for b in self.bounds]

    def row_notes(self, rows: Sequence[MetricSummary]) -> list[str]:
        """Why a shown column reads 'not measurable' in some rows (each distinct reason once)."""
        notes: list[str] = []
        for bound in self.bounds:
            for row in rows:
                reason = row.not_measurable.get(bound)
                note = f"TPR@{_percent(bound)}FPR {NOT_MEASURABLE}: {reason}"
                if reason and note not in notes:
                    notes.append(note)
        return notes

    def _note(self, rows: list[MetricSummary]) -> str | None:
        if not self.dropped:
            return None
        counts = sorted({_counted(r) for r in rows})
        what = rows[0].resamples if rows[0].n_nonmember_units is not None else None
        unit = f"non-member {what}" if what else "non-members"
        here = _listed([f"{n:,}" for n in counts], "or")
        needs = _listed([f"{min_nonmembers(b):,}" for b in self.dropped])
        names = "TPR at " + _listed([_percent(b) for b in self.dropped])
        them = "them" if len(self.dropped) > 1 else "it"
        instead = (
            f"; TPR@{_percent(min(self.bounds))} is the lowest measurable FPR"
            if self.bounds
            else "; no TPR@FPR column is measurable"
        )
        return (
            f"{names} FPR not shown: no row can measure {them} (an FPR bound must allow "
            f"{MIN_FALSE_POSITIVES} false positives: {needs} {unit} needed, {here} here){instead}"
        )


def _listed(items: list[str], last: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _counted(row: MetricSummary) -> int:
    """The non-members the resolution rule counts in ``row`` (groups when groups resample)."""
    return row.n_nonmember_units if row.n_nonmember_units is not None else row.n_nonmembers


def tpr_columns(rows: Sequence[MetricSummary]) -> TprColumns:
    """:class:`TprColumns` over ``rows`` at the default FPR bounds."""
    return TprColumns(rows)
