"""Which attack of a grid table's column is better than the others, by a paired test.

A column's attack rows score the same benchmark with one model, often in different runs (a
sweep's variants are separate runs). Their per-sample scores are read back from each cell's run
folder (``provenance["run"]``, under the grid's ``out``), joined on sample id, and every pair of
rows is compared on the samples all of them scored (:func:`~imprint.metrics.pairwise.
compare_scores`: DeLong's paired test, Bonferroni over the column's pairs). A row is marked best
only when it is better than every other attack row of its column by that test; the largest
point estimate alone is never marked. A column whose scores cannot be read is not marked, and
its note says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.diagnostics.blind_verdict import TextComparison
from imprint.errors import DataError
from imprint.metrics.pairwise import PairedComparisons, compare_scores

__all__ = ["RunCache", "column_comparisons", "text_comparisons", "winners"]

DOC_ID = "doc_id"


class RunCache:
    """Run folders read once each (a run holds several cells' columns)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self._read: dict[Path, Any] = {}

    def get(self, run: str | None) -> Any:
        from imprint.diagnostics.runs import read_run

        if not run:
            return None
        path = Path(run) if Path(run).is_absolute() else self.out / run
        if path not in self._read:
            try:
                self._read[path] = read_run(path)
            except (DataError, OSError):
                self._read[path] = None
        return self._read[path]


def _aligned(
    rows: Sequence[tuple[str, Any, str]], runs: RunCache
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray | None] | str:
    """Labels, row -> scores and documents on the sample ids every row's run holds once and with
    one label; or why the rows cannot be compared."""
    loaded = []
    for label, record, column in rows:
        run = runs.get(record.provenance.get("run"))
        if run is None or column not in run.scores or not run.ids:
            return f"no per-sample scores for {label!r} (its run folder is missing or unreadable)"
        loaded.append((label, run, column))
    first = loaded[0][1]
    counts = [Counter(run.ids) for _, run, _ in loaded]
    shared = [i for i in first.ids if all(c[i] == 1 for c in counts)]
    positions = [{i: k for k, i in enumerate(run.ids)} for _, run, _ in loaded]
    labels = np.array([first.labels[positions[0][i]] for i in shared], dtype=np.int64)
    same = np.ones(len(shared), dtype=bool)
    for (_, run, _), where in zip(loaded[1:], positions[1:], strict=True):
        same &= np.array([run.labels[where[i]] for i in shared]) == labels
    keep = [i for i, ok in zip(shared, same, strict=True) if ok]
    if not keep:
        return "the rows' runs share no sample ids"
    columns = {
        label: np.array([run.scores[column][where[i]] for i in keep])
        for (label, run, column), where in zip(loaded, positions, strict=True)
    }
    docs = [first.meta[positions[0][i]].get(DOC_ID) for i in keep]
    groups = np.array(docs).astype(str) if all(d is not None for d in docs) else None
    return labels[same], columns, groups


def column_comparisons(
    rows: Sequence[tuple[str, Any, str]], out: Path, *, runs: RunCache | None = None
) -> PairedComparisons | str:
    """Every pair of a column's attack rows (``(row label, cell record, score column)``)
    compared on their shared samples; or the reason they could not be."""
    if len(rows) < 2:
        return "one attack row"
    aligned = _aligned(rows, runs or RunCache(out))
    if isinstance(aligned, str):
        return aligned
    labels, columns, groups = aligned
    if labels.min() == labels.max():
        return "the shared samples lack members or non-members"
    return compare_scores(labels, columns, groups=groups, n_resamples=0)


def text_comparisons(
    rows: Sequence[tuple[str, Any, str]], blind: Any, runs: RunCache
) -> dict[str, TextComparison] | str:
    """Each attack row (``(row label, cell record, score column)``) compared with the blind
    cell's stored out-of-fold scores on the samples both scored, by the one rule
    (:func:`~imprint.diagnostics.blind_verdict.attack_beats_text`; Bonferroni over the rows);
    or why they could not be compared."""
    from imprint.diagnostics.blind_verdict import attack_beats_text
    from imprint.study.cells import BLIND_SCORES

    stored = None if blind is None else blind.provenance.get(BLIND_SCORES)
    if not stored:
        return (
            "the blind cell holds no out-of-fold scores (stored by an older imprint: recompute it)"
        )
    oof = {
        str(i): (np.nan if v is None else float(v))
        for i, v in zip(stored["ids"], stored["scores"], strict=True)
    }
    # a cell stored by an older imprint holds no folds: DeLong alone, and the text says so
    ids, stored_folds = [str(i) for i in stored["ids"]], stored.get("folds")
    fold_of = None if stored_folds is None else dict(zip(ids, stored_folds, strict=True))
    out = {}
    for label, record, column in rows:
        run = runs.get(record.provenance.get("run"))
        if run is None or column not in run.scores or not run.ids:
            return f"no per-sample scores for {label!r} (its run folder is missing or unreadable)"
        keep = [k for k, i in enumerate(run.ids) if i in oof]
        if not keep:
            return f"{label!r} and the blind baseline share no sample ids"
        docs = [run.meta[k].get(DOC_ID) for k in keep]
        groups = np.array(docs).astype(str) if all(d is not None for d in docs) else None
        out[label] = attack_beats_text(
            run.labels[keep], run.scores[column][keep], [oof[run.ids[k]] for k in keep],
            attack=label, blind=str(stored["classifier"]), groups=groups, n_compared=len(rows),
            folds=None if fold_of is None else [fold_of[run.ids[k]] for k in keep],
        )  # fmt: skip
    return out


def winners(comparisons: PairedComparisons, rows: Sequence[str]) -> list[str]:
    """The rows better than every other row by the paired test (at most one)."""
    out = []
    for row in rows:
        others = [comparisons.between(row, r) for r in rows if r != row]
        if others and all(p is not None and p.verdict == "a" for p in others):
            out.append(row)
    return out
