"""One score column's figures: AUC and TPR at each FPR bound with bootstrap intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from imprint.evaluation import jsonread as js
from imprint.metrics import Interval, MetricSummary
from imprint.metrics.bootstrap import fpr_key


@dataclass(frozen=True)
class ColumnMetrics:
    """AUC and TPR at each FPR bound of one score column, with bootstrap intervals.

    ``tpr_at_fpr`` maps a bound (0.01 for 1 %) to its interval, NaN for a bound listed in
    ``not_measurable`` (bound -> why: fewer than 1/t non-members). ``n_nan`` counts samples
    the column gave no score (left out); None for a blind classifier, which scores every sample.
    ``resamples`` names what the bootstrap resampled ("texts", "documents"; None when not
    recorded, as in run folders written before it was); ``method`` the interval read from
    the resamples ("bca", or the out-of-fold widening; None when not recorded).
    """

    auc: Interval
    tpr_at_fpr: dict[float, Interval]
    n_members: int
    n_nonmembers: int
    n_resamples: int
    confidence: float
    seed: int
    not_measurable: dict[float, str] = field(default_factory=dict)
    n_nan: int | None = None
    resamples: str | None = None
    method: str | None = None

    @classmethod
    def from_summary(cls, summary: MetricSummary, *, n_nan: int | None = None) -> ColumnMetrics:
        nan = Interval(math.nan, math.nan, math.nan)  # a not measurable TPR: no number
        return cls(
            auc=summary.auc,
            tpr_at_fpr={b: nan if v is None else v for b, v in summary.tpr_at_fpr.items()},
            not_measurable=dict(summary.not_measurable),
            resamples=summary.resamples,
            method=summary.method,
            n_members=summary.n_members,
            n_nonmembers=summary.n_nonmembers,
            n_resamples=summary.n_resamples,
            confidence=summary.confidence,
            seed=summary.seed,
            n_nan=n_nan,
        )

    def tpr(self, bound: float) -> Interval | None:
        """The TPR interval at FPR ``bound``; None when not measurable or not computed."""
        return None if bound in self.not_measurable else self.tpr_at_fpr.get(bound)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"auc": self.auc.to_dict()}
        for bound, interval in self.tpr_at_fpr.items():
            reason = self.not_measurable.get(bound)
            cell: dict[str, Any] = interval.to_dict()
            if reason is not None:
                cell = {"estimate": None, "low": None, "high": None, "not_measurable": reason}
            out[fpr_key(bound)] = cell
        out.update(
            n_members=self.n_members,
            n_nonmembers=self.n_nonmembers,
            n_resamples=self.n_resamples,
            confidence=self.confidence,
            seed=self.seed,
        )
        if self.n_nan is not None:
            out["n_nan"] = self.n_nan
        if self.resamples is not None:
            out["resamples"] = self.resamples
        if self.method is not None:
            out["method"] = self.method
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ColumnMetrics:
        data = js.obj(data, where)
        tprs: dict[float, Interval] = {}
        reasons: dict[float, str] = {}
        for key in filter(js.is_tpr_key, data):
            tprs[js.fpr_bound(key)] = js.interval(data[key], f"{where}.{key}")
            if data[key].get("not_measurable") is not None:
                reasons[js.fpr_bound(key)] = js.text(data[key]["not_measurable"], f"{where}.{key}")
        ints = {
            k: js.integer(js.get(data, k, where), f"{where}.{k}")
            for k in ("n_members", "n_nonmembers", "n_resamples", "seed")
        }
        n_nan = data.get("n_nan")
        resamples = data.get("resamples")
        method = data.get("method")
        return cls(
            auc=js.interval(js.get(data, "auc", where), f"{where}.auc"),
            tpr_at_fpr=tprs,
            confidence=js.num(js.get(data, "confidence", where), f"{where}.confidence"),
            not_measurable=reasons,
            n_nan=None if n_nan is None else js.integer(n_nan, f"{where}.n_nan"),
            resamples=None if resamples is None else js.text(resamples, f"{where}.resamples"),
            method=None if method is None else js.text(method, f"{where}.method"),
            **ints,
        )
