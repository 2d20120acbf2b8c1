"""Gray-box backend over a Hugging Face causal LM (hub id, local folder or GGUF file).

Start-token policy: every text is scored after one start token, added here rather than by the
tokenizer, so the first token of the text gets a log-probability and prefix tokens never leak into
the score. The token is the one the model saw at document boundaries in pre-training (see
:mod:`imprint.backends.start_token`; ``start_token="none"`` scores without one).
Texts longer than the context are scored with a sliding window: each token is scored once, with at
least ``max_length - stride`` tokens of context after the first window. Windows stream through the
model a few at a time, so one forward never holds more than ``max(token_budget, max_length)``
tokens however long the text is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from imprint.backends.base import (
    GRADIENTS,
    LOGPROBS,
    SAMPLING,
    TOKENS,
    Backend,
    SamplingSettings,
    ScoreRequest,
    TokenStats,
)
from imprint.backends.bf16_gates import FUSED_HEAD_PATH
from imprint.backends.budget import auto_token_budget
from imprint.backends.compiled_blocks import CompiledBlocks
from imprint.backends.dtype_choice import BF16_PATH, DtypeChoice
from imprint.backends.gradients import gradient_norms
from imprint.backends.hf_batches import (
    expand_cache,
    pad_rows,
    parameter_digest,
    stats_slice,
    to_device,
)
from imprint.backends.models import (
    choose_model_dtype,
    describe_model,
    fingerprint_source,
    load_causal_lm,
    resolve_model,
)
from imprint.backends.reduce import fused_head_stats, reduce_hidden, to_host, uses_fused
from imprint.backends.scoped import sdpa_gqa
from imprint.backends.start_token import context_token_id, resolve_start_token
from imprint.backends.text import HFTextBackend
from imprint.backends.windows import sliding_windows
from imprint.errors import ConfigError

__all__ = ["SCORING_VERSION", "HFLogprobBackend", "row_chunks", "sliding_windows"]

Finish = Callable[[], list[TokenStats]]  # completes a queued forward: per-row statistics

SCORING_VERSION = "2"  # bump when scoring changes what a cached result means (2: top1_logp)


@dataclass(frozen=True)
class _Row:
    """One forward row: ``ids`` with targets from index ``first`` on, belonging to ``owner``;
    ``order`` is its window's place within the owner's text."""

    owner: int
    ids: list[int]
    first: int
    order: int = 0

    @property
    def n_scored(self) -> int:
        return len(self.ids) - self.first


def row_chunks(rows: Sequence[_Row], budget: int) -> Iterator[list[_Row]]:
    """Rows grouped, longest first, so that rows x padded width <= ``budget`` (at least one row
    per group, so a single window wider than the budget still runs, alone)."""
    ordered = sorted(rows, key=lambda r: -len(r.ids))
    chunk: list[_Row] = []
    for row in ordered:
        # sorted longest first: the chunk's width is its first row's length
        if chunk and (len(chunk) + 1) * len(chunk[0].ids) > budget:
            yield chunk
            chunk = []
        chunk.append(row)
    if chunk:
        yield chunk


class HFLogprobBackend(Backend):
    """Scores texts with a transformers causal LM; see the module docstring for the policies.

    Samples text through :class:`~imprint.backends.text.HFTextBackend` over the same weights
    (:meth:`text_backend`) and takes gradients with :mod:`imprint.backends.gradients`."""

    capabilities = frozenset({LOGPROBS, GRADIENTS, SAMPLING, TOKENS})
    max_length: int  # always known here: the model's context, or less
    token_budget: int
    reports_progress = True  # score() accepts progress=, advanced per forward

    def __init__(
        self,
        spec: str,
        *,
        name: str = "target",
        dtype: str = "auto",
        device: str = "auto",
        max_length: int | None = None,
        stride: int | None = None,
        start_token: str = "auto",
        token_budget: int | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        if token_budget is not None and token_budget < 1:
            raise ConfigError(f"token_budget must be >= 1 token per forward, got {token_budget}")
        self.spec = spec
        self.name = name
        if model is None:
            self.dtype_choice = choose_model_dtype(spec, dtype, device)
            model, tokenizer = load_causal_lm(spec, dtype=self.dtype_choice.dtype, device=device)
        else:
            loaded = str(model.dtype).removeprefix("torch.")
            self.dtype_choice = DtypeChoice(dtype, loaded, "model passed in memory")
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        # A bf16/fp16 model on CPU scores with its blocks compiled (fused elementwise work) and
        # its output head in the model's dtype. A float32 head (a float32 copy of the head's
        # weights) was the default until measured (bench_bf16.py, 120 held-out texts, AMX CPU,
        # where a bf16 GEMM runs ~6x float32's): with it the lowest column's Spearman vs float32
        # went only from 0.99881 to 0.99903 (0.99667 either way with eager blocks), for 1.54x
        # the battery's time. It stays as an option for that benchmark.
        self.cpu_reduced = self.device.type == "cpu" and model.dtype != torch.float32
        self.float32_head = False
        # True: the head in vocabulary slices folded into running statistics (reduce.py).
        # Off by default: measured 0.76x of the plain path at n 32 on an AVX512-bf16 EPYC
        # (docs/benchmarks.md), so it is an option until shown to pay.
        self.fused_head = False
        self._head32: tuple[torch.Tensor, torch.Tensor | None] | None = None
        self.blocks = CompiledBlocks(model, enabled=self.cpu_reduced)
        # transformers copies K/V to every query head (grouped-query attention) unless told that
        # SDPA can share them; torch's CPU kernel can, even with a mask. Saves two copies of the
        # K/V per layer: measured ~20 % off a pass after a 1,000-token prefix. Switched on only
        # around this backend's forwards (see attention()), never for the whole process.
        self.share_kv_heads = self.device.type == "cpu"
        declared = getattr(model.config, "max_position_embeddings", None)
        context = int(declared or 2048)
        if max_length is not None and declared and max_length > context:  # never clamped silently
            raise ConfigError(
                f"max_length={max_length} exceeds the context of {spec!r} ({context} tokens); "
                f"set --max-length (or --model-args max_length) to at most {context}, or leave "
                "it unset for the model's context"
            )
        self.max_length = min(max_length or context, context)
        self.stride = stride or self.max_length // 2
        # None = auto: 4,096 on CPU, sized from free device memory on CUDA (backends/budget.py)
        self.token_budget = token_budget or auto_token_budget(
            model, self.device, max_length=self.max_length
        )
        # auto on a model imprint trained: the token its texts were trained after
        self.start_token = resolve_start_token(tokenizer, start_token, folder=_local_folder(spec))
        self.start_ids = self.start_token.ids
        # contexts that need one token even without a start token (generation from an empty
        # prompt, GradNorm's loss) use the automatic choice
        self.bos_id = context_token_id(tokenizer, self.start_token)
        pad = tokenizer.pad_token_id
        self.pad_id: int = int(pad) if pad is not None else self.bos_id
        self._encodings: dict[str, list[int]] = {}
        self._prefix_cache: dict[str, tuple[Any, torch.Tensor, int]] = {}
        self._fingerprints: dict[str, str] = {}  # by scoring variant

    # -- identity -----------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        # read per call: the float32 head and IMPRINT_NO_COMPILE may change after the first read
        variant = self._scoring_variant()
        if variant not in self._fingerprints:
            try:
                weights = fingerprint_source(resolve_model(self.spec))
            except ConfigError:  # an in-memory model (tests): fingerprint its parameters
                weights = parameter_digest(self.model)
            parts = [
                weights,
                str(self.model.dtype),
                str(self.max_length),
                str(self.stride),
                self.start_token.key(),  # a token id, or "none"
                SCORING_VERSION,
            ]
            if variant:  # results of the CPU bf16 path differ from the plain one's
                parts.append(variant)
            self._fingerprints[variant] = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
        return self._fingerprints[variant]

    def _scoring_variant(self) -> str:
        """How the CPU bf16 path scores ("" elsewhere): each variant scores differently."""
        if not self.cpu_reduced:
            return ""
        path = FUSED_HEAD_PATH if self._fuses_head() else BF16_PATH
        head = "+float32-head" if self.float32_head else ""
        return path + head + ("" if self.blocks.on else "+eager-blocks")

    def describe(self) -> dict[str, Any]:
        """The manifest entry: what was loaded and how texts are scored."""
        return {
            "spec": self.spec,
            "resolved_model": describe_model(self.spec),  # base or instruct, quantisation
            "fingerprint": self.fingerprint,
            "start_token": self.start_token.describe(),
            "max_length": self.max_length,
            "stride": self.stride,
            "token_budget": self.token_budget,
            "device": str(self.device),
            "dtype": self.dtype_choice.describe(),
            "head": "float32"
            if self.float32_head
            else str(self.model.dtype).removeprefix("torch."),
            "reduction": self._reduction(),
            "blocks": self.blocks.describe(),
        }

    def _fuses_head(self) -> bool:
        return self.cpu_reduced and self.fused_head and not self.float32_head

    def _reduction(self) -> str:
        """For the manifest: how the head's output becomes per-token statistics."""
        if self._fuses_head():
            return "fused head " + ("(compiled)" if self.blocks.on else "(eager)")
        return "compiled" if uses_fused(self.device, self.model.dtype) else "eager"

    def local_model(self) -> HFLogprobBackend:
        return self

    def text_backend(self) -> Backend:
        """Seeded sampling from this model (same weights, tokenizer and start token)."""
        return HFTextBackend(self, name=self.name)

    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        """Sampled continuations with the default sampler of :meth:`text_backend`."""
        return self.text_backend().sample(prompts, settings)

    def gradient_norms(
        self, texts: Sequence[str], *, norm: str = "l2", aggregate: str = "global"
    ) -> np.ndarray:
        """Norm of d loss(x) / d theta per text, shape (len(texts),); see
        :func:`imprint.backends.gradients.gradient_norms`."""
        return gradient_norms(self, texts, norm=norm, aggregate=aggregate)

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
        """Tokens per text, the start token included."""
        return [len(self.encode(t)) + len(self.start_ids) for t in texts]

    # -- scoring ------------------------------------------------------------------------------
    @torch.no_grad()
    def score(
        self,
        requests: Sequence[ScoreRequest],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> list[TokenStats]:
        """Score a batch; requests sharing a prefix reuse one prefix KV cache.

        ``progress(n)`` is called after every forward with the number of tokens it scored.
        """
        out: list[TokenStats | None] = [None] * len(requests)
        groups: dict[str | None, list[int]] = {}
        for i, req in enumerate(requests):
            self._check_scorable(i, req)
            groups.setdefault(req.prefix, []).append(i)
        for prefix, idx in groups.items():
            texts = [requests[i].text for i in idx]
            rows, run = (
                (self._plain_rows(texts), self._forward_plain)
                if prefix is None
                else (self._prefixed_rows(prefix, texts), self._forward_prefixed(prefix))
            )
            for i, s in zip(idx, self._stream(rows, len(texts), run, progress), strict=True):
                out[i] = s
        return [s for s in out if s is not None]

    def _check_scorable(self, i: int, req: ScoreRequest) -> None:
        if not req.text:
            raise ConfigError(f"request {i}: cannot score an empty text")
        if not self.start_ids and req.prefix is None and len(self.encode(req.text)) < 2:
            raise ConfigError(
                f"request {i}: text {req.text[:40]!r} is one token; without a start token its "
                "first token is context only and nothing is left to score; use --start-token auto"
            )

    @property
    def batch_tokens(self) -> int:
        """Tokens the planner should hand :meth:`score` at once: one forward on CPU; on CUDA
        four, so the host work of one forward overlaps the next one's device work."""
        return self.token_budget * (4 if self.device.type == "cuda" else 1)

    def _stream(
        self,
        rows: list[_Row],
        n_owners: int,
        run: Callable[[list[_Row]], Finish],
        progress: Callable[[int], None] | None,
    ) -> list[TokenStats]:
        """Run the rows a budget-sized chunk at a time; join each owner's windows in order.

        ``run(chunk)`` queues a forward and returns how to finish it; the previous chunk is
        finished (copied to the host, split per row) only after the next one is queued, so on a
        GPU the device is never idle while the host works. On CPU this changes nothing.
        """
        parts: list[list[tuple[int, TokenStats]]] = [[] for _ in range(n_owners)]

        def take(chunk: list[_Row], finish: Finish) -> None:
            for row, stats in zip(chunk, finish(), strict=True):
                parts[row.owner].append((row.order, stats))
            if progress is not None:
                progress(sum(row.n_scored for row in chunk))

        pending: tuple[list[_Row], Finish] | None = None
        for chunk in row_chunks(rows, self.token_budget):
            queued = (chunk, run(chunk))
            if pending is not None:
                take(*pending)
            pending = queued
        if pending is not None:
            take(*pending)
        return [TokenStats.concat([s for _, s in sorted(p, key=lambda x: x[0])]) for p in parts]

    def _plain_rows(self, texts: list[str]) -> list[_Row]:
        return [
            _Row(owner, ids, first, order)
            for owner, text in enumerate(texts)
            for order, (ids, first) in enumerate(
                sliding_windows([*self.start_ids, *self.encode(text)], self.max_length, self.stride)
            )
        ]

    def _forward_plain(self, rows: list[_Row]) -> Finish:
        input_ids, mask = pad_rows(rows, self.pad_id)
        hidden = self._hidden(input_ids, mask, None)
        # position p predicts token p + 1
        return self._collect(rows, hidden, input_ids, offset=1)

    def _prefixed_rows(self, prefix: str, texts: list[str]) -> list[_Row]:
        prefix_len = len(self.start_ids) + len(self.encode(prefix))  # no forward yet
        rows = []
        for owner, text in enumerate(texts):
            ids = self.encode(text)
            if prefix_len + len(ids) > self.max_length:
                raise ConfigError(
                    f"prefix ({prefix_len} tokens) + text ({len(ids)} tokens) exceeds the model "
                    f"context ({self.max_length}); shorten the prefix or truncate texts "
                    f"(text starts {text[:40]!r})"
                )
            rows.append(_Row(owner, ids, 0))
        return rows

    def _forward_prefixed(self, prefix: str) -> Callable[[list[_Row]], Finish]:
        def run(rows: list[_Row]) -> Finish:
            cache, last_hidden, prefix_len = self._prefix(prefix)
            input_ids, text_mask = pad_rows(rows, self.pad_id)
            mask = torch.cat([torch.ones(len(rows), prefix_len, dtype=torch.long), text_mask], 1)
            hidden = self._hidden(input_ids, mask, expand_cache(cache, len(rows)))
            # the prefix's last state predicts text token 0; text position p predicts p + 1
            hidden = torch.cat([last_hidden.expand(len(rows), 1, -1), hidden], dim=1)
            return self._collect(rows, hidden, input_ids, offset=0)

        return run

    def hidden_predicting(self, prefix: str | None, ids: Sequence[int], first: int) -> torch.Tensor:
        """Hidden states (len(ids) - first, d) after the start token and ``prefix``: row r
        predicts ``ids[first + r]``. A prefix's KV cache is computed once and reused for every
        text after it. ``first`` >= 1 when there is neither start token nor prefix."""
        if not prefix:
            context = len(self.start_ids)
            if context + first < 1:
                raise ConfigError("the first token has no context: score from token 1 on")
            full = torch.tensor([[*self.start_ids, *ids]])
            hidden = self._hidden(full, torch.ones_like(full), None)[0]
            return hidden[context + first - 1 : context + len(ids) - 1]
        cache, last_hidden, prefix_len = self._prefix(prefix)
        text = torch.tensor([list(ids)])
        mask = torch.ones(1, prefix_len + len(ids), dtype=torch.long)
        hidden = self._hidden(text, mask, expand_cache(cache, 1))[0]
        return torch.cat([last_hidden[0], hidden[:-1]])[first:]

    def _prefix(self, prefix: str) -> tuple[Any, torch.Tensor, int]:
        """KV cache and last hidden state of start token + prefix, computed once per prefix."""
        if prefix not in self._prefix_cache:
            ids = torch.tensor([[*self.start_ids, *self.encode(prefix)]], device=self.device)
            base = getattr(self.model, self.model.base_model_prefix)
            with self.attention():
                output = base(input_ids=ids, use_cache=True)
            cache = output.cache
            self._prefix_cache.clear()  # one live prefix at a time bounds memory
            self._prefix_cache[prefix] = (cache, output.last_hidden_state[:, -1:], ids.shape[1])
        return self._prefix_cache[prefix]

    def _hidden(self, input_ids: torch.Tensor, mask: torch.Tensor, past: Any) -> torch.Tensor:
        base = getattr(self.model, self.model.base_model_prefix)

        def forward() -> Any:
            with self.attention():
                return base(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    cache=past,
                    use_cache=past is not None,
                )

        # compiled blocks on plain passes only: see backends/compiled_blocks.py
        output = self.blocks.run(forward) if past is None else forward()
        return output.last_hidden_state

    def attention(self) -> AbstractContextManager[None]:
        """Wrap a forward of this model: shared K/V heads on CPU for the call only."""
        return sdpa_gqa(self.share_kv_heads)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The output head: hidden states (..., d) -> logits (..., vocabulary rows), Gemma's
        final soft-capping included; fast paths that reduce their own positions call it."""
        if self.float32_head:
            weight, bias = self._float32_head()
            logits = torch.nn.functional.linear(hidden.float(), weight, bias)
        else:
            logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits

    def _reduce(self, hidden: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-position statistics of the predicting hidden states. The CPU bf16 path fuses the
        output head with the reduction, a vocabulary slice at a time (no full row of logits);
        every other path applies the head to chunks of positions and reduces each chunk."""
        if self._fuses_head():
            out = self.model.get_output_embeddings()
            return fused_head_stats(
                hidden,
                targets,
                out.weight,
                out.bias,
                softcap=getattr(self.model.config, "final_logit_softcapping", None),
                compiled=self.blocks.on,
            )
        return reduce_hidden(hidden, targets, self.head, vocab_size=self.model.config.vocab_size)

    def _float32_head(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self._head32 is None:
            out = self.model.get_output_embeddings()
            bias = None if out.bias is None else out.bias.detach().float()
            self._head32 = (out.weight.detach().float(), bias)
        return self._head32

    def _collect(
        self, rows: list[_Row], hidden: torch.Tensor, input_ids: torch.Tensor, *, offset: int
    ) -> Finish:
        """Queue the reduction of each row's predicting positions; the returned function copies
        the results to the host and splits them per row (see :meth:`_stream`).

        Hidden position p of a row predicts ``input_ids[p + offset]``; the predicting positions
        are ``first - offset <= p < len(ids) - offset``, selected with one mask (no per-token
        Python objects).
        """
        width = hidden.shape[1]
        lo = torch.tensor([row.first - offset for row in rows])
        hi = torch.tensor([len(row.ids) - offset for row in rows])
        pos = torch.arange(width)
        select = (pos[None, :] >= lo[:, None]) & (pos[None, :] < hi[:, None])
        shifted = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        n = min(width, input_ids.shape[1] - offset)
        shifted[:, :n] = input_ids[:, offset : offset + n]
        # flat indices computed on the host: a boolean mask on the device would stall it
        # (nonzero must learn the count); the targets never leave the host
        flat = select.reshape(-1).nonzero()[:, 0]
        targets = shifted.reshape(-1)[flat]
        chosen = hidden.reshape(-1, hidden.shape[-1]).index_select(
            0, to_device(flat, hidden.device)
        )
        stats = self._reduce(chosen, to_device(targets, hidden.device))
        bounds = np.cumsum([0, *(hi - lo).tolist()])

        def finish() -> list[TokenStats]:  # holds the small results only, never ``hidden``
            arrays = {**to_host(stats), "token_ids": targets.numpy()}  # one or two copies
            spans = zip(bounds[:-1], bounds[1:], strict=True)
            return [stats_slice(arrays, slice(a, b)) for a, b in spans]

        return finish


def _local_folder(spec: str) -> str | None:
    """The local model folder ``spec`` names (where imprint records a training start token)."""
    try:
        source = resolve_model(spec)
    except ConfigError:  # an in-memory model (tests) or a spec that names no folder
        return None
    return source.location if source.is_local and source.gguf_file is None else None
