"""One score column's figures in a run: a :class:`~imprint.metrics.MetricSummary` (AUC and TPR
at each FPR bound with bootstrap intervals), as the evaluation records it and as metrics.json
holds it; :func:`summary_from_dict` reads one back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from imprint.evaluation import jsonread as js
from imprint.metrics import Interval, MetricSummary

__all__ = ["as_column", "summary_from_dict"]


def as_column(summary: MetricSummary, *, n_nan: int | None = None) -> MetricSummary:
    """``summary`` as a run records a score column: ``n_nan`` samples it left unscored (None
    for a blind classifier, which scores every sample); the count of resampled units is not
    part of metrics.json (it never was), so it is dropped. A TPR listed as not measurable
    holds no number (None), whatever placeholder the summary had."""
    tprs = {b: None if b in summary.not_measurable else v for b, v in summary.tpr_at_fpr.items()}
    return replace(summary, tpr_at_fpr=tprs, n_nan=n_nan, n_units=None)


def summary_from_dict(data: Any, where: str) -> MetricSummary:
    """Read :meth:`MetricSummary.to_dict` back (a metrics.json column); a malformed value
    raises :class:`~imprint.errors.DataError` naming its place. Files written before
    ``resamples``/``method`` were recorded read back with None there."""
    data = js.obj(data, where)
    tprs: dict[float, Interval | None] = {}
    reasons: dict[float, str] = {}
    ties: dict[float, str] = {}
    low_end: dict[float, str] = {}
    for key in filter(js.is_tpr_key, data):
        bound = js.fpr_bound(key)
        cell = js.obj(data[key], f"{where}.{key}")
        if cell.get("not_measurable") is not None:
            reasons[bound] = js.text(cell["not_measurable"], f"{where}.{key}")
            tprs[bound] = None
        else:
            tprs[bound] = js.interval(cell, f"{where}.{key}")
        if cell.get("ties") is not None:
            ties[bound] = js.text(cell["ties"], f"{where}.{key}.ties")
        if cell.get("low_end") is not None:
            low_end[bound] = js.text(cell["low_end"], f"{where}.{key}.low_end")

    def count(key: str) -> int:
        return js.integer(js.get(data, key, where), f"{where}.{key}")

    def maybe_count(key: str) -> int | None:
        return None if data.get(key) is None else js.integer(data[key], f"{where}.{key}")

    def maybe_number(key: str) -> float | None:
        return None if data.get(key) is None else js.num(data[key], f"{where}.{key}")

    def maybe_text(key: str) -> str | None:
        return None if data.get(key) is None else js.text(data[key], f"{where}.{key}")

    def nonmember_units() -> int | None:  # groups of non-members: 1 to n_nonmembers of them
        units, n = maybe_count("n_nonmember_units"), count("n_nonmembers")
        if units is not None and not min(1, n) <= units <= n:
            expected = f"an integer from {min(1, n)} to n_nonmembers ({n})"
            raise js.bad(f"{where}.n_nonmember_units", expected, units)
        return units

    return MetricSummary(
        auc=js.interval(js.get(data, "auc", where), f"{where}.auc"),
        tpr_at_fpr=tprs,
        n_members=count("n_members"),
        n_nonmembers=count("n_nonmembers"),
        n_resamples=count("n_resamples"),
        confidence=js.num(js.get(data, "confidence", where), f"{where}.confidence"),
        seed=count("seed"),
        not_measurable=reasons,
        resamples=maybe_text("resamples"),
        n_units=maybe_count("n_units"),
        method=maybe_text("method"),
        n_nan=maybe_count("n_nan"),
        tied_share=maybe_number("tied_share"),
        tie_decides=ties,
        n_nonmember_units=nonmember_units(),
        low_end=low_end,
    )
