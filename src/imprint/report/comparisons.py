"""The report's "Paired comparisons" section: each attack against the best one (by AUC) and
against LOSS, from the :class:`~imprint.metrics.pairwise.PairedComparisons` the evaluation
computed (:mod:`imprint.evaluation.comparisons`); metrics.json keeps every pair."""

from __future__ import annotations

import math
from typing import Any

from imprint.metrics import Interval
from imprint.metrics.pairwise import PairedComparisons, PairedDifference

__all__ = ["BASELINE", "comparison_blocks", "comparison_rows"]

BASELINE = "loss"  # every attack is also shown against LOSS, the field's reference attack


def _shown_pairs(comparisons: PairedComparisons) -> list[PairedDifference]:
    """Each attack against the best column (highest AUC of any pair it is in) and LOSS."""
    aucs: dict[str, float] = {}
    for p in comparisons.pairs:
        for name, value in ((p.a, p.auc_a), (p.b, p.auc_b)):
            if not math.isnan(value):
                aucs.setdefault(name, value)
    if not aucs:
        return []
    best = max(aucs, key=lambda c: aucs[c])
    shown: list[PairedDifference] = []
    for anchor in dict.fromkeys([best, BASELINE]):
        for other in aucs:
            pair = comparisons.between(anchor, other) if other != anchor else None
            if pair is not None and not any({pair.a, pair.b} == {s.a, s.b} for s in shown):
                shown.append(pair)
    return shown


def _iv(interval: Interval | None) -> str:
    if interval is None or math.isnan(interval.estimate):
        return "-"
    return f"{interval.estimate:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}]"


def _verdict(pair: PairedDifference) -> str:
    if pair.error:
        return f"not compared: {pair.error}"
    return f"{pair.better} better" if pair.better else "no difference shown"


def comparison_rows(comparisons: PairedComparisons) -> tuple[list[str], list[list[str]]]:
    """The report's table: header and one row per pair shown (see :func:`_shown_pairs`)."""
    level = 1 - (1 - comparisons.confidence) / max(comparisons.n_pairs, 1)
    header = ["A", "B", "AUC(A) - AUC(B) [95% CI, DeLong]", f"[{level:.4%} CI, Bonferroni]",
              "[95% CI, paired bootstrap]", "p (Bonferroni)", "verdict"]  # fmt: skip
    rows = []
    for p in _shown_pairs(comparisons):
        p_adj = "-" if math.isnan(p.p_adjusted) else f"{p.p_adjusted:.3g}"
        adjusted = "-" if math.isnan(p.adjusted.low) else f"[{p.adjusted.low:+.3f}, "
        adjusted += "" if adjusted == "-" else f"{p.adjusted.high:+.3f}]"
        rows.append([p.a, p.b, _iv(p.interval), adjusted, _iv(p.bootstrap), p_adj, _verdict(p)])
    return header, rows


def comparison_blocks(comparisons: PairedComparisons | None) -> list[tuple[str, Any]]:
    """The report's "Paired comparisons" section (nothing with fewer than two attacks)."""
    if comparisons is None or not comparisons.pairs:
        return []
    return [
        ("h2", "Paired comparisons"),
        (
            "p",
            comparisons.describe() + ". Shown: each attack against the best (highest AUC) "
            f"and against {BASELINE}; metrics.json has every pair.",
        ),  # fmt: skip
        ("table", comparison_rows(comparisons)),
    ]
