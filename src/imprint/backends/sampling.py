"""Batched, per-prompt seeded sampling from a local causal LM (one decode loop for many prompts).

Every prompt is a *group* of ``n`` rows (its ``n`` samples) with its own ``torch.Generator``
seeded by the prompt's seed, so a prompt's draws depend on its seed alone, never on the prompts
that share its batch. Each step draws a group's next tokens exactly as ``transformers``'
``generate`` does for one prompt with ``num_return_sequences=n`` (fp32 logits, temperature, top-k,
top-p, softmax, one ``torch.multinomial`` over the group's ``n`` rows with the group's generator),
so a batch of one prompt reproduces ``generate``'s draws, and a batch of many prompts gives the
same draws up to float noise from padding (left padding with an attention mask; positions
counted per row; one KV cache; in fp32 the benchmark's draws were all equal, in bf16 about one
in six differed: see benchmarks/bench_sampling.py). Groups that are done (every row at its end
token, a stop string or ``max_tokens``) leave the batch and its KV cache, so they stop costing
compute.

A row that has finished inside a still-running group keeps its place in the group's draw (the
generator consumes the same numbers whatever a row's state: ``generate`` keeps sampling finished
rows too) but its token is discarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from imprint.backends.seeds import prompt_seed
from imprint.errors import ConfigError

__all__ = ["Group", "prompt_seed", "sample_groups"]


@dataclass(eq=False)
class Group:
    """One prompt's ``n`` samples and their settings (``temperature == 0``: greedy)."""

    ids: list[int]  # the prompt's token ids (start token included)
    n: int
    max_tokens: int
    seed: int | None
    temperature: float = 1.0
    top_k: int = 0  # 0 = no top-k filter
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    out: list[list[int]] = field(default_factory=list)  # new token ids per sample (filled)
    done: list[bool] = field(default_factory=list)
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        if not self.ids:
            raise ConfigError("a sampling prompt needs at least one token (the start token)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def finished(self) -> bool:
        return all(self.done)


def warp(scores: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """fp32 next-token scores (rows, V) after temperature, top-k and top-p, in ``generate``'s
    order and arithmetic (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)."""
    if temperature != 1.0:
        scores = scores / temperature
    if top_k and top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k)[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False  # keep at least one token
        scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
    return scores


def _draw(groups: list[Group], logits: torch.Tensor) -> list[int]:
    """Every live row's next token from the fp32 logits (rows, V): each group draws from its own
    generator; rows of equal settings are warped in one call (row-wise ops: the same numbers as
    one group at a time)."""
    settings = {(g.temperature, g.top_k, g.top_p) for g in groups}
    head = groups[0]
    shared = None
    if len(settings) == 1 and head.temperature > 0:
        shared = warp(logits, head.temperature, head.top_k, head.top_p).softmax(dim=-1)
    tokens: list[int] = []
    at = 0
    for g in groups:
        rows = slice(at, at + g.n)
        at += g.n
        if g.temperature == 0:
            tokens.extend(torch.argmax(logits[rows], dim=-1).tolist())
            continue
        probs = shared[rows] if shared is not None else None
        if probs is None:
            probs = warp(logits[rows], g.temperature, g.top_k, g.top_p).softmax(dim=-1)
        tokens.extend(torch.multinomial(probs, 1, generator=g.generator).squeeze(1).tolist())
    return tokens


def _hit_stop(text: str, stop: Sequence[str]) -> bool:
    """True once the earliest stop string is settled: no longer stop string can still begin
    before it (the text is cut there afterwards; one character of margin for a byte token that
    completes a character)."""
    found = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    longest = max(len(s) for s in stop)
    return bool(found) and len(text) >= min(found) + longest + 1


class _Batch:
    """The live rows of one decode loop: prompt ids left-padded, mask, positions, KV cache."""

    def __init__(self, local: Any, groups: list[Group]) -> None:
        self.local, self.groups = local, groups
        rows = [g.ids for g in groups for _ in range(g.n)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), local.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(rows):  # left padding: every row continues at the right edge
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        self.ids, self.mask = ids.to(local.device), mask.to(local.device)
        self.cache: Any = None

    def forward(self, step_ids: torch.Tensor) -> torch.Tensor:
        """fp32 logits (rows, V) at the last position after feeding ``step_ids``."""
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.local.model.config)
        else:
            ones = torch.ones_like(self.mask[:, :1])
            self.mask = torch.cat([self.mask, ones], dim=1)
        positions = self.mask.cumsum(-1) - 1  # counted per row, as generate does
        positions = positions.masked_fill(self.mask == 0, 1)[:, -step_ids.shape[1] :]
        out = self.local.model(
            input_ids=step_ids,
            attention_mask=self.mask,
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].to(dtype=torch.float32)

    def keep(self, live: list[Group]) -> list[int]:
        """Drop the rows of groups that are done (and their KV cache rows); the kept rows."""
        rows: list[int] = []
        at = 0
        for g in self.groups:
            if g in live:
                rows.extend(range(at, at + g.n))
            at += g.n
        picked = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        self.mask = self.mask.index_select(0, picked)
        self.cache.batch_select_indices(picked)
        self.groups = live
        return rows


def sample_groups(local: Any, groups: list[Group], decode: Any = None) -> None:
    """Fill ``group.out`` (new token ids per sample, the end token included) for every group.

    ``local``: a loaded local model (``model``, ``device``, ``pad_id``); ``decode(ids) -> str``
    is needed when a group has stop strings."""
    eos = _eos_ids(local)
    for g in groups:
        g.out, g.done = [[] for _ in range(g.n)], [False] * g.n
        g.generator = None
        if g.seed is not None and g.temperature > 0:
            g.generator = torch.Generator(device=local.device).manual_seed(g.seed)
    batch = _Batch(local, groups)
    step_ids = batch.ids
    while batch.groups:
        drawn = iter(_draw(batch.groups, batch.forward(step_ids)))
        column = []
        for g in batch.groups:
            for j in range(g.n):
                token = next(drawn)
                if g.done[j]:  # a finished row is fed padding, as generate does
                    token = local.pad_id
                else:
                    _extend(g, j, token, eos, decode)
                column.append(token)
        live = [g for g in batch.groups if not g.finished]
        step_ids = torch.tensor(column, device=batch.mask.device)[:, None]
        if not live:
            break
        if len(live) < len(batch.groups):
            step_ids = step_ids[batch.keep(live)]


def _extend(g: Group, j: int, token: int, eos: set[int], decode: Any) -> None:
    """Append a drawn token to sample ``j`` of ``g`` and mark it done at its end."""
    g.out[j].append(token)
    ended = token in eos or len(g.out[j]) >= g.max_tokens
    g.done[j] = ended or bool(g.stop and decode and _hit_stop(decode(g.out[j]), g.stop))


def _eos_ids(local: Any) -> set[int]:
    """The end tokens ``generate`` stops at: the generation config's, else the tokenizer's."""
    config = getattr(local.model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        eos = local.tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}
