"""Paired comparisons of a run's attacks: is attack A better than attack B on these samples?

Every pair of score columns is compared on the samples both scored
(:func:`imprint.metrics.pairwise.compare_scores`: DeLong's paired test, cluster-robust over
documents in a ``--unit document`` run, the paired bootstrap, Bonferroni over all pairs). The
metrics.json keeps every pair under ``comparisons`` (read back by :func:`comparisons_from_dict`);
:mod:`imprint.report.comparisons` renders them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.data import Sample
from imprint.evaluation import jsonread as js
from imprint.metrics import Interval
from imprint.metrics.pairwise import PairedComparisons, PairedDifference, compare_scores

__all__ = ["comparisons_from_dict", "run_comparisons"]


def run_comparisons(
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    *,
    n_bootstrap: int,
    seed: int,
    groups: np.ndarray | None = None,
) -> PairedComparisons | None:
    """All pairs of ``scores``' columns on ``samples`` (None with fewer than two columns);
    ``groups`` each sample's document, resampled whole."""
    if len(scores) < 2:
        return None
    labels = np.array([s.label for s in samples])
    unit = "texts" if groups is None else "documents"  # the Attacks table's words for its units
    return compare_scores(labels, scores, groups=groups, n_resamples=n_bootstrap, seed=seed,
                          resamples=unit)  # fmt: skip


def _interval(data: Any, where: str) -> Interval | None:
    return None if data is None else js.interval(data, where)


def _pair(data: Any, where: str) -> PairedDifference:
    d = js.obj(data, where)

    def count(key: str) -> int:
        return js.integer(js.get(d, key, where), f"{where}.{key}")

    def number(key: str) -> float:
        return js.num(js.get(d, key, where), f"{where}.{key}")

    verdict = js.get(d, "verdict", where)
    if verdict not in ("a", "b", "none"):
        raise js.bad(f"{where}.verdict", "'a', 'b' or 'none'", verdict)
    diff = js.interval(js.get(d, "diff", where), f"{where}.diff")
    return PairedDifference(
        a=js.text(js.get(d, "a", where), f"{where}.a"),
        b=js.text(js.get(d, "b", where), f"{where}.b"),
        diff=diff.estimate,
        interval=diff,
        adjusted=js.interval(js.get(d, "diff_adjusted", where), f"{where}.diff_adjusted"),
        bootstrap=_interval(d.get("diff_bootstrap"), f"{where}.diff_bootstrap"),
        verdict=verdict,
        error=js.text(d.get("error"), f"{where}.error", optional=True),
        auc_a=number("auc_a"),
        auc_b=number("auc_b"),
        p_value=number("p_value"),
        p_adjusted=number("p_adjusted"),
        n_members=count("n_members"),
        n_nonmembers=count("n_nonmembers"),
        n_member_units=count("n_member_units"),
        n_nonmember_units=count("n_nonmember_units"),
    )


def comparisons_from_dict(data: Any, where: str) -> PairedComparisons:
    """Read :meth:`PairedComparisons.to_dict` back (a run folder's ``comparisons``)."""
    d = js.obj(data, where)
    pairs = js.get(d, "pairs", where)
    if not isinstance(pairs, list):
        raise js.bad(f"{where}.pairs", "a list", pairs)
    return PairedComparisons(
        pairs=tuple(_pair(p, f"{where}.pairs[{i}]") for i, p in enumerate(pairs)),
        resamples=js.text(js.get(d, "resamples", where), f"{where}.resamples"),
        confidence=js.num(js.get(d, "confidence", where), f"{where}.confidence"),
        n_resamples=js.integer(js.get(d, "n_resamples", where), f"{where}.n_resamples"),
        seed=js.integer(js.get(d, "seed", where), f"{where}.seed"),
        correction=js.text(d.get("correction", "bonferroni"), f"{where}.correction"),
        clustered=bool(d.get("clustered", False)),
        bootstrap=js.text(d.get("bootstrap", "paired_percentile"), f"{where}.bootstrap"),
    )
