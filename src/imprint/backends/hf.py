"""Gray-box backend over a Hugging Face causal LM (hub id, local folder or GGUF file).

BOS policy: every text is scored after exactly one beginning-of-sequence token (the tokenizer's
BOS, else its EOS), added here rather than by the tokenizer, so the first token of the text gets a
log-probability under every tokenizer and prefix tokens never leak into the score.
Texts longer than the context are scored with a sliding window: each token is scored once, with at
least ``max_length - stride`` tokens of context after the first window.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from imprint.backends.base import GRADIENTS, LOGPROBS, SAMPLING, ScoreRequest, TokenStats
from imprint.backends.models import fingerprint_source, load_causal_lm, resolve_model
from imprint.backends.scoped import sdpa_gqa
from imprint.errors import ConfigError
from imprint.signals.reduce import reduce_hidden

SCORING_VERSION = "1"  # bump when scoring changes what a cached result means


@dataclass(frozen=True)
class _Row:
    """One forward row: ``ids`` with targets from index ``first`` on, belonging to ``owner``."""

    owner: int
    ids: list[int]
    first: int


def sliding_windows(ids: list[int], max_length: int, stride: int) -> list[tuple[list[int], int]]:
    """Split ``ids`` (BOS included) into windows (ids, first scored index).

    Every position >= 1 is scored exactly once; windows after the first keep
    ``max_length - stride`` tokens of context.
    """
    if len(ids) <= max_length:
        return [(ids, 1)]
    if not 0 < stride < max_length:
        raise ConfigError(f"stride must be in (0, max_length={max_length}), got {stride}")
    windows = [(ids[:max_length], 1)]
    context = max_length - stride
    next_pos = max_length
    while next_pos < len(ids):
        start = next_pos - context
        windows.append((ids[start : start + max_length], context))
        next_pos = start + max_length
    return windows


class HFLogprobBackend:
    """Scores texts with a transformers causal LM; see the module docstring for the BOS policy."""

    capabilities = frozenset({LOGPROBS, GRADIENTS, SAMPLING})

    def __init__(
        self,
        spec: str,
        *,
        name: str = "target",
        dtype: str = "auto",
        device: str = "auto",
        max_length: int | None = None,
        stride: int | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        self.spec = spec
        self.name = name
        if model is None:
            model, tokenizer = load_causal_lm(spec, dtype=dtype, device=device)
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        # transformers copies K/V to every query head (grouped-query attention) unless told that
        # SDPA can share them; torch's CPU kernel can, even with a mask. Saves two copies of the
        # K/V per layer: measured ~20 % off a pass after a 1,000-token prefix. Switched on only
        # around this backend's forwards (see attention()), never for the whole process.
        self.share_kv_heads = self.device.type == "cpu"
        context = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
        self.max_length = min(max_length or context, context)
        self.stride = stride or self.max_length // 2
        bos = tokenizer.bos_token_id
        self.bos_id = bos if bos is not None else tokenizer.eos_token_id
        if self.bos_id is None:
            raise ConfigError(f"model {spec!r}: tokenizer has neither a BOS nor an EOS token")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.bos_id
        self._encodings: dict[str, list[int]] = {}
        self._prefix_cache: dict[str, tuple[Any, torch.Tensor, int]] = {}
        self._fingerprint: str | None = None

    # -- identity -----------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            try:
                weights = fingerprint_source(resolve_model(self.spec))
            except ConfigError:  # an in-memory model (tests): fingerprint its parameters
                weights = _parameter_digest(self.model)
            parts = [
                weights,
                str(self.model.dtype),
                str(self.max_length),
                str(self.stride),
                str(self.bos_id),
                SCORING_VERSION,
            ]
            self._fingerprint = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
        return self._fingerprint

    # -- tokens -------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Entries of the model's next-token distribution (DC-PDD's V); padded rows included."""
        return int(self.model.config.vocab_size)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (memoised)."""
        ids = self._encodings.get(text)
        if ids is None:
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._encodings) < 200_000:
                self._encodings[text] = ids
        return ids

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(self.encode(t)) + 1 for t in texts]

    # -- scoring ------------------------------------------------------------------------------
    @torch.no_grad()
    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenStats]:
        """Score a batch; requests sharing a prefix reuse one prefix KV cache."""
        out: list[TokenStats | None] = [None] * len(requests)
        groups: dict[str | None, list[int]] = {}
        for i, req in enumerate(requests):
            if not req.text:
                raise ConfigError(f"request {i}: cannot score an empty text")
            groups.setdefault(req.prefix, []).append(i)
        for prefix, idx in groups.items():
            texts = [requests[i].text for i in idx]
            stats = (
                self._score_plain(texts) if prefix is None else self._score_prefixed(prefix, texts)
            )
            for i, s in zip(idx, stats, strict=True):
                out[i] = s
        return [s for s in out if s is not None]

    def _score_plain(self, texts: list[str]) -> list[TokenStats]:
        rows = [
            _Row(owner, ids, first)
            for owner, text in enumerate(texts)
            for ids, first in sliding_windows(
                [self.bos_id, *self.encode(text)], self.max_length, self.stride
            )
        ]
        width = max(len(r.ids) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row.ids)] = torch.tensor(row.ids)
            mask[r, : len(row.ids)] = 1
        hidden = self._hidden(input_ids, mask, None)
        # position p predicts token p + 1
        pred = [
            (r, p) for r, row in enumerate(rows) for p in range(row.first - 1, len(row.ids) - 1)
        ]
        return self._collect(rows, hidden, pred, input_ids, len(texts), offset=1)

    def _score_prefixed(self, prefix: str, texts: list[str]) -> list[TokenStats]:
        cache, last_hidden, prefix_len = self._prefix(prefix)
        encoded = [self.encode(t) for t in texts]
        for text, ids in zip(texts, encoded, strict=True):
            if prefix_len + len(ids) > self.max_length:
                raise ConfigError(
                    f"prefix ({prefix_len} tokens) + text ({len(ids)} tokens) exceeds the model "
                    f"context ({self.max_length}); shorten the prefix or truncate texts "
                    f"(text starts {text[:40]!r})"
                )
        rows = [_Row(owner, ids, 0) for owner, ids in enumerate(encoded)]
        width = max(len(r.ids) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), prefix_len + width), dtype=torch.long)
        mask[:, :prefix_len] = 1
        for r, row in enumerate(rows):
            input_ids[r, : len(row.ids)] = torch.tensor(row.ids)
            mask[r, prefix_len : prefix_len + len(row.ids)] = 1
        past = _expand_cache(cache, len(rows))
        hidden = self._hidden(input_ids, mask, past)
        # the prefix's last state predicts text token 0; text position p predicts p + 1
        hidden = torch.cat([last_hidden.expand(len(rows), 1, -1), hidden], dim=1)
        pred = [(r, p) for r, row in enumerate(rows) for p in range(len(row.ids))]
        return self._collect(rows, hidden, pred, input_ids, len(texts), offset=0)

    def _prefix(self, prefix: str) -> tuple[Any, torch.Tensor, int]:
        """KV cache and last hidden state of BOS + prefix, computed once per prefix."""
        if prefix not in self._prefix_cache:
            ids = torch.tensor([[self.bos_id, *self.encode(prefix)]], device=self.device)
            base = getattr(self.model, self.model.base_model_prefix)
            with self.attention():
                output = base(input_ids=ids, use_cache=True)
            cache = output.cache
            self._prefix_cache.clear()  # one live prefix at a time bounds memory
            self._prefix_cache[prefix] = (cache, output.last_hidden_state[:, -1:], ids.shape[1])
        return self._prefix_cache[prefix]

    def _hidden(self, input_ids: torch.Tensor, mask: torch.Tensor, past: Any) -> torch.Tensor:
        base = getattr(self.model, self.model.base_model_prefix)
        with self.attention():
            output = base(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                cache=past,
                use_cache=past is not None,
            )
        return output.last_hidden_state

    def attention(self) -> AbstractContextManager[None]:
        """Wrap a forward of this model: shared K/V heads on CPU for the call only."""
        return sdpa_gqa(self.share_kv_heads)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits

    def _collect(
        self,
        rows: list[_Row],
        hidden: torch.Tensor,
        pred: list[tuple[int, int]],
        input_ids: torch.Tensor,
        n_owners: int,
        *,
        offset: int,
    ) -> list[TokenStats]:
        """Reduce the predicting positions and split the statistics back per text."""
        r_idx = torch.tensor([r for r, _ in pred], device=hidden.device)
        p_idx = torch.tensor([p for _, p in pred], device=hidden.device)
        targets = input_ids.to(hidden.device)[r_idx, p_idx + offset]
        stats = reduce_hidden(
            hidden[r_idx, p_idx], targets, self._head, vocab_size=self.model.config.vocab_size
        )
        arrays = {k: v.float().cpu().numpy() for k, v in stats.items()}
        arrays["token_ids"] = targets.cpu().numpy()
        per_owner: list[list[TokenStats]] = [[] for _ in range(n_owners)]
        start = 0
        for row in rows:
            n = len(row.ids) - row.first if offset else len(row.ids)
            sl = slice(start, start + n)
            per_owner[row.owner].append(_stats_from(arrays, sl))
            start += n
        return [TokenStats.concat(parts) for parts in per_owner]


def _stats_from(arrays: dict[str, np.ndarray], sl: slice) -> TokenStats:
    return TokenStats(
        token_ids=arrays["token_ids"][sl].astype(np.int32),
        logp=arrays["logp"][sl].astype(np.float32),
        mean_logp=arrays["mean_logp"][sl].astype(np.float32),
        var_logp=np.maximum(arrays["var_logp"][sl], 0).astype(np.float32),
        rank=arrays["rank"][sl].astype(np.int32),
        argmax=arrays["argmax"][sl].astype(np.int32),
    )


def _expand_cache(cache: Any, batch: int) -> Any:
    """A batch-sized cache over a batch-1 prefix cache, without copying it.

    Each layer's keys and values become broadcast views (``expand``); the model's first
    ``update`` concatenates the new tokens onto them, which is the one copy a prefixed pass
    cannot avoid. The stored prefix cache is never modified (layers are shallow copies). Caches
    without ``layers`` fall back to a deep copy repeated along the batch."""
    import copy

    if not all(hasattr(layer, "keys") for layer in getattr(cache, "layers", [None])):
        expanded = copy.deepcopy(cache)
        if batch > 1:
            expanded.batch_repeat_interleave(batch)
        return expanded
    expanded = copy.copy(cache)
    expanded.layers = []
    for layer in cache.layers:
        view = copy.copy(layer)
        if getattr(layer, "is_initialized", True) and layer.keys is not None:
            view.keys = layer.keys.expand(batch, *layer.keys.shape[1:])
            view.values = layer.values.expand(batch, *layer.values.shape[1:])
        expanded.layers.append(view)
    return expanded


def _parameter_digest(model: Any) -> str:
    digest = hashlib.sha256()
    for name, param in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(param.detach().float().cpu().numpy().tobytes()[:4096])
    return digest.hexdigest()[:16]
