"""The most exposed texts: per best attack, the texts it scores most member-like, with labels.

A report view of the run's own scores (no statistic is computed): for each of the
``n_attacks`` columns with the highest AUC, its ``k`` highest-scoring texts (higher score =
more likely member), each with its true label, so a reader sees what leaks and which
non-members the attack mistakes for members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from imprint.data import Sample
from imprint.evaluation.results import RunMetrics
from imprint.report.cells import by_auc

__all__ = ["ExposedTexts", "exposed_blocks", "exposed_texts"]

SNIPPET = 160


@dataclass(frozen=True)
class ExposedTexts:
    """One attack's top texts: ``rows`` of (rank, score, label, id, text snippet)."""

    attack: str
    auc: str
    rows: tuple[tuple[str, str, str, str, str], ...]


def _snippet(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= SNIPPET else one[: SNIPPET - 1] + "…"


def exposed_texts(
    samples: Sequence[Sample],
    scores: dict[str, np.ndarray],
    metrics: RunMetrics,
    *,
    n_attacks: int = 3,
    k: int = 10,
) -> list[ExposedTexts]:
    """The top ``k`` texts of each of the ``n_attacks`` best columns by AUC (NaN scores, which
    the evaluation left out, are left out here too)."""
    from imprint.report.cells import fmt

    named = {c: m.auc for c, m in metrics.attacks.items() if c in scores}
    out = []
    for column in by_auc(named)[:n_attacks]:
        values = np.asarray(scores[column], dtype=float)
        finite = np.flatnonzero(~np.isnan(values))
        top = finite[np.argsort(-values[finite], kind="stable")][:k]
        rows = tuple(
            (
                str(rank),
                f"{values[i]:.4g}",
                "member" if samples[i].label == 1 else "non-member",
                str(samples[i].id),
                _snippet(samples[i].text),
            )
            for rank, i in enumerate(top, start=1)
        )
        out.append(ExposedTexts(column, fmt(metrics.attacks[column].auc), rows))
    return out


HEADER = ["rank", "score", "true label", "id", "text"]


def exposed_blocks(found: Sequence[ExposedTexts]) -> list[tuple[str, object]]:
    """The report's "Most exposed texts" section (render.Block items)."""
    if not found:
        return []
    blocks: list[tuple[str, object]] = [
        ("h2", "Most exposed texts"),
        (
            "p",
            "Per attack with the highest AUC, the texts it scores most member-like (higher score "
            "= more likely member), with their true labels: members here are what the model "
            "exposes, non-members are the attack's false positives.",
        ),
    ]
    for item in found:
        blocks.append(("h3", f"{item.attack} (AUC {item.auc})"))
        blocks.append(("table", (HEADER, [list(r) for r in item.rows], "exposed-" + item.attack)))
    return blocks
