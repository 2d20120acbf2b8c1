"""The interval type every figure carries: an estimate, ``[low, high]``, and, where the
interval does not come from the resamples, what it rests on instead (``basis``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Interval"]


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]`` (NaN when undefined).

    ``basis`` is None for an interval read from the resamples; otherwise it says what the
    interval rests on instead (a collapsed bootstrap's score bound: :mod:`~imprint.metrics.
    degenerate`)."""

    estimate: float
    low: float
    high: float
    basis: str | None = None

    def __float__(self) -> float:
        """The point estimate: ``float(metrics.attacks["loss"].auc)``; the interval stays on
        the object (``low``, ``high``)."""
        return float(self.estimate)

    def __format__(self, spec: str) -> str:
        """A format spec applies to the estimate, as ``float()`` reads it (``f"{auc:.3f}"``);
        no spec gives the whole interval, as ``str()`` does."""
        return format(float(self.estimate), spec) if spec else str(self)

    def to_dict(self) -> dict[str, Any]:
        """``{"estimate", "low", "high"}`` (and ``"basis"`` when set); NaN becomes ``None`` so
        the output is valid JSON."""
        out: dict[str, Any] = {
            "estimate": _json_float(self.estimate),
            "low": _json_float(self.low),
            "high": _json_float(self.high),
        }
        if self.basis is not None:
            out["basis"] = self.basis
        return out
