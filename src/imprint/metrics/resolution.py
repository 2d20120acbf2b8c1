"""Which FPR bounds a set of non-members can resolve.

With n non-members the smallest non-zero FPR is 1/n, so a bound t < 1/n admits no false positive
at all: a "TPR at t" or a "threshold at t" is then the one at zero false positives, whatever t
says. Every output (run, blind suite, perturbation table, run comparison) applies this rule:
a figure at t needs at least ceil(1/t) non-members, else it is reported as not measurable,
with :func:`unresolvable_reason`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable

__all__ = ["min_nonmembers", "unresolvable", "unresolvable_reason"]


def min_nonmembers(max_fpr: float) -> int:
    """Non-members needed before one false positive is an FPR of at most ``max_fpr`` (1/t).

    A bound of 0 needs none: "no false positive" is what it asks for, at any n."""
    if max_fpr <= 0:
        return 0
    need = 1 / max_fpr - 1e-9  # 1e-9: 1 / 0.001 must give 1000, not 1001
    return math.ceil(need) if math.isfinite(need) else sys.maxsize  # a subnormal bound


def unresolvable_reason(
    max_fpr: float, n_nonmembers: int, *, where: str = "this evaluation"
) -> str | None:
    """Why an FPR of ``max_fpr`` cannot be resolved with ``n_nonmembers`` (None if it can);
    ``where`` names the non-members, e.g. "run A"."""
    need = min_nonmembers(max_fpr)
    n = int(n_nonmembers)
    if n >= need:
        return None
    smallest = f"1/{n} = {100 / n:.2g} %" if n > 0 else "none"
    return (
        f"an FPR of {max_fpr * 100:g} % needs at least {need} non-members; there are {n} in "
        f"{where} (smallest non-zero FPR {smallest}), so a figure at that FPR would only be the "
        "one at zero false positives"
    )


def unresolvable(
    bounds: Iterable[float], n_nonmembers: int, *, where: str = "this evaluation"
) -> dict[float, str]:
    """``{bound: reason}`` for each of ``bounds`` that ``n_nonmembers`` cannot resolve."""
    reasons = {b: unresolvable_reason(b, n_nonmembers, where=where) for b in bounds}
    return {b: r for b, r in reasons.items() if r is not None}
