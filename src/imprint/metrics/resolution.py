"""Which FPR bounds a set of non-members can resolve: the one rule every output applies.

TPR at FPR t is read at the lowest threshold that lets ``k = floor(t n)`` of the n non-members
through (:func:`~imprint.metrics.binary.tpr_at_fpr`). That threshold sits just above the
(k+1)-th highest non-member, whose real FPR is about (k+1)/(n+1), not t: 2 t at k = 1, 1.25 t
at k = 4. The figure is biased upward and its bootstrap interval, which cannot see an order
statistic's tail (a resample repeats the sample's extremes), under-covers. Measured (Gaussian
scores, BCa bootstrap, 95 % nominal; docs/calibration.md, "TPR at the edge of resolvability"):
k = 1 covers 0.82-0.89, k = 2 0.90-0.94, k = 3 0.92-0.95, k = 4 0.93-0.96, at AUC 0.7 and 0.9,
with as many members as non-members and with ten times as many. So a figure at t needs at least
:data:`MIN_FALSE_POSITIVES` = 4 false positives allowed, that is ``ceil(4 / t)`` non-members
(400 for 1 %, 4,000 for 0.1 %), else it is reported as not measurable, with
:func:`unresolvable_reason`. Where the bootstrap resamples whole groups (``groups=``, e.g. the
documents of a ``--unit document`` run), the rule counts non-member groups, not texts: the
interval sees only as many independent draws as there are groups (16 documents x 5 texts, 80
non-member texts, covered 0.860-0.883 at 5 %; 80 documents 0.923-0.937). Every output (run,
blind suite, perturbation table, threshold transfer, run comparison, ROC plot shading, study
tables) calls these functions.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from numbers import Integral

from imprint.errors import ConfigError
from imprint.metrics._validation import allowed_false_positives, check_fraction

__all__ = [
    "MIN_FALSE_POSITIVES",
    "lowest_resolvable_fpr",
    "min_nonmembers",
    "unresolvable",
    "unresolvable_reason",
]

#: false positives a resolvable FPR bound must allow (k = floor(t n) >= this); 1 before issue 37
MIN_FALSE_POSITIVES = 4


def min_nonmembers(max_fpr: float, *, min_false_positives: int = MIN_FALSE_POSITIVES) -> int:
    """Non-members needed before ``max_fpr`` allows ``min_false_positives`` false positives
    (``ceil(k / t)``, with the same float comparisons as the read-out).

    A bound of 0 needs none: "no false positive" is what it asks for, at any n. A bound
    outside [0, 1] (or NaN) is a :class:`~imprint.errors.ConfigError`."""
    max_fpr = check_fraction(max_fpr, name="an FPR bound")
    if isinstance(min_false_positives, bool) or not isinstance(min_false_positives, Integral):
        raise ConfigError(
            f"min_false_positives must be an integer >= 0; got {min_false_positives!r}"
        )
    if min_false_positives < 0:
        raise ConfigError(f"min_false_positives must be >= 0; got {min_false_positives}")
    if max_fpr <= 0:
        return 0
    need = min_false_positives / max_fpr - 1e-9  # 1e-9: 4 / 0.001 must give 4000, not 4001
    if not math.isfinite(need) or need > sys.maxsize / 2:
        return sys.maxsize  # a subnormal bound
    n = max(1, math.ceil(need))
    while n > 1 and allowed_false_positives(max_fpr, n - 1) >= min_false_positives:
        n -= 1
    while allowed_false_positives(max_fpr, n) < min_false_positives:
        n += 1
    return n


def lowest_resolvable_fpr(n_nonmembers: int) -> float:
    """The smallest FPR bound ``n_nonmembers`` can resolve (``MIN_FALSE_POSITIVES / n``; 1.0,
    i.e. none below it, with fewer non-members than that)."""
    n = int(n_nonmembers)
    return min(1.0, MIN_FALSE_POSITIVES / n) if n > 0 else 1.0


def unresolvable_reason(
    max_fpr: float,
    n_nonmembers: int,
    *,
    where: str = "this evaluation",
    min_false_positives: int = MIN_FALSE_POSITIVES,
    nonmember_units: int | None = None,
    unit_name: str = "groups",
) -> str | None:
    """Why an FPR of ``max_fpr`` cannot be resolved with ``n_nonmembers`` (None if it can);
    ``where`` names the non-members, e.g. "run A". ``nonmember_units``: the non-member groups
    (named ``unit_name``, e.g. "documents") when the bootstrap resamples whole groups; the
    rule then counts them instead of the texts."""
    if nonmember_units is None:
        n, what = int(n_nonmembers), "non-members"
    else:
        n, what = int(nonmember_units), f"non-member {unit_name}"
    need = min_nonmembers(max_fpr, min_false_positives=min_false_positives)
    if n >= need:
        return None
    k = allowed_false_positives(max_fpr, n) if n > 0 else 0
    why = "" if nonmember_units is None else f" (the bootstrap resamples {unit_name})"
    return (
        f"an FPR of {max_fpr * 100:g} % needs at least {need} {what}{why} "
        f"({min_false_positives} false positives at that rate); there are {n} in {where}, "
        f"which allow {k}, so the threshold's real FPR would run well above "
        f"{max_fpr * 100:g} % and the interval would under-cover"
    )


def unresolvable(
    bounds: Iterable[float],
    n_nonmembers: int,
    *,
    where: str = "this evaluation",
    min_false_positives: int = MIN_FALSE_POSITIVES,
    nonmember_units: int | None = None,
    unit_name: str = "groups",
) -> dict[float, str]:
    """``{bound: reason}`` for each of ``bounds`` that ``n_nonmembers`` (or, when groups are
    resampled, ``nonmember_units``: see :func:`unresolvable_reason`) cannot resolve."""
    reasons = {
        b: unresolvable_reason(
            b, n_nonmembers, where=where, min_false_positives=min_false_positives,
            nonmember_units=nonmember_units, unit_name=unit_name,
        )
        for b in bounds
    }  # fmt: skip
    return {b: r for b, r in reasons.items() if r is not None}
