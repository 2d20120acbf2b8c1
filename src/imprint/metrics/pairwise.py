"""Every pair of score columns of one evaluation compared on the same samples, with a
multiple-comparison correction: "is attack A better than attack B here?".

Per pair (:mod:`imprint.metrics.paired` has the methods and their references): DeLong's paired
test (cluster-robust when the units are documents), its interval at the nominal level and at
the Bonferroni level ``1 - (1 - confidence) / n_pairs``, and the paired bootstrap's expanded
percentile interval at the nominal level (:func:`~imprint.metrics.paired.paired_interval`).
The verdict names a better column only when the Bonferroni-adjusted DeLong interval excludes 0
(equivalently ``p * n_pairs < 1 - confidence``), so over all the pairs compared the chance of
declaring any false difference is at most ``1 - confidence``. The pair is compared on the
samples both columns scored (NaN left out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import ConfigError
from imprint.metrics.bootstrap import Interval, _check_settings
from imprint.metrics.paired import (
    delong_test,
    paired_bootstrap_aucs,
    paired_interval,
    unit_index,
)

__all__ = ["PairedComparisons", "PairedDifference", "compare_scores"]

Verdict = Literal["a", "b", "none"]
_EXPANDED = " (expanded percentile)"
CORRECTION = "bonferroni"


def _jf(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


@dataclass(frozen=True)
class PairedDifference:
    """AUC(a) - AUC(b) on the samples both scored. ``interval`` (nominal level) and
    ``adjusted`` (Bonferroni level) are DeLong's; ``bootstrap`` the paired bootstrap's (nominal;
    None when not drawn). ``verdict``: ``"a"``/``"b"`` is better, or ``"none"`` (no difference
    shown at the family level). ``error`` says why a pair could not be compared."""

    a: str
    b: str
    auc_a: float
    auc_b: float
    diff: float
    interval: Interval
    adjusted: Interval
    bootstrap: Interval | None
    p_value: float
    p_adjusted: float
    n_members: int
    n_nonmembers: int
    n_member_units: int
    n_nonmember_units: int
    verdict: Verdict = "none"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "a": self.a, "b": self.b, "auc_a": _jf(self.auc_a), "auc_b": _jf(self.auc_b),
            "diff": self.interval.to_dict(), "diff_adjusted": self.adjusted.to_dict(),
            "diff_bootstrap": None if self.bootstrap is None else self.bootstrap.to_dict(),
            "p_value": _jf(self.p_value), "p_adjusted": _jf(self.p_adjusted),
            "n_members": self.n_members, "n_nonmembers": self.n_nonmembers,
            "n_member_units": self.n_member_units, "n_nonmember_units": self.n_nonmember_units,
            "verdict": self.verdict,
        }  # fmt: skip
        if self.error is not None:
            out["error"] = self.error
        return out

    @property
    def better(self) -> str | None:
        """The better column's name, or None when no difference was shown."""
        return {"a": self.a, "b": self.b}.get(self.verdict)


@dataclass(frozen=True)
class PairedComparisons:
    """A family of paired comparisons. ``resamples`` names the unit resampled and the unit
    DeLong's variance treats as independent (``samples`` or ``documents``); ``n_pairs`` is the
    Bonferroni factor. ``bootstrap`` names the paired bootstrap's interval
    ("paired_expanded_percentile";
    "paired_percentile" in run folders written before issue 37)."""

    pairs: tuple[PairedDifference, ...]
    resamples: str
    confidence: float
    n_resamples: int
    seed: int
    correction: str = CORRECTION
    clustered: bool = False
    bootstrap: str = "paired_expanded_percentile"

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    def between(self, a: str, b: str) -> PairedDifference | None:
        """The comparison of ``a`` and ``b`` in either order, oriented as AUC(a) - AUC(b)."""
        for pair in self.pairs:
            if (pair.a, pair.b) == (a, b):
                return pair
            if (pair.a, pair.b) == (b, a):
                return _flipped(pair)
        return None

    def describe(self) -> str:
        """One sentence: what was compared, resampled and corrected."""
        level = 1 - (1 - self.confidence) / max(self.n_pairs, 1)
        return (
            f"{self.n_pairs} pair(s) of score columns compared on the same {self.resamples} "
            f"(DeLong's paired test{', cluster-robust' if self.clustered else ''};"
            f" paired bootstrap{_EXPANDED if 'expanded' in self.bootstrap else ''}, "
            f"{self.n_resamples} resamples of {self.resamples}, stratified); "
            f"a column is called better only when the Bonferroni-adjusted interval "
            f"({level * 100:.4g} %, {self.n_pairs} pairs) excludes 0"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "delong_paired",
            "bootstrap": self.bootstrap,
            "resamples": self.resamples,
            "correction": self.correction,
            "clustered": self.clustered,
            "n_pairs": self.n_pairs,
            "confidence": self.confidence,
            "adjusted_confidence": 1 - (1 - self.confidence) / max(self.n_pairs, 1),
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "description": self.describe(),
            "pairs": [p.to_dict() for p in self.pairs],
        }


def _flipped(p: PairedDifference) -> PairedDifference:
    def neg(i: Interval | None) -> Interval | None:
        return None if i is None else Interval(-i.estimate, -i.high, -i.low)

    verdict: Verdict = {"a": "b", "b": "a"}.get(p.verdict, "none")  # type: ignore[assignment]
    return PairedDifference(
        p.b, p.a, p.auc_b, p.auc_a, -p.diff, neg(p.interval), neg(p.adjusted),  # type: ignore[arg-type]
        neg(p.bootstrap), p.p_value, p.p_adjusted, p.n_members, p.n_nonmembers,
        p.n_member_units, p.n_nonmember_units, verdict, p.error,
    )  # fmt: skip


_NAN = Interval(math.nan, math.nan, math.nan)


def _undefined(a: str, b: str, m: int, n: int, why: str) -> PairedDifference:
    return PairedDifference(a, b, math.nan, math.nan, math.nan, _NAN, _NAN, None, math.nan,
                            math.nan, m, n, 0, 0, "none", why)  # fmt: skip


def compare_scores(
    labels: ArrayLike,
    columns: Mapping[str, ArrayLike],
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    groups: ArrayLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: str | None = None,
) -> PairedComparisons:
    """Compare score columns pairwise on the same samples (see the module docstring).

    Args:
        labels: shape (n,), 1 = member, 0 = non-member.
        columns: name -> scores of shape (n,) (higher = member; NaN = not scored, left out).
        pairs: the (a, b) pairs to compare; default every pair, in column order. The
            Bonferroni factor is the number of pairs.
        groups: shape (n,) document ids: documents are the resampled, independent units.
        n_resamples: paired bootstrap resamples (0: DeLong only).
        confidence: nominal two-sided level of each interval.
        seed: seed of the bootstrap's ``np.random.default_rng``.
        resamples: the name of the resampled unit, recorded (default ``"samples"``, or
            ``"documents"`` with ``groups``).
    """
    lab = np.asarray(labels).astype(int)
    cols = {name: np.asarray(v, dtype=np.float64) for name, v in columns.items()}
    chosen = list(pairs) if pairs is not None else list(combinations(cols, 2))
    unknown = sorted({c for p in chosen for c in p} - set(cols))
    if unknown:
        raise ConfigError(f"pairs name unknown score column(s) {unknown}; columns: {list(cols)}")
    if n_resamples:
        _check_settings(n_resamples, confidence, seed, ())
    _, conf = _check_settings(1, confidence, seed, ())
    group_arr = None if groups is None else np.asarray(groups).astype(str)
    unit_index(lab, group_arr)  # a document holding both classes is refused up front
    boots = _shared_bootstrap(lab, cols, chosen, group_arr, n_resamples, seed)
    adjusted_level = 1 - (1 - conf) / max(len(chosen), 1)
    out = [
        _one_pair(lab, cols, a, b, group_arr, boots, conf, adjusted_level, len(chosen))
        for a, b in chosen
    ]
    unit = resamples or ("documents" if groups is not None else "samples")
    return PairedComparisons(
        tuple(out), unit, conf, int(n_resamples), int(seed), clustered=groups is not None
    )


def _pair_mask(cols: Mapping[str, NDArray[np.float64]], a: str, b: str) -> NDArray[np.bool_]:
    return ~(np.isnan(cols[a]) | np.isnan(cols[b]))


def _shared_bootstrap(
    lab: NDArray[np.int64],
    cols: Mapping[str, NDArray[np.float64]],
    chosen: Sequence[tuple[str, str]],
    groups: NDArray[np.str_] | None,
    n_resamples: int,
    seed: int,
) -> dict[tuple[bytes, str], NDArray[np.float64]]:
    """Bootstrap AUCs per (sample mask, column): pairs compared on the same samples share one
    set of resamples, so k columns scored everywhere cost k column bootstraps, not k^2."""
    by_mask: dict[bytes, tuple[NDArray[np.bool_], list[str]]] = {}
    for a, b in chosen:
        mask = _pair_mask(cols, a, b)
        key = mask.tobytes()
        names = by_mask.setdefault(key, (mask, []))[1]
        names += [c for c in (a, b) if c not in names]
    boots: dict[tuple[bytes, str], NDArray[np.float64]] = {}
    if not n_resamples:
        return boots
    for key, (mask, names) in by_mask.items():
        sub = lab[mask]
        if sub.min(initial=1) == sub.max(initial=0) or _units_short(sub, groups, mask):
            continue
        values = paired_bootstrap_aucs(
            sub, np.stack([cols[c][mask] for c in names]),
            groups=None if groups is None else groups[mask], n_resamples=n_resamples, seed=seed,
        )  # fmt: skip
        boots.update({(key, c): values[i] for i, c in enumerate(names)})
    return boots


def _units_short(sub: NDArray[np.int64], groups: NDArray[np.str_] | None, mask: Any) -> bool:
    """Fewer than two member or two non-member units: no spread to estimate."""
    _, unit_member = unit_index(sub, None if groups is None else groups[mask])
    return bool(unit_member.sum() < 2 or (~unit_member).sum() < 2)


def _one_pair(
    lab: NDArray[np.int64],
    cols: Mapping[str, NDArray[np.float64]],
    a: str,
    b: str,
    groups: NDArray[np.str_] | None,
    boots: dict[tuple[bytes, str], NDArray[np.float64]],
    conf: float,
    adjusted_level: float,
    n_pairs: int,
) -> PairedDifference:
    mask = _pair_mask(cols, a, b)
    sub = lab[mask]
    m, n = int(sub.sum()), int(sub.size - sub.sum())
    if m == 0 or n == 0:
        return _undefined(a, b, m, n, "the samples both columns scored lack a class")
    if _units_short(sub, groups, mask):
        return _undefined(a, b, m, n, "fewer than two member or non-member units")
    test = delong_test(sub, cols[a][mask], cols[b][mask],
                       groups=None if groups is None else groups[mask])  # fmt: skip
    key = mask.tobytes()
    boot = None
    if (key, a) in boots:
        diffs = boots[(key, a)] - boots[(key, b)]
        pair = np.stack([cols[a][mask], cols[b][mask]])
        boot = paired_interval(sub, pair, diffs, None if groups is None else groups[mask], conf)
    adjusted = test.interval(adjusted_level)
    p_adj = min(1.0, test.p_value * n_pairs) if not math.isnan(test.p_value) else math.nan
    verdict: Verdict = "none"
    if adjusted.low > 0:
        verdict = "a"
    elif adjusted.high < 0:
        verdict = "b"
    return PairedDifference(
        a, b, test.auc_a, test.auc_b, test.diff, test.interval(conf), adjusted, boot,
        test.p_value, p_adj, m, n, test.n_member_units, test.n_nonmember_units, verdict,
    )  # fmt: skip
