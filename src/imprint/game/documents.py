"""Document games: membership is per document, and every sequence of a member is trained on.

Each pool document is one text of ``doc_sequences x words`` words, sampled from the base model
(so its sequences share a topic and a style, as a book's chapters do) or read from a pool file
(its first ``doc_sequences x words`` words; shorter texts are left out and counted), cut into
``doc_sequences`` consecutive sequences of ``words`` words. A seeded split makes half the
documents members; each member sequence is one training sequence. ``data.jsonl`` holds one row
per sequence with ``meta.doc`` (the document id) and ``meta.seq`` (its position), so::

    imprint run --model game:DIR --data game:DIR --unit document --doc-field doc

scores the sequences and aggregates them per document. ``heldout.jsonl`` holds whole held-out
documents the same way: never trained, a second unseen set for dataset inference's
false-positive check.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from imprint.data import MEMBER, NON_MEMBER, LoadedData, Sample
from imprint.game.config import BuildPlan, GameConfig
from imprint.game.records import HELDOUT_ROLE, MEMBER_ROLE, POOL_TOP_K, _bar, _roles
from imprint.game.texts import NATURAL_PROMPTS, generate_texts, load_pool

__all__ = [
    "DOC_FIELD",
    "document_records",
    "load_document_pool",
    "split_sequences",
]

#: The meta field holding a sequence's document id (``--doc-field doc``).
DOC_FIELD = "doc"


def load_document_pool(config: GameConfig) -> tuple[list[Sample], LoadedData | None, dict]:
    """A pool file's documents: each cut to its first ``doc_sequences x words`` words; texts
    with fewer words are left out and counted in ``dropped`` (never silently)."""
    assert config.words is not None
    need = config.words * config.doc_sequences
    texts, loaded, dropped = load_pool(config.pool, words=need)
    kept = [s for s in texts if len(s.text.split()) == need]
    if len(kept) < len(texts):
        reason = f"fewer than {config.doc_sequences} x {config.words} words"
        dropped = {**dropped, reason: len(texts) - len(kept)}
    return kept, loaded, dropped


def split_sequences(text: str, words: int, k: int) -> list[str]:
    """``k`` consecutive sequences of ``words`` words of a generated text (single spaces)."""
    parts = text.split()
    if len(parts) != words * k:
        raise ValueError(f"expected {words * k} words, got {len(parts)}")
    return [" ".join(parts[j * words : (j + 1) * words]) for j in range(k)]


def _rows(doc: str, text: str, role: str, config: GameConfig) -> list[dict[str, Any]]:
    assert config.words is not None
    rows = []
    for j, seq in enumerate(split_sequences(text, config.words, config.doc_sequences)):
        meta: dict[str, Any] = {"kind": "heldout" if role == HELDOUT_ROLE else "document"}
        meta.update({DOC_FIELD: doc, "seq": j})
        if role != HELDOUT_ROLE:
            member = role == MEMBER_ROLE
            meta.update(
                repetitions=1 if member else 0,
                group="document",
                split="member" if member else "nonmember",
            )
        label = MEMBER if role == MEMBER_ROLE else NON_MEMBER
        rows.append({"id": f"{doc}-s{j:03d}", "text": seq, "label": label, "meta": meta})
    return rows


def document_records(
    plan: BuildPlan, model: Any, tokenizer: Any, *, console: Any, progress: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(candidate sequences of member and non-member documents, held-out documents' sequences)."""
    config = plan.config
    assert config.words is not None
    n_total = config.pool_size + config.heldout
    rng = np.random.default_rng([config.seed, 1])
    if plan.pool is not None:  # documents from a file, chosen at random
        chosen = sorted(rng.choice(len(plan.pool), size=n_total, replace=False))
        texts = [plan.pool[i].text for i in chosen]
    else:
        with _bar(console, progress, "generating documents", n_total) as advance:
            texts = generate_texts(
                model,
                tokenizer,
                n_total,
                words=config.words * config.doc_sequences,
                prompts=NATURAL_PROMPTS,
                seed=config.seed,
                temperature=config.pool_temperature,
                top_k=POOL_TOP_K,
                advance=advance,
            )
    roles = _roles(rng, n_total, config)
    order = rng.permutation(n_total)  # ids reveal neither prompt nor label
    records: list[dict[str, Any]] = []
    heldout: list[dict[str, Any]] = []
    for k, i in enumerate(order):
        rows = _rows(f"doc-{k:04d}", texts[i], roles[i], config)
        (heldout if roles[i] == HELDOUT_ROLE else records).extend(rows)
    return records, heldout
