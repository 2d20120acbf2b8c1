"""The one result type of a score column: AUC and TPR at each FPR bound with their intervals,
from the bootstrap (:mod:`imprint.metrics.bootstrap`) to a run's ``metrics.json`` and back."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from imprint.metrics.interval import Interval
from imprint.metrics.resolution import unresolvable

__all__ = ["NAN_INTERVAL", "MetricSummary", "fpr_key"]


def fpr_key(bound: float) -> str:
    """Name of the TPR column for an FPR bound, e.g. 0.001 -> ``"tpr@0.1%"``."""
    return f"tpr@{round(bound * 100, 10):g}%"


#: every figure of a column that lacks a class
NAN_INTERVAL = Interval(math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class MetricSummary:
    """AUC and TPR at each FPR bound, each with a bootstrap interval: the one result type of a
    score column, from the bootstrap to a run's ``metrics.json`` and back.

    ``tpr_at_fpr`` maps an FPR bound (e.g. 0.01) to its :class:`Interval`, or to None when the
    non-members cannot resolve it (:mod:`~imprint.metrics.resolution`); ``not_measurable``
    then says why. ``tied_share`` is the share of scores tied with another (None when not
    recorded); ``tie_decides`` maps a bound to why ties decide its threshold.
    ``resamples`` names the unit the bootstrap drew ("samples", "texts", or e.g. "documents"
    when whole groups were resampled; None when not recorded, as in run folders written before
    it was); ``n_units`` counts those units (None when they are the rows or not recorded);
    ``method`` the interval read from the resamples ("bca", "percentile" or the out-of-fold
    widening; None when not recorded). ``n_nan`` counts the samples a run's score column gave
    no score (left out); None where every sample is scored (a blind classifier) or not counted.
    ``n_nonmember_units`` counts the non-member groups when whole groups were resampled (the
    resolution rule counts them, :meth:`unresolved`); None when rows were resampled or in
    folders written before it was recorded (the rule then counts non-member texts).
    ``low_end`` maps a TPR bound to how its interval's low end was set on top of ``method``
    (:data:`~imprint.metrics.bootstrap.TPR_LOW_END`: lowered to the read at the threshold whose
    expected FPR is within the bound, issue 37); empty where the low end is the method's own or
    in folders written before it was recorded. metrics.json has it as the cell's ``low_end``.
    """

    auc: Interval
    tpr_at_fpr: dict[float, Interval | None]
    n_members: int
    n_nonmembers: int
    n_resamples: int
    confidence: float
    seed: int
    not_measurable: dict[float, str] = field(default_factory=dict)
    resamples: str | None = "samples"
    n_units: int | None = None
    method: str | None = "bca"
    n_nan: int | None = None
    tied_share: float | None = None
    tie_decides: dict[float, str] = field(default_factory=dict)
    n_nonmember_units: int | None = None
    low_end: dict[float, str] = field(default_factory=dict)

    def unresolved(
        self, bounds: Iterable[float] | None = None, *, where: str = "this evaluation"
    ) -> dict[float, str]:
        """``{bound: reason}`` for each of ``bounds`` (default: this summary's) that its
        non-members cannot resolve: the one rule of :mod:`~imprint.metrics.resolution`,
        counting non-member groups when whole groups were resampled."""
        return unresolvable(
            self.tpr_at_fpr if bounds is None else bounds,
            self.n_nonmembers,
            where=where,
            nonmember_units=self.n_nonmember_units,
            unit_name=self.resamples or "groups",
        )

    def tpr(self, bound: float) -> Interval | None:
        """The TPR interval at FPR ``bound``; None when not measurable (or not asked for)."""
        return None if bound in self.not_measurable else self.tpr_at_fpr.get(bound)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: ``"auc"``, ``"tpr@1%"``, ... each ``{"estimate", "low", "high"}``
        (a not measurable one all None with ``not_measurable``: why), then the counts and the
        bootstrap settings, in the order metrics.json has always had. NaN is written as None."""
        out: dict[str, Any] = {"auc": self.auc.to_dict()}
        for bound, interval in self.tpr_at_fpr.items():
            if interval is None or bound in self.not_measurable:
                reason = self.not_measurable.get(bound)
                out[fpr_key(bound)] = {"estimate": None, "low": None, "high": None}
                out[fpr_key(bound)]["not_measurable"] = reason
            else:
                out[fpr_key(bound)] = interval.to_dict()
                if bound in self.tie_decides:
                    out[fpr_key(bound)]["ties"] = self.tie_decides[bound]
                if bound in self.low_end:
                    out[fpr_key(bound)]["low_end"] = self.low_end[bound]
        out.update(
            n_members=self.n_members,
            n_nonmembers=self.n_nonmembers,
            n_resamples=self.n_resamples,
            confidence=self.confidence,
            seed=self.seed,
        )
        optional = (("n_nan", self.n_nan), ("resamples", self.resamples),
                    ("method", self.method), ("n_units", self.n_units),
                    ("tied_share", self.tied_share),
                    ("n_nonmember_units", self.n_nonmember_units))  # fmt: skip
        out.update({key: value for key, value in optional if value is not None})
        return out
