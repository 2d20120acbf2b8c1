"""ROC curves with bootstrap bands, as the report draws them: computed here, drawn there.

A curve is the TPR at FPR <= k/n (n non-members) on a grid of k, with an interval from the same
bootstrap draws as the run table's TPR@FPR figures (:func:`imprint.metrics.bootstrap_metrics`
with the column's seed, resample count and resampled unit; the draws do not depend on the FPR
bounds asked for). The band at the grid point of a table bound t (k = floor(t n)) is the table's
TPR@t interval only when t n is a whole number and every resample keeps n non-members (texts,
resampled within each class): otherwise the resamples (documents of unequal size change n) and
the BCa jackknife (n - 1 non-members) cut k/n and t at different counts, and the two intervals
can differ slightly (measured: 0.063 against 0.060 for a lower bound at 5 % of 150 texts); the
table's figure is the one to quote. The blind baseline's curve is the strongest classifier's
own, its band not selection-adjusted (its ``note`` says so). The TPR at FPR <= t is
the staircase a step ROC plot shows (constant on [k/n, (k+1)/n), ties resolved pessimistically,
no interpolation); with at most :data:`EXACT_UP_TO` non-members the grid holds every k and the
curve is exact, above that it holds that many log-spaced k and the step drawn between two grid
points is the lower of the two (never above the true curve).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from imprint.evaluation import jsonread as js
from imprint.metrics import DEFAULT_FPR_BOUNDS, UndefinedMetricWarning, bootstrap_metrics

__all__ = ["EXACT_UP_TO", "RocCurve", "roc_with_band"]

#: the grid holds every k/n up to this many non-members, else this many log-spaced k (and the
#: k of the report's FPR bounds, so the band there is the table's interval)
EXACT_UP_TO = 100


@dataclass(frozen=True)
class RocCurve:
    """TPR at FPR <= ``fpr[i]`` (``tpr``, shape (g,)) and its bootstrap interval (``low``,
    ``high``); ``fpr`` = k/n_nonmembers for the grid's k (ascending, 1/n first). ``resamples``
    names what the band resamples ("texts", "documents"), ``method`` the interval (BCa)."""

    fpr: tuple[float, ...]
    tpr: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n_members: int
    n_nonmembers: int
    n_resamples: int
    confidence: float
    resamples: str
    method: str
    #: what the band is not, when it is less than the table's interval (the blind curve's)
    note: str = ""
    #: non-member groups when the band resamples groups (documents): the resolution rule's count
    n_nonmember_units: int | None = None

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"note": self.note} if self.note else {}
        if self.n_nonmember_units is not None:
            extra["n_nonmember_units"] = self.n_nonmember_units
        return {
            "fpr": list(self.fpr),
            "tpr": [_jf(v) for v in self.tpr],
            "low": [_jf(v) for v in self.low],
            "high": [_jf(v) for v in self.high],
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "method": self.method,
            **extra,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> RocCurve:
        data = js.obj(data, where)

        def values(key: str) -> tuple[float, ...]:
            raw = js.get(data, key, where)
            if not isinstance(raw, list):
                raise js.bad(f"{where}.{key}", "a list of numbers", raw)
            return tuple(math.nan if v is None else js.num(v, f"{where}.{key}") for v in raw)

        fpr, tpr, low, high = (values(k) for k in ("fpr", "tpr", "low", "high"))
        if not len(fpr) == len(tpr) == len(low) == len(high):
            raise js.bad(where, "fpr, tpr, low and high of one length", len(fpr))
        return cls(
            fpr,
            tpr,
            low,
            high,
            n_members=js.integer(js.get(data, "n_members", where), f"{where}.n_members"),
            n_nonmembers=js.integer(js.get(data, "n_nonmembers", where), f"{where}.n_nonmembers"),
            n_resamples=js.integer(js.get(data, "n_resamples", where), f"{where}.n_resamples"),
            confidence=js.num(js.get(data, "confidence", where), f"{where}.confidence"),
            resamples=js.text(js.get(data, "resamples", where), f"{where}.resamples"),
            method=js.text(js.get(data, "method", where), f"{where}.method"),
            note=js.text(data.get("note", ""), f"{where}.note"),
            n_nonmember_units=_units(data, where),
        )

    def band_label(self) -> str:
        """What the band is, in words (for legends and captions)."""
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.confidence:.0%} bootstrap band ({self.method}, {self.n_resamples} "
            f"resamples of {self.resamples}{note})"
        )


def _units(data: dict[str, Any], where: str) -> int | None:
    """A curve's ``n_nonmember_units`` (None when absent): 1 to ``n_nonmembers``."""
    if data.get("n_nonmember_units") is None:
        return None
    units = js.integer(data["n_nonmember_units"], f"{where}.n_nonmember_units")
    n = js.integer(js.get(data, "n_nonmembers", where), f"{where}.n_nonmembers")
    if not min(1, n) <= units <= n:
        raise js.bad(f"{where}.n_nonmember_units", f"an integer from 1 to {n}", units)
    return units


def _jf(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def fpr_grid(n_nonmembers: int) -> np.ndarray:
    """The k of the grid (see the module docstring), shape (g,), ascending from 1."""
    if n_nonmembers <= EXACT_UP_TO:
        return np.arange(1, n_nonmembers + 1)
    spaced = np.rint(np.geomspace(1, n_nonmembers, EXACT_UP_TO // 2)).astype(int)
    bounds = np.floor(np.asarray(DEFAULT_FPR_BOUNDS) * n_nonmembers + 1e-9).astype(int)
    return np.unique(np.concatenate([spaced, bounds[bounds >= 1]]))


def roc_with_band(
    labels: np.ndarray,
    scores: np.ndarray,
    *,
    n_bootstrap: int,
    seed: int,
    groups: np.ndarray | None = None,
    resamples: str = "texts",
) -> RocCurve | None:
    """The step ROC of ``scores`` (shape (n,), higher = member; NaN left out, as the table
    leaves them out) with its bootstrap band; None without both classes."""
    finite = ~np.isnan(scores)
    y, s = labels[finite], scores[finite]
    n_pos, n_neg = int((y == 1).sum()), int((y == 0).sum())
    if not n_pos or not n_neg:
        return None
    grid = fpr_grid(n_neg) / n_neg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        summary = bootstrap_metrics(
            y,
            s,
            n_resamples=n_bootstrap,
            seed=seed,
            fpr_bounds=tuple(float(b) for b in grid),
            groups=None if groups is None else groups[finite],
            resamples=resamples,
        )
    cells = [summary.tpr_at_fpr[float(b)] for b in grid]
    nan = math.nan
    return RocCurve(
        fpr=tuple(float(b) for b in grid),
        tpr=tuple(nan if c is None else c.estimate for c in cells),
        low=tuple(nan if c is None else c.low for c in cells),
        high=tuple(nan if c is None else c.high for c in cells),
        n_members=n_pos,
        n_nonmembers=n_neg,
        n_resamples=n_bootstrap,
        confidence=summary.confidence,
        resamples=resamples,
        method=summary.method or "bca",
        n_nonmember_units=summary.n_nonmember_units,
    )
