"""A run page's per-text table: every text with each attack's score and its rank among the run's
texts (1 = the most member-like, i.e. the highest score), read with
:func:`imprint.diagnostics.runs.read_run`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from imprint.diagnostics.runs import read_run

__all__ = ["ranks", "text_table"]


def ranks(scores: NDArray[np.float64]) -> list[int | None]:
    """Rank of each score, 1 for the highest; tied scores share the best rank of their tie
    ("min" ranking); a missing (NaN) score has no rank."""
    from scipy.stats import rankdata

    out: list[int | None] = [None] * scores.size
    finite = np.flatnonzero(~np.isnan(scores))
    if finite.size:
        ranked = rankdata(-scores[finite], method="min")
        for i, r in zip(finite, ranked, strict=True):
            out[int(i)] = int(r)
    return out


def text_table(run_dir: Path) -> dict[str, Any]:
    """``{"attacks": [...], "rows": [[id, label, text, scores, ranks], ...]}`` (JSON-ready;
    a missing score is null)."""
    run = read_run(run_dir)
    attacks = list(run.scores)
    n = run.labels.size
    ids = run.ids or [str(i) for i in range(n)]
    texts = run.texts or [""] * n
    rank_of = {a: ranks(run.scores[a]) for a in attacks}
    rows = [
        [
            ids[i],
            int(run.labels[i]),
            texts[i],
            [_number(run.scores[a][i]) for a in attacks],
            [rank_of[a][i] for a in attacks],
        ]
        for i in range(n)
    ]
    return {"attacks": attacks, "rows": rows, "n": n}


def _number(value: float) -> float | None:
    value = float(value)
    return round(value, 6) if math.isfinite(value) else None
