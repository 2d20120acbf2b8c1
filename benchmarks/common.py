"""Shared by the benchmarks: WikiMIA texts and the bare model forward they compare against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"


def load_rows(length: int) -> list[dict[str, Any]]:
    """WikiMIA rows (``input``, ``label``) of one length."""
    return [json.loads(line) for line in (WIKIMIA / f"WikiMIA_length{length}.jsonl").open()]


def pad_rows(backend: Any, rows: list[list[int]]) -> tuple[Any, Any]:
    """Token rows right-padded with the backend's pad id, and their attention mask."""
    import torch

    ids = torch.full((len(rows), max(map(len, rows))), backend.pad_id)
    mask = torch.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = torch.tensor(row)
        mask[r, : len(row)] = 1
    return ids, mask


def bare_forward(backend: Any, texts: list[str], token_budget: int) -> None:
    """The bare model on the planner's batches: BOS + text, right-padded, full logits."""
    import torch

    from imprint.signals.plan import batches_by_budget

    with torch.no_grad():
        for idx in batches_by_budget(backend.count_tokens(texts), token_budget):
            rows = [[backend.bos_id, *backend.encode(texts[i])] for i in idx]
            ids, mask = pad_rows(backend, rows)
            backend.model(input_ids=ids, attention_mask=mask).logits.float()
