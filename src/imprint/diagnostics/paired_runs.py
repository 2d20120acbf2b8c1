"""Two run folders compared on the samples they share: pairing by sample id, then paired AUC
differences (DeLong's paired test and the paired bootstrap, :mod:`imprint.metrics.paired`).

Two runs of one benchmark (two models, two settings) score most texts twice: their AUCs are
correlated, and treating the runs as independent samples gives intervals of the wrong width.
Samples are paired by ``id``; an id found more than once in a run, or with a different label in
the two runs, is not paired (both counted). With ``meta["doc_id"]`` on every shared sample (a
``--unit document`` run) documents are the resampled, independent units.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from imprint.metrics.paired import (
    delong_test,
    expanded_level,
    paired_bootstrap_aucs,
    unit_index,
)

__all__ = ["AUCDifference", "RunPairing", "pair_runs", "paired_auc_differences"]

DOC_ID = "doc_id"  # the document field a --unit document run writes (imprint.documents.split)


@dataclass(frozen=True)
class RunPairing:
    """Positions of the shared samples in run A (``index_a``) and run B (``index_b``), their
    labels and documents (``groups``, None when not a document run), and what was not paired."""

    index_a: NDArray[np.int64]
    index_b: NDArray[np.int64]
    labels: NDArray[np.int64]
    groups: NDArray[np.str_] | None
    n_a: int
    n_b: int
    n_label_conflicts: int
    n_duplicate_ids: int
    n_duplicate_ids_a: int = 0  # rows with a repeated id, per run (so the counts add up)
    n_duplicate_ids_b: int = 0

    @property
    def n_paired(self) -> int:
        return int(self.index_a.size)

    def to_dict(self) -> dict[str, Any]:
        shared = self.n_paired + self.n_label_conflicts
        return {
            "n_paired": self.n_paired,
            "n_only_in_a": self.n_a - shared - self.n_duplicate_ids_a,
            "n_only_in_b": self.n_b - shared - self.n_duplicate_ids_b,
            "n_label_conflicts": self.n_label_conflicts,
            "n_duplicate_ids": self.n_duplicate_ids,
            "resamples": "documents" if self.groups is not None else "samples",
        }

    def describe(self) -> str:
        d = self.to_dict()
        extra = [
            f"{d[k]} {what}"
            for k, what in (("n_label_conflicts", "with different labels"),
                            ("n_duplicate_ids", "rows with a repeated id"))
            if d[k]
        ]  # fmt: skip
        return (
            f"paired {d['n_paired']} samples by id ({d['n_only_in_a']} only in A, "
            f"{d['n_only_in_b']} only in B{''.join(', ' + e for e in extra)} not paired)"
        )


@dataclass(frozen=True)
class AUCDifference:
    """AUC(B) - AUC(A) of one attack: each run's AUC (``a``, ``b``) and the difference
    (``diff``), each ``{estimate, low, high}`` at the stated confidence.

    ``method`` "paired": on the ``n_paired`` samples both runs scored, resampling
    ``resamples`` (DeLong's interval as ``diff``, ``diff_adjusted`` Bonferroni over the
    ``n_compared`` attacks, ``diff_bootstrap`` the paired bootstrap, ``p_value`` and
    ``p_adjusted``, ``verdict`` "a", "b" or "none"); "independent": the runs resampled
    separately, ``reason`` says why they were not paired (the paired fields are None).
    """

    a: dict[str, float]
    b: dict[str, float]
    diff: dict[str, float | None]
    method: str = "independent"
    reason: str | None = None
    n_paired: int | None = None
    resamples: str | None = None
    diff_bootstrap: dict[str, float] | None = None
    diff_adjusted: dict[str, float | None] | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    n_compared: int | None = None
    correction: str | None = None
    verdict: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``auc`` entry of ``imprint diagnostics compare``'s JSON."""
        if self.method != "paired":
            out: dict[str, Any] = {"a": self.a, "b": self.b, "diff": self.diff}
            out["method"] = self.method
            return out if self.reason is None else {**out, "reason": self.reason}
        keys = (
            "method",
            "n_paired",
            "resamples",
            "a",
            "b",
            "diff",
            "diff_bootstrap",
            "diff_adjusted",
            "p_value",
            "p_adjusted",
            "n_compared",
            "correction",
            "verdict",
        )
        return {k: getattr(self, k) for k in keys}  # fmt: skip


def pair_runs(a: Any, b: Any) -> RunPairing:
    """Pair the samples of two :class:`~imprint.diagnostics.runs.RunScores` by id."""
    count_a, count_b = Counter(a.ids), Counter(b.ids)
    where_b = {i: k for k, i in enumerate(b.ids) if count_b[i] == 1}
    index_a, index_b, conflicts = [], [], 0
    for k, i in enumerate(a.ids):
        if count_a[i] != 1 or i not in where_b:
            continue
        if int(a.labels[k]) != int(b.labels[where_b[i]]):
            conflicts += 1
            continue
        index_a.append(k)
        index_b.append(where_b[i])
    ia, ib = np.asarray(index_a, dtype=np.int64), np.asarray(index_b, dtype=np.int64)
    docs = [a.meta[k].get(DOC_ID) for k in index_a]
    groups = np.asarray(docs).astype(str) if docs and all(d is not None for d in docs) else None
    dup_a = sum(c for c in count_a.values() if c > 1)
    dup_b = sum(c for c in count_b.values() if c > 1)
    return RunPairing(
        ia, ib, a.labels[ia].astype(np.int64), groups, len(a.ids), len(b.ids), conflicts,
        dup_a + dup_b, dup_a, dup_b,
    )  # fmt: skip


def _iv(estimate: float, values: NDArray[np.float64], confidence: float) -> dict[str, Any]:
    alpha = 1 - confidence
    low, high = np.nanquantile(values, [alpha / 2, 1 - alpha / 2])
    return {"estimate": float(estimate), "low": float(low), "high": float(high)}


def _expanded(confidence: float, labels: NDArray[np.int64], groups: Any) -> float:
    """:func:`~imprint.metrics.paired.expanded_level` for the smaller class's unit count."""
    _, unit_member = unit_index(labels, groups)
    return expanded_level(confidence, int(min(unit_member.sum(), (~unit_member).sum())))


def _jf(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def paired_auc_differences(
    a: Any,
    b: Any,
    pairing: RunPairing,
    attacks: Sequence[str],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, AUCDifference]:
    """Per attack, AUC(B) - AUC(A) on the shared samples both runs scored: DeLong's paired
    interval (nominal and Bonferroni over the attacks compared), the paired bootstrap interval,
    each run's AUC with its interval on those samples, and a verdict. An attack that cannot be
    paired (a class with fewer than two units) is left out of the result."""
    out: dict[str, AUCDifference] = {}
    usable = []
    for name in attacks:
        sa, sb = a.scores[name][pairing.index_a], b.scores[name][pairing.index_b]
        ok = ~(np.isnan(sa) | np.isnan(sb))
        groups = None if pairing.groups is None else pairing.groups[ok]
        _, unit_member = unit_index(pairing.labels[ok], groups)
        if unit_member.sum() >= 2 and (~unit_member).sum() >= 2:
            usable.append((name, sa[ok], sb[ok], pairing.labels[ok], groups))
    adjusted = 1 - (1 - confidence) / max(len(usable), 1)
    for name, sa, sb, labels, groups in usable:
        test = delong_test(labels, sb, sa, groups=groups)
        boot = paired_bootstrap_aucs(labels, np.stack([sa, sb]), groups=groups,
                                     n_resamples=n_resamples, seed=seed)  # fmt: skip
        wide = test.interval(adjusted)
        out[name] = AUCDifference(
            a=_iv(test.auc_b, boot[0], confidence),
            b=_iv(test.auc_a, boot[1], confidence),
            diff=test.interval(confidence).to_dict(),
            method="paired",
            n_paired=int(labels.size),
            resamples="documents" if groups is not None else "samples",
            # the paired bootstrap's expanded percentile level, as in a run's comparisons
            diff_bootstrap=_iv(test.diff, boot[1] - boot[0], _expanded(confidence, labels, groups)),
            diff_adjusted=wide.to_dict(),
            p_value=_jf(test.p_value),
            p_adjusted=_jf(min(1.0, test.p_value * len(usable))),
            n_compared=len(usable),
            correction="bonferroni",
            verdict="b" if wide.low > 0 else "a" if wide.high < 0 else "none",
        )
    return out
