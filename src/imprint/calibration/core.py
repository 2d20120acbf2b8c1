"""The calibration suite's row: one reported figure, checked on simulated data of known truth.

A row holds the figure, its method, the nominal level (an interval's confidence, a test's
alpha, or the value an estimate should have), what the simulations measured, how many there
were, and the tolerance that ``n`` simulations allow. Tolerances are never hand-picked: they are
three binomial (or sample) standard errors of the measured share (or mean) at ``n``:

- coverage: the share of simulations whose interval held the truth, at least
  ``nominal - 3 sqrt(nominal (1 - nominal) / n)`` (an interval may be conservative);
- size: the share of null simulations a test flagged, at most ``alpha + 3 sqrt(alpha (1 -
  alpha) / n)``;
- mean: an estimate's mean over simulations within ``3 sd / sqrt(n)`` of its true value (bias);
- share: a rule that must hold in every simulation (e.g. "not measurable" with 50
  non-members), so the tolerance is none;
- info: a measured value with no nominal one (e.g. a test's power against one shift).

``expect_pass=False`` marks a row that runs the *old* behaviour, kept to show the defect the
suite found reproduced (it fails its tolerance when there are simulations enough to see it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KINDS", "Row", "coverage_row", "info_row", "mean_row", "share_row", "size_row"]

KINDS = ("coverage", "size", "mean", "share", "info")
#: standard errors a measured share or mean may stray from its nominal value
N_SE = 3.0


@dataclass(frozen=True)
class Row:
    """One calibrated figure (see the module docstring)."""

    figure: str
    method: str
    kind: str
    nominal: float
    measured: float
    n: int
    bound: float  # coverage: lowest allowed; size: highest allowed; mean: allowed |bias|
    passed: bool
    expect_pass: bool = True
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether the suite accepts the row: a row of the current code must pass; an
        old-behaviour row is shown for contrast (its failing is the defect reproduced, and a
        quick run may have too few simulations to see it), so it never fails the suite."""
        return self.passed or not self.expect_pass

    @property
    def tolerance(self) -> str:
        """The tolerance in words, e.g. ">= 0.919" or "|bias| <= 0.006"."""
        if self.kind == "coverage":
            return f">= {self.bound:.3f}"
        if self.kind == "size":
            return f"<= {self.bound:.3f}"
        if self.kind == "mean":
            return f"{self.nominal:g} +- {self.bound:.4f}"
        if self.kind == "info":
            return "-"
        return "every simulation"

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "method": self.method,
            "kind": self.kind,
            "nominal": self.nominal,
            "measured": self.measured,
            "n": self.n,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "expect_pass": self.expect_pass,
            "ok": self.ok,
            "note": self.note,
        }


def _share(flags: Any) -> tuple[float, int]:
    arr = np.asarray(flags, dtype=bool)
    if arr.size == 0:
        raise ValueError("a calibration row needs at least one simulation")
    return float(arr.mean()), int(arr.size)


def coverage_row(figure: str, method: str, hits: Any, nominal: float, **extra: Any) -> Row:
    """``hits``: per simulation, whether the interval held the truth."""
    measured, n = _share(hits)
    bound = nominal - N_SE * math.sqrt(nominal * (1 - nominal) / n)
    return Row(figure, method, "coverage", nominal, measured, n, bound, measured >= bound, **extra)


def size_row(
    figure: str, method: str, rejected: Any, alpha: float, *, n_se: float = N_SE, **extra: Any
) -> Row:
    """``rejected``: per null simulation, whether the test flagged it (or the interval missed);
    ``n_se``: standard errors allowed above alpha (dataset inference's issue asks for 2)."""
    measured, n = _share(rejected)
    bound = alpha + n_se * math.sqrt(alpha * (1 - alpha) / n)
    return Row(figure, method, "size", alpha, measured, n, bound, measured <= bound, **extra)


def mean_row(figure: str, method: str, values: Any, truth: float, **extra: Any) -> Row:
    """``values``: the estimate in each simulation; ``truth``: its true value."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n < 2:
        raise ValueError("a mean row needs at least two finite simulated estimates")
    bound = N_SE * float(arr.std(ddof=1)) / math.sqrt(n)
    measured = float(arr.mean())
    passed = abs(measured - truth) <= bound
    return Row(figure, method, "mean", truth, measured, n, bound, passed, **extra)


def share_row(figure: str, method: str, flags: Any, **extra: Any) -> Row:
    """``flags``: per simulation, whether the rule held; it must hold in all of them."""
    measured, n = _share(flags)
    return Row(figure, method, "share", 1.0, measured, n, 1.0, measured == 1.0, **extra)


def info_row(figure: str, method: str, measured: float, n: int, **extra: Any) -> Row:
    """A measured value shown for context (no nominal value, so nothing to fail)."""
    return Row(figure, method, "info", math.nan, measured, n, math.nan, True, **extra)
