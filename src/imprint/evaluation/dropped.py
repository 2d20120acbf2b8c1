"""The texts a run was given, scored and left out: one record, read from the run's manifest, that
metrics.json (``samples``), the report's opening line and Dropped samples table, and the
terminal's summary line all take their figures and words from.

Every drop is counted by reason (``manifest.json`` ``data.dropped``). Ids are kept where the
step that dropped them keeps them: the loader's rows under ``data.dropped_ids``, a served
model's unscorable texts under ``models.<role>.ambiguous.dropped_ids``; other steps (dedupe,
length filter, ``--n-per-label`` draw, held-out shots) count theirs only, and the table says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imprint.evaluation import jsonread as js

__all__ = ["SHOWN_IDS", "DroppedSamples", "dropped_from_dict", "dropped_samples"]

#: ids shown per reason in the report; the rest are named by count and manifest key
SHOWN_IDS = 20


@dataclass(frozen=True)
class DroppedSamples:
    """``scored`` texts of ``given`` (scored + every drop), ``by_reason`` the drops counted;
    ``ids`` the ids of a reason where they were kept and ``ids_at`` the manifest key holding
    them all (a dotted path)."""

    given: int
    scored: int
    by_reason: dict[str, int]
    ids: dict[str, list[str]] = field(default_factory=dict)
    ids_at: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def to_dict(self) -> dict[str, Any]:
        """metrics.json's ``samples``: the counts, and where the ids are (manifest keys)."""
        return {
            "given": self.given,
            "scored": self.scored,
            "dropped_total": self.total,
            "dropped": dict(self.by_reason),
            "dropped_ids_in_manifest": dict(self.ids_at),
        }

    def summary(self, counts: str | None = None) -> str:
        """The one line the terminal prints and the report opens with: texts scored of those
        given (``counts``, e.g. the members and non-members, in brackets), drops by reason."""
        scored = f"{self.scored:,} of {self.given:,} texts given scored"
        line = f"{scored} ({counts})" if counts else scored
        if not self.by_reason:
            return f"{line}, none dropped."
        shown = "; ".join(f"{n:,} {reason}" for reason, n in self.by_reason.items())
        return f"{line}, {self.total:,} dropped ({shown})."

    def ids_cell(self, reason: str) -> str:
        """The report's ids cell of ``reason``: the first :data:`SHOWN_IDS` ids, the rest named
        by count and manifest key, or why there are none."""
        ids = self.ids.get(reason)
        if not ids:
            return "ids not recorded by the step that dropped them (counted only)"
        shown = ", ".join(ids[:SHOWN_IDS])
        more = len(ids) - SHOWN_IDS
        where = f"manifest.json at {self.ids_at[reason]}"
        return f"{shown} and {more:,} more; all in {where}" if more > 0 else f"{shown} ({where})"

    def rows(self) -> list[list[str]]:
        """The report's Dropped samples table: reason, count, ids."""
        return [[r, f"{n:,}", self.ids_cell(r)] for r, n in self.by_reason.items()]


def dropped_samples(manifest: dict[str, Any]) -> DroppedSamples:
    """The :class:`DroppedSamples` of a run's manifest (older manifests: ids absent, counted)."""
    data = manifest["data"]
    by_reason = {str(r): int(n) for r, n in data.get("dropped", {}).items()}
    ids: dict[str, list[str]] = {}
    ids_at: dict[str, str] = {}
    places = [("data.dropped_ids", data.get("dropped_ids"))]
    for role, model in (manifest.get("models") or {}).items():
        ambiguous = model.get("ambiguous") if isinstance(model, dict) else None
        if isinstance(ambiguous, dict):
            places.append((f"models.{role}.ambiguous.dropped_ids", ambiguous.get("dropped_ids")))
    for key, found in places:
        for reason, which in (found or {}).items():
            if which and reason not in ids:
                ids[reason], ids_at[reason] = [str(i) for i in which], key
    scored = int(data["evaluated"])
    return DroppedSamples(scored + sum(by_reason.values()), scored, by_reason, ids, ids_at)


def dropped_from_dict(data: Any, where: str) -> DroppedSamples:
    """metrics.json's ``samples`` read back (the ids stay in the manifest)."""
    data = js.obj(data, where)
    counts = js.obj(js.get(data, "dropped", where), f"{where}.dropped")
    at = js.obj(data.get("dropped_ids_in_manifest", {}), f"{where}.dropped_ids_in_manifest")
    return DroppedSamples(
        given=js.integer(js.get(data, "given", where), f"{where}.given"),
        scored=js.integer(js.get(data, "scored", where), f"{where}.scored"),
        by_reason={str(r): js.integer(n, f"{where}.dropped[{r!r}]") for r, n in counts.items()},
        ids_at={str(r): js.text(k, f"{where}.dropped_ids_in_manifest") for r, k in at.items()},
    )
