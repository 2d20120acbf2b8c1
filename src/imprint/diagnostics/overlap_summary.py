"""n-gram overlap of a labelled candidate set, summarised per n and written per sample.

:func:`overlap_report` scores every candidate against an opened index for each n the index
holds and summarises members and non-members apart (a benchmark whose non-members overlap the
corpus less than its members is suspect before any attack runs). :func:`write_overlap_rows`
writes one JSON line per candidate; an overlap that is undefined (fewer than n words) is null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from imprint.data import Sample
from imprint.diagnostics.overlap import NgramIndex, OverlapScores, overlap_scores

__all__ = ["OverlapReport", "overlap_report", "write_overlap_rows"]

_GROUPS = ((1, "members"), (0, "nonmembers"))


@dataclass(frozen=True)
class OverlapReport:
    """Per-sample overlaps (``results[n].values``, shape (n_samples,), NaN where undefined),
    the labels (shape (n_samples,)) and ``summary``: per n the mean overlap of members and
    non-members (None when a group has no defined value), the undefined count and the
    filter's estimated false-positive rate."""

    samples: list[Sample]
    labels: NDArray[np.int64]
    results: dict[int, OverlapScores]
    summary: dict[str, Any]


def _group_means(values: NDArray[np.float64], labels: NDArray[np.int64]) -> dict[str, Any]:
    means: dict[str, float | None] = {}
    for label, name in _GROUPS:
        kept = values[(labels == label) & ~np.isnan(values)]
        means[name] = float(kept.mean()) if kept.size else None
    return means


def overlap_report(
    index: NgramIndex, samples: Sequence[Sample], *, data: str = ""
) -> OverlapReport:
    """Score ``samples`` against every n of ``index`` (the ones it was opened with)."""
    texts = [s.text for s in samples]
    labels = np.array([s.label for s in samples], dtype=np.int64)
    results = {k: overlap_scores(index, texts, k) for k in sorted(index.filters)}
    per_n = {
        str(k): {
            "mean": _group_means(res.values, labels),
            "undefined": res.n_undefined,
            "fp_rate": index.manifest["filters"][str(k)]["fp_rate_estimated"],
        }
        for k, res in results.items()
    }
    summary = {"index": str(index.path), "data": data, "n": per_n}
    return OverlapReport(list(samples), labels, results, summary)


def write_overlap_rows(path: Path, report: OverlapReport) -> Path:
    """One JSON line per sample: id, label, ``overlap_<n>`` (null if undefined), ``ngrams_<n>``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i, s in enumerate(report.samples):
            row: dict[str, Any] = {"id": s.id, "label": s.label}
            for k, res in report.results.items():
                v = float(res.values[i])
                row[f"overlap_{k}"] = None if math.isnan(v) else v
                row[f"ngrams_{k}"] = int(res.n_ngrams[i])
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
