"""Figures the bootstrap cannot carry: a collapsed bootstrap and ties at a threshold.

- **Collapsed bootstrap.** When (nearly) every resample gives the same value (8 members all
  above 8 non-members: every resample's AUC is 1), the percentile or BCa interval is that one
  point and reads as certainty. The interval is then a score (Wilson) bound at the data's size:
  for the AUC, with the distribution-free variance bound Var(AUC) <= A (1 - A) / min(m, n) (van
  Dantzig 1951; Birnbaum & Klose 1957, Ann. Math. Statist. 28(4)), solving
  (estimate - A)^2 <= z^2 A (1 - A) / min(m, n) for A (Wilson 1927, JASA 22, the score
  interval with min(m, n) trials); for a TPR, the Wilson interval of the members above the fixed
  threshold. ``Interval.basis`` says so.
- **Ties at a threshold.** TPR at FPR t takes every sample tied at a score or none of them. When
  the first score level the read-out must leave out (it would pass more than ``floor(t n)``
  non-members) also holds members, the tie, not the data, decides how many of them count:
  :func:`tie_note` says how many are tied and how far the TPR could move.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from imprint.metrics._validation import allowed_false_positives
from imprint.metrics.interval import Interval

__all__ = [
    "class_units",
    "collapsed",
    "score_bound",
    "tie_note",
    "tied_share",
    "unless_collapsed",
]


def collapsed(found: Interval) -> bool:
    """Whether an interval read from resamples is a single point (its resamples collapsed)."""
    return math.isfinite(found.low) and found.low == found.high


def score_bound(
    estimate: float, trials: int, confidence: float, figure: str, share: str
) -> tuple[float, float, str]:
    """``(low, high, basis)``: the Wilson score interval of ``estimate`` with ``trials`` units
    (min(m, n) for an AUC, the member units for a TPR), and the sentence that says why;
    ``share`` says how many resamples gave the collapsed value, e.g. "199 of 200 resamples
    gave 0.000"."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    k = max(int(trials), 1)
    centre = (estimate + z * z / (2 * k)) / (1 + z * z / k)
    half = z / (1 + z * z / k) * math.sqrt(estimate * (1 - estimate) / k + z * z / (4 * k * k))
    # the estimate inside, whatever the rounding (the centre moves towards 1/2)
    low, high = min(max(0.0, centre - half), estimate), max(min(1.0, centre + half), estimate)
    variance = "A (1 - A) / min(m, n), van Dantzig's bound" if figure == "auc" else "p (1 - p) / m"
    basis = f"bootstrap collapsed ({share}); Wilson score bound at n = {k} with variance {variance}"
    return low, high, basis


def tied_share(scores: NDArray[np.float64]) -> float:
    """The share of scores equal to at least one other score (0 for an empty column)."""
    if not scores.size:
        return 0.0
    _, counts = np.unique(scores, return_counts=True)
    return float(counts[counts > 1].sum() / scores.size)


def tie_note(
    thresholds: NDArray[np.float64],
    tp: NDArray[np.int64],
    fp: NDArray[np.int64],
    n_pos: int,
    n_neg: int,
    bound: float,
) -> str | None:
    """Why ties decide the TPR at FPR ``bound`` (None when they do not), from the confusion
    counts of :func:`~imprint.metrics.binary.confusion_at_thresholds`."""
    k = allowed_false_positives(bound, n_neg)
    cut = int(np.searchsorted(fp, k, side="right"))  # the first level left out
    if cut >= thresholds.size:
        return None
    tp_before = int(tp[cut - 1]) if cut else 0
    fp_before = int(fp[cut - 1]) if cut else 0
    members, others = int(tp[cut]) - tp_before, int(fp[cut]) - fp_before
    if members == 0:
        return None
    return (
        f"{members + others} scores tied at {thresholds[cut]:.6g} ({members} members, {others} "
        f"non-members) straddle the threshold for FPR {bound * 100:g} %: all are left out, so "
        f"the TPR reads {tp_before / n_pos:.3f}; with the tie broken it could be up to "
        f"{(tp_before + members) / n_pos:.3f}"
    )


def class_units(
    grouped: tuple[NDArray[np.int64], int] | None, is_member: NDArray[np.bool_]
) -> tuple[int, int]:
    """(member units, non-member units): samples, or groups with ``grouped``."""
    if grouped is None:
        n_pos = int(is_member.sum())
        return n_pos, int(is_member.size) - n_pos
    unit, n_u = grouped
    member_units = int(np.unique(unit[is_member]).size)
    return member_units, n_u - member_units


def unless_collapsed(
    found: Interval, values: NDArray[np.float64], trials: int, figure: str, confidence: float
) -> Interval:
    """``found``, or a score bound when every resample gave one value (:mod:`~imprint.
    metrics.degenerate`): an interval of one point would read as certainty."""
    if not collapsed(found):
        return found
    finite = values[np.isfinite(values)]
    share = f"{int(np.sum(finite == found.low))} of {finite.size} resamples gave {found.low:.3f}"
    low, high, basis = score_bound(found.estimate, trials, confidence, figure, share)
    return Interval(found.estimate, low, high, basis)
