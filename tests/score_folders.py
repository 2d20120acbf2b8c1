"""A run folder holding only ``scores.parquet``, written by hand, for the tests of what reads run
folders (compare, perturbation tables)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def write_scores(
    path: Path,
    labels: Sequence[int],
    columns: dict[str, Sequence[float]],
    *,
    text: str = "text {}",
    metas: Sequence[dict[str, object]] | None = None,
) -> Path:
    """``path/scores.parquet``: ids ``s0``, ``s1``, ..., ``labels``, ``text`` formatted with each
    row's number, each row's meta as JSON (``{}`` where ``metas`` is None) and one float column
    per entry of ``columns``."""
    path.mkdir(parents=True, exist_ok=True)
    n = len(labels)
    table = {
        "id": [f"s{i}" for i in range(n)],
        "label": list(labels),
        "text": [text.format(i) for i in range(n)],
        "meta": [json.dumps(m) for m in metas] if metas is not None else ["{}"] * n,
        **{k: np.asarray(v, dtype=float) for k, v in columns.items()},
    }
    pq.write_table(pa.table(table), path / "scores.parquet")
    return path
