"""SimMIA's next-word tree for many texts at once: the batched form of :mod:`.next_word`.

:class:`imprint.requests.next_word.LocalNextWordSampler` walks one text at a time. This module
gives the same law and the same draws for a batch of texts that share a context (BOS, or BOS +
P, whose KV cache is computed once):

1. One batched forward over every text's tokens after the shared context (right-padded rows;
   causal attention keeps the padding out of the real rows) gives the next-token law at every
   word boundary of every text.
2. A sampled token that continues the text's own tokens reads its next-token law from that same
   pass instead of becoming a tree node: the text's own words, single- or multi-token, cost
   nothing beyond the pass.
3. The other partial words (tree nodes) of all texts and positions go through the model
   together, row b of the batch extending text b's cache; a node attends (4-D mask) to the
   context and text tokens before its word position and to its own ancestors; padded slots of
   short rows are masked out.
4. Top-k laws of all rows of a forward are computed at once; the word check of a token list
   (decode + :func:`imprint.data.words.first_word`) is memoised for the batch.

Each text keeps its own generator and splits its items in the per-text sampler's order, so the
counts equal :class:`LocalNextWordSampler`'s up to float noise in the probabilities (batched
matrix products round differently; a multinomial draw changes only if a probability moves
across one of its uniform draws).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from imprint.data.words import split_words
from imprint.requests.next_word import (
    LocalNextWordSampler,
    NextWordConfig,
    WordDist,
    _common,
    _Item,
    _Node,
    _with_torch,
)

Top = tuple[np.ndarray, np.ndarray]  # top-k token ids and their renormalised probabilities
TREE_TOKENS = 1024  # node tokens per batched tree forward (rows x width)
TREE_WORDS = 512  # word positions of one batched tree (bounds its KV cache; e.g. 16 x 32 words)


@dataclass
class _Job:
    """One text in the batch: its row, tokens, tree and open items."""

    row: int
    full: list[int]
    rng: np.random.Generator
    dists: list[WordDist]
    items: list[_Item] = field(default_factory=list)
    nodes: list[_Node] = field(default_factory=list)
    rows: dict[int, Top] = field(default_factory=dict)  # a -> law after a text tokens
    top: dict[int, Top] = field(default_factory=dict)  # node id -> law after the node
    want: set[int] = field(default_factory=set)  # rows still to read from the pass
    done: int = 0  # nodes before this one all have cache slots


@dataclass
class TreeCounters:
    """What went through the model (for benchmarks): context tokens (BOS [+ P], once per
    sampler), text tokens of the passes, tree nodes, forwards, and sampled tokens that
    continued a text and so needed no node."""

    context_tokens: int = 0
    pass_tokens: int = 0
    nodes: int = 0
    forwards: int = 0
    on_text: int = 0


class BatchedNextWordSampler(LocalNextWordSampler):
    """Next-word distributions for many texts per call; see the module docstring.

    ``backend`` is an :class:`imprint.backends.hf.HFLogprobBackend`; ``config.node_batch`` is
    the token budget of one tree forward (rows x width, padding included)."""

    round_local = True  # False: the cache grows forward by forward (as for sliding windows)

    def __init__(self, backend: Any, config: NextWordConfig) -> None:
        super().__init__(backend, config)
        self.counters = TreeCounters()
        self._words: dict[tuple[tuple[int, ...], bool], tuple[str, bool]] = {}

    @_with_torch
    def batch(
        self, texts: Sequence[str], *, prefix: str | None, rngs: Sequence[np.random.Generator]
    ) -> list[list[WordDist]]:
        """Per text, what :meth:`distributions` gives for it with the same generator."""
        out: list[list[WordDist]] = [[] for _ in texts]
        context = prefix or ""
        jobs: list[_Job] = []
        prompts: list[list[list[int]]] = []
        for t, text in enumerate(texts):
            words = split_words(text)
            if len(words) < 2:
                continue
            full = [self.hf.bos_id, *self.hf.encode(context + text)]
            ids = [[self.hf.bos_id, *self.hf.encode(context + text[: w.end])] for w in words[:-1]]
            jobs.append(_Job(len(jobs), full, rngs[t], [{} for _ in ids]))
            prompts.append(ids)
            out[t] = jobs[-1].dists
        if not jobs:
            return out
        cache, start = self._pass(jobs, prompts, prefix)
        for job, ids in zip(jobs, prompts, strict=True):
            job.items = [self._root_item(job, p, i + 1) for i, p in enumerate(ids)]
        self._read_rows(jobs, start)
        self._forward_nodes(jobs, cache)
        while any(job.items for job in jobs):
            for job in jobs:
                job.items = self._grow_job(job)
            self._read_rows(jobs, start)
            self._forward_nodes(jobs, cache)
        return out

    # -- the pass over the texts -----------------------------------------------------------------
    def _pass(self, jobs: list[_Job], prompts: list[list[list[int]]], prefix: str | None) -> Any:
        """Forward every text after the part of the context cache all of them share.

        Each row restarts one token before its shortest agreement with the context or any of
        its prompts (as the per-text sampler does), at the earliest such point of the batch;
        cache column j of row b then holds token j of text b."""
        import torch

        if prefix not in self._ctx:
            self.counters.context_tokens += 1 + (len(self.hf.encode(prefix)) if prefix else 0)
        ids, ctx_cache = self._context(prefix)
        starts = [
            max(min(_common(ids, job.full), *(_common(p, job.full) for p in ps)) - 1, 0)
            for job, ps in zip(jobs, prompts, strict=True)
        ]
        start = min(starts)
        width = max(len(job.full) for job in jobs) - start
        tokens = torch.full((len(jobs), width), int(self.hf.pad_id), dtype=torch.long)
        for job in jobs:
            tail = job.full[start:]
            tokens[job.row, : len(tail)] = torch.tensor(tail)
        cache = copy.deepcopy(ctx_cache)
        cache.crop(start - cache.get_seq_length())  # keep the first ``start`` entries
        for layer in cache.layers:  # one row per text (batch_repeat_interleave skips empties)
            layer.keys = layer.keys.repeat(len(jobs), 1, 1, 1)
            layer.values = layer.values.repeat(len(jobs), 1, 1, 1)
        pos = torch.arange(start, start + width).unsqueeze(0).expand(len(jobs), -1)
        self._hidden = self._base(tokens, None, pos, cache).last_hidden_state
        self.counters.pass_tokens += sum(len(job.full) - start for job in jobs)
        self.forwarded_tokens += sum(len(job.full) - start for job in jobs)
        return cache, start

    def _root_item(self, job: _Job, ids: list[int], word: int) -> _Item:
        """The item of word position ``word``: samples after the prompt tokens ``ids``; prompt
        tokens that differ from the text's become a chain of nodes."""
        m = _common(ids, job.full)
        ancestors: tuple[int, ...] = ()
        for j, token in enumerate(ids[m:]):
            job.nodes.append(_Node(token, m + j, m, ancestors))
            ancestors = (*ancestors, len(job.nodes) - 1)
        if not ancestors:
            job.want.add(m)
        source = ancestors[-1] if ancestors else -1 - m
        mass = float(self.cfg.n) if self.cfg.mode == "sample" else 1.0
        return _Item(word, mass, [], source, m, ancestors, len(ids))

    def _read_rows(self, jobs: list[_Job], start: int) -> None:
        """Top-k laws of the pass rows the items need (row after ``a`` tokens of a text)."""
        import torch

        wanted = [(job, a) for job in jobs for a in sorted(job.want)]
        if not wanted:
            return
        rows = torch.tensor([job.row for job, _ in wanted])
        cols = torch.tensor([a - 1 - start for _, a in wanted])
        for (job, a), top in zip(wanted, self._top(self._hidden[rows, cols]), strict=True):
            job.rows[a] = top
        for job in jobs:
            job.want.clear()

    # -- sampling --------------------------------------------------------------------------------
    def _grow_job(self, job: _Job) -> list[_Item]:
        """Split every open item of ``job`` over its next tokens (the per-text sampler's order);
        finished words go to the job's distributions."""
        grown: list[_Item] = []
        for item in job.items:
            on_text = -1 - item.source if item.source < 0 else -1
            top_ids, probs = job.rows[on_text] if on_text >= 0 else job.top[item.source]
            for token, mass, greedy in self._split(item, top_ids, probs, job.rng):
                word, final = self._word_memo(item.gen, token)
                if final:
                    dist = job.dists[item.word - 1]
                    dist[word] = dist.get(word, 0.0) + mass
                    continue
                gen = [*item.gen, token]
                if 0 <= on_text < len(job.full) and job.full[on_text] == token:
                    # the text's own next token: its law is a row of the pass (no node)
                    job.want.add(on_text + 1)
                    self.counters.on_text += 1
                    grown.append(
                        _Item(
                            item.word,
                            mass,
                            gen,
                            -2 - on_text,
                            on_text + 1,
                            (),
                            item.pos + 1,
                            greedy,
                        )
                    )
                    continue
                job.nodes.append(_Node(token, item.pos, item.visible, item.ancestors))
                node_id = len(job.nodes) - 1
                grown.append(
                    _Item(
                        item.word,
                        mass,
                        gen,
                        node_id,
                        item.visible,
                        (*item.ancestors, node_id),
                        item.pos + 1,
                        greedy,
                    )
                )
        return grown

    def _word_memo(self, gen: list[int], token: int) -> tuple[str, bool]:
        """:meth:`_word`, memoised on the generated tokens (many items share them)."""
        key = (tuple(gen), True) if token == self.eos else ((*gen, token), False)
        if key not in self._words:
            self._words[key] = self._word(gen, token)
        return self._words[key]

    # -- tree forwards ---------------------------------------------------------------------------
    def _forward_nodes(self, jobs: list[_Job], cache: Any) -> None:
        """Forward every node without a cache slot, all rows together, within the token budget
        ``node_batch`` per forward (nodes are forwarded in the order they were made, parents
        first).

        Nodes of one round attend only to earlier rounds (a chain of prompt tokens is a few
        rounds of one node), so every forward of a round runs against the cache as it was at
        the round's start and their K/V join it at the end: later forwards of a round do not
        attend over (masked) columns of earlier ones. Caches of other layer kinds (sliding
        windows) grow forward by forward instead."""
        import torch

        step = max(1, self.cfg.node_batch // len(jobs))
        local = self.round_local and all(
            type(layer).__name__ == "DynamicLayer" for layer in cache.layers
        )
        while True:
            for job in jobs:
                while job.done < len(job.nodes) and job.nodes[job.done].slot >= 0:
                    job.done += 1
            pending = [[i for i in range(job.done, len(job.nodes))] for job in jobs]
            if local:  # ready: every ancestor already in the cache
                pending = [
                    [i for i in p if all(job.nodes[a].slot >= 0 for a in job.nodes[i].ancestors)]
                    for job, p in zip(jobs, pending, strict=True)
                ]
            if not any(pending):
                return
            base = at = cache.get_seq_length()
            stash: list[list[tuple[Any, Any]]] = [[] for _ in cache.layers]
            for offset in range(0, max(len(p) for p in pending), step):
                chunk = [p[offset : offset + step] for p in pending]
                width = self._forward_chunk(jobs, chunk, cache)
                for job, ids in zip(jobs, chunk, strict=True):
                    for r, i in enumerate(ids):
                        job.nodes[i].slot = at + r  # where its K/V are once the round joins
                at += width
                if local:  # set this forward's K/V aside; the round's next forward skips them
                    for parts, layer in zip(stash, cache.layers, strict=True):
                        parts.append((layer.keys[:, :, base:], layer.values[:, :, base:]))
                        layer.keys, layer.values = (
                            layer.keys[:, :, :base],
                            layer.values[:, :, :base],
                        )
            if local:
                for parts, layer in zip(stash, cache.layers, strict=True):
                    layer.keys = torch.cat([layer.keys, *(k for k, _ in parts)], dim=2)
                    layer.values = torch.cat([layer.values, *(v for _, v in parts)], dim=2)

    def _forward_chunk(self, jobs: list[_Job], chunk: list[list[int]], cache: Any) -> int:
        """One forward of the nodes ``chunk[b]`` in row b; returns its width. An ancestor
        without a slot is in this chunk (a chain when the cache grows forward by forward)."""
        import torch

        width = max(len(c) for c in chunk)
        base = cache.get_seq_length()
        # built in numpy (element writes on torch tensors cost microseconds each)
        tokens = np.full((len(jobs), width), int(self.hf.pad_id), dtype=np.int64)
        pos = np.zeros((len(jobs), width), dtype=np.int64)
        mask = np.zeros((len(jobs), 1, width, base + width), dtype=bool)
        mask[:, 0, :, base:] = np.eye(width, dtype=bool)  # own slot (pads: only that)
        for job, ids in zip(jobs, chunk, strict=True):
            where = {i: base + r for r, i in enumerate(ids)}
            for r, i in enumerate(ids):
                node = job.nodes[i]
                tokens[job.row, r], pos[job.row, r] = node.token, node.pos
                mask[job.row, 0, r, : node.visible] = True
                if node.ancestors:
                    cols = [
                        job.nodes[a].slot if a not in where else where[a] for a in node.ancestors
                    ]
                    mask[job.row, 0, r, cols] = True
        hidden = self._base(
            torch.from_numpy(tokens), torch.from_numpy(mask), torch.from_numpy(pos), cache
        ).last_hidden_state
        real = [
            (job, r, i) for job, ids in zip(jobs, chunk, strict=True) for r, i in enumerate(ids)
        ]
        rows = hidden[
            torch.tensor([j.row for j, _, _ in real]), torch.tensor([r for _, r, _ in real])
        ]
        for (job, _, i), top in zip(real, self._top(rows), strict=True):
            job.top[i] = top
        self.counters.nodes += len(real)
        self.counters.forwards += 1
        self.forwarded_tokens += len(real)
        return width


def next_words_batch(local: Any, batch: Sequence[Any]) -> list[list[WordDist]]:
    """Answer :class:`imprint.requests.kinds.NextWordRequest` s with the local model ``local``:
    requests with the same prefix and settings share one batched tree; each keeps its own
    seeded generator, so an answer does not depend on the batch it lands in."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(batch):
        key = (r.prefix, r.n, r.top_k, r.temperature, r.max_word_tokens, r.mode, r.min_mass)
        groups.setdefault(key, []).append(i)
    out: list[list[WordDist]] = [[] for _ in batch]
    for members in groups.values():
        r = batch[members[0]]
        config = r.config(node_batch=TREE_TOKENS)
        sampler = BatchedNextWordSampler(local, config)  # P's cache computed once per group
        for part in _by_words(members, [len(split_words(batch[i].text)) for i in members]):
            texts = [batch[i].text for i in part]
            rngs = [batch[i].rng() for i in part]
            for i, result in zip(
                part, sampler.batch(texts, prefix=r.prefix, rngs=rngs), strict=True
            ):
                out[i] = result
    return out


def _by_words(members: list[int], words: list[int]) -> list[list[int]]:
    """Consecutive parts of ``members`` of at most :data:`TREE_WORDS` words (one text at least):
    the cache of a batched tree grows with its word positions."""
    parts: list[list[int]] = [[]]
    total = 0
    for i, n in zip(members, words, strict=True):
        if parts[-1] and total + n > TREE_WORDS:
            parts.append([])
            total = 0
        parts[-1].append(i)
        total += n
    return parts
