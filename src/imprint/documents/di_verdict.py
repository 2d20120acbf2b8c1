"""One verdict for dataset inference, in three states: *trained on*, *not detected* or
*inconclusive*. The report, the terminal table and the benchmarks all call :func:`verdict`.

A p-value below alpha is not yet a finding, nor one above it an all-clear:

- **inconclusive** when the false-positive check (the same test on two disjoint halves of the
  non-members, both unseen) is itself flagged: the test is not calibrated on this data; a flag
  whose check could not run (too few non-member documents) is inconclusive too;
- **inconclusive** when the set is too small for the power asked for (``power``, default 0.8):
  - after a flag: the power table (:func:`~imprint.documents.dataset_inference.p_value_curve`)
    flags fewer than ``power`` of the random subsets and halvings at this size, so the flag
    depends on the split; the size needed is read from the table, or beyond it extrapolated
    from the effect the table measured (the t statistic grows as the square root of the
    documents per half);
  - without a flag: fewer documents than a true effect of ``effect_auc`` (the document-level
    AUC of the combined score, default 0.6) needs for ``power``: the absence of a flag says
    nothing yet;
- otherwise **trained on** (flagged) or **not detected** (not flagged).

Sizes needed come from the power of the one-sided two-sample t-test on the test halves (the
noncentral t distribution with ncp = d / sqrt(1/m1 + 1/m2), d = sqrt(2) * Phi^-1(AUC) for
normal scores): the combination is learned on the other half, which only loses power, so a
size from it is a lower bound (:mod:`imprint.documents.di_calibration` measures both;
``benchmarks/bench_di_power.py`` measures the run's test needing about 1.3 times the formula's
size for 80 % power with 3 attack scores, and more for a *trained on* verdict, whose power
table must flag too: the table in ``docs/recipes/dataset-inference.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from imprint.documents.dataset_inference import ALPHA, MIN_DOCS, CurvePoint, DatasetInference
from imprint.errors import ConfigError

__all__ = [
    "DEFAULT_EFFECT_AUC",
    "DEFAULT_POWER",
    "INCONCLUSIVE",
    "NOT_DETECTED",
    "TRAINED_ON",
    "Verdict",
    "check_power_options",
    "docs_for_power",
    "t_test_power",
    "verdict",
]

TRAINED_ON, NOT_DETECTED, INCONCLUSIVE = "trained on", "not detected", "inconclusive"
DEFAULT_POWER = 0.8
DEFAULT_EFFECT_AUC = 0.6
#: Sizes searched for the documents needed (per set); beyond it "more than" this.
MAX_DOCS = 10**7


@dataclass(frozen=True)
class Verdict:
    """``state`` (one of the three), why (``reasons``, one sentence each), the documents per set
    the asked ``power`` needs (None: no size would, or not estimable) and the power measured at
    this size by the power table (None without one). Against the stated effect (document AUC
    ``effect_auc``), whatever the state: ``power_at_effect``, the power of the t-test on the
    test halves at this size, and ``documents_needed_at_effect``, the size whose power is
    ``power`` (the noncentral-t formula: an upper bound on the run's power and a lower bound on
    the size, since the run learns its combination on the other half;
    ``benchmarks/bench_di_power.py`` measures the run's test)."""

    state: str
    reasons: tuple[str, ...]
    documents_needed: int | None
    power: float
    power_here: float | None
    effect_auc: float
    power_at_effect: float | None = None
    documents_needed_at_effect: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``reasons`` as a list, as metrics.json reads it back)."""
        return {**asdict(self), "reasons": list(self.reasons)}


def check_power_options(power: float, effect_auc: float) -> None:
    """Refuse a power outside (0, 1) or an effect AUC outside (0.5, 1)."""
    if isinstance(power, bool) or not 0 < power < 1:
        raise ConfigError(f"--di-power: the power must be in (0, 1), e.g. 0.8; got {power!r}")
    if isinstance(effect_auc, bool) or not 0.5 < effect_auc < 1:
        raise ConfigError(
            f"--di-effect-auc: the effect AUC must be in (0.5, 1): the document-level AUC an "
            f"effect worth detecting has, e.g. 0.6; got {effect_auc!r}"
        )


def _half(n_docs: int) -> int:
    """Documents in the test half of a set (the second half: the larger one)."""
    return n_docs - n_docs // 2


def t_test_power(m1: int, m2: int, d: float, alpha: float = ALPHA) -> float:
    """Power of the one-sided two-sample t-test with ``m1`` and ``m2`` units against a
    standardised shift ``d`` (noncentral t, df = m1 + m2 - 2)."""
    from scipy.stats import nct
    from scipy.stats import t as student

    df = m1 + m2 - 2
    ncp = d / math.sqrt(1 / m1 + 1 / m2)
    return float(nct.sf(student.isf(alpha, df), df, ncp))


def docs_for_power(d: float, power: float, alpha: float = ALPHA) -> int | None:
    """The fewest documents per set (both sets that size, tested on halves) whose t-test has
    ``power`` against shift ``d``; None when ``d <= 0`` or more than :data:`MAX_DOCS`."""
    if not d > 0:
        return None

    def enough(n: int) -> bool:
        return t_test_power(_half(n), _half(n), d, alpha) >= power

    high = MIN_DOCS
    while not enough(high):
        if high >= MAX_DOCS:
            return None
        high *= 2
    low = max(MIN_DOCS, high // 2)
    while low < high:  # the power rises with n: the first n that is enough
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return high


def _auc_to_d(effect_auc: float) -> float:
    from scipy.stats import norm

    return math.sqrt(2) * float(norm.ppf(effect_auc))


def _get(test: DatasetInference | Mapping[str, Any], key: str) -> Any:
    return getattr(test, key) if isinstance(test, DatasetInference) else test[key]


def _point(p: CurvePoint | Mapping[str, Any]) -> CurvePoint:
    return p if isinstance(p, CurvePoint) else CurvePoint(**p)


def _measured_d(point: CurvePoint, alpha: float) -> float:
    """The shift the power table's median p implies at its size (t = d / sqrt(2 / m))."""
    from scipy.stats import t as student

    m = _half(point.n_docs)
    p = min(max(point.median_p, 1e-300), 1 - 1e-16)
    return float(student.isf(p, 2 * m - 2)) * math.sqrt(2 / m)


def _needed_from_curve(curve: list[CurvePoint], power: float, alpha: float) -> int | None:
    """The smallest measured size from which the share flagged stays >= ``power``; beyond the
    table, extrapolated from the shift measured at its largest size."""
    needed = None
    for point in sorted(curve, key=lambda c: c.n_docs, reverse=True):
        if point.flagged_rate >= power:
            needed = point.n_docs
        else:
            break
    if needed is not None:
        return needed
    largest = max(curve, key=lambda c: c.n_docs)
    found = docs_for_power(_measured_d(largest, alpha), power, alpha)
    return None if found is None else max(found, largest.n_docs + 1)


def verdict(
    test: DatasetInference | Mapping[str, Any],
    false_positive: DatasetInference | Mapping[str, Any] | None,
    curve: Sequence[CurvePoint | Mapping[str, Any]] | None,
    *,
    power: float = DEFAULT_POWER,
    effect_auc: float = DEFAULT_EFFECT_AUC,
) -> Verdict:
    """The verdict of the module docstring for ``test`` (members or suspect vs validation), its
    ``false_positive`` check (None: not run) and its power table ``curve`` (None: not run).
    Tests and checks are :class:`DatasetInference` or their ``to_dict()``."""
    check_power_options(power, effect_auc)
    alpha, flagged = float(_get(test, "alpha")), bool(_get(test, "flagged"))
    n_docs = min(int(_get(test, "n_suspect_docs")), int(_get(test, "n_validation_docs")))
    reasons: list[str] = []
    if false_positive is not None and _get(false_positive, "flagged"):
        reasons.append(
            f"the false-positive check (two halves of the non-members, both unseen) is flagged "
            f"too (p = {_get(false_positive, 'p_value'):.3g}): the test is not calibrated here"
        )
    points = [_point(p) for p in curve or []]
    here = max(points, key=lambda c: c.n_docs) if points else None
    if flagged and false_positive is None:
        reasons.append(
            "the false-positive check (two halves of the non-members) could not run (too few "
            f"non-member documents: it needs {2 * MIN_DOCS}), so the flag's size on this data is "
            "unchecked"
        )
    if flagged:
        needed = _needed_from_curve(points, power, alpha) if points else None
        if here is not None and here.flagged_rate < power:
            reasons.append(
                f"at {here.n_docs} documents per set only {here.flagged_rate:.0%} of "
                f"{here.repeats} random subsets and halvings are flagged (median p "
                f"{here.median_p:.2g}), under the power of {power:.0%} asked for: "
                + _needed_text(needed)
            )
    else:
        needed = docs_for_power(_auc_to_d(effect_auc), power, alpha)
        if needed is None or n_docs < needed:
            reasons.append(
                f"{n_docs} documents per set are too few to find an effect of document AUC "
                f"{effect_auc:g} with power {power:.0%}: " + _needed_text(needed)
            )
    state = INCONCLUSIVE if reasons else (TRAINED_ON if flagged else NOT_DETECTED)
    power_here = here.flagged_rate if here is not None else None
    d = _auc_to_d(effect_auc)
    at_effect = t_test_power(_half(n_docs), _half(n_docs), d, alpha) if n_docs >= MIN_DOCS else None
    return Verdict(state, tuple(reasons), needed, power, power_here, effect_auc, at_effect,
                   docs_for_power(d, power, alpha))  # fmt: skip


def _needed_text(needed: int | None) -> str:
    if needed is None:
        return "no number of documents would be enough for the effect measured"
    return f"about {needed} documents per set would be needed"
