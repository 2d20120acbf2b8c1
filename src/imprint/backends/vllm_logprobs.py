"""vLLM as a log-prob backend: the prompt's own log-probabilities, what a serving engine returns.

vLLM scores a prompt with ``SamplingParams(prompt_logprobs=1)``: for each prompt position it gives
the log-probability and vocabulary rank of the actual token, and the top-1 candidate. That serves
every attack that reads only log p(x_t) (LOSS, zlib, Min-K%, lowercase, ReCaLL, CON-ReCall, the
reference attacks) plus the rank, argmax and top-1 log-prob. It does not give the p-weighted
mean and variance of log p over the whole vocabulary, so attacks that need them (Min-K%++, SURP,
DC-PDD's entropy terms, ...) are refused before any work (``Attack.vocab_stats``); those fields
are NaN here. The capability is :data:`TOKEN_LOGPROBS`, distinct from the full :data:`LOGPROBS`.

Texts are scored after the same start token as the Hugging Face backend (``start_token``), and a
prefix's positions are never scored, so scores are comparable with the local backend's up to
the engine's numerics. A text that does not fit the engine's context is refused (truncate it).

Not exercised against a live engine in this project's tests (vLLM needs a CUDA build not
installable here); the conversion from vLLM's output is tested on hand-made outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.backends.base import SAMPLING, TOKEN_LOGPROBS, TOKENS, ScoreRequest, TokenStats
from imprint.backends.start_token import resolve_start_token
from imprint.backends.text import VLLMTextBackend
from imprint.errors import ConfigError


def stats_from_prompt_logprobs(
    ids: Sequence[int], prompt_logprobs: Sequence[Mapping[int, Any] | None], first: int
) -> TokenStats:
    """Per-token statistics of ``ids[first:]`` from vLLM's ``prompt_logprobs`` (one entry per
    prompt position: None for position 0, else {token id: Logprob(logprob, rank, ...)} holding
    the actual token and the top-1 candidate). Full-vocabulary fields are NaN."""
    if len(prompt_logprobs) != len(ids):
        raise ConfigError(f"vLLM returned {len(prompt_logprobs)} prompt log-probs for {len(ids)}")
    if first < 1:
        raise ConfigError("position 0 has no log-probability; score from position 1 on")
    n = len(ids) - first
    logp = np.empty(n, np.float32)
    rank = np.empty(n, np.int32)
    argmax = np.empty(n, np.int32)
    top1 = np.empty(n, np.float32)
    for i, pos in enumerate(range(first, len(ids))):
        entry = prompt_logprobs[pos]
        if entry is None or ids[pos] not in entry:
            raise ConfigError(f"vLLM gave no log-probability for prompt position {pos}")
        actual = entry[ids[pos]]
        logp[i], rank[i] = actual.logprob, actual.rank
        best_id, best = min(entry.items(), key=lambda kv: kv[1].rank)
        argmax[i], top1[i] = best_id, best.logprob
    nan = np.full(n, np.nan, np.float32)
    return TokenStats(
        token_ids=np.asarray(ids[first:], np.int32),
        logp=logp,
        mean_logp=nan,
        var_logp=nan.copy(),
        rank=rank,
        argmax=argmax,
        top1_logp=top1,
    )


class VLLMBackend(VLLMTextBackend):
    """vLLM sampling (black-box attacks) and prompt log-probs (per-token gray-box attacks)."""

    capabilities = frozenset({SAMPLING, TOKEN_LOGPROBS, TOKENS})
    max_length: int  # the engine's max_model_len

    def __init__(self, spec: str, *, start_token: str = "auto", **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        # spec is a folder here (see providers.load_vllm): a game's model keeps its own token
        folder = spec if Path(spec).is_dir() else None
        self.start_token = resolve_start_token(self.tokenizer, start_token, folder=folder)
        self.start_ids = list(self.start_token.ids)
        config = self.llm.llm_engine.model_config
        self.max_length = int(config.max_model_len)
        self._vocab_size = int(config.get_vocab_size())

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(self.encode(t)) + len(self.start_ids) for t in texts]

    @property
    def fingerprint(self) -> str:  # sampling settings do not change prompt log-probs
        return f"{super().fingerprint}-{self.start_token.key()}"

    def score(self, requests: Sequence[ScoreRequest], *, progress: Any = None) -> list[TokenStats]:
        """One engine call for the batch; prefix tokens are context only (``progress`` is not
        called: ``reports_progress`` is False, the planner advances per batch)."""
        from vllm.inputs import TokensPrompt

        prompts, firsts = [], []
        for i, req in enumerate(requests):
            context = [*self.start_ids, *(self.encode(req.prefix) if req.prefix else [])]
            ids = [*context, *self.encode(req.text)]
            if len(ids) > self.max_length:
                raise ConfigError(
                    f"request {i}: {len(ids)} tokens exceed the vLLM engine's context of "
                    f"{self.max_length} (text starts {req.text[:40]!r}); truncate texts "
                    "(--truncate N) or score long texts with the hf backend's sliding window"
                )
            prompts.append(TokensPrompt(prompt_token_ids=ids))
            firsts.append(max(1, len(context)))
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [
            stats_from_prompt_logprobs(out.prompt_token_ids, out.prompt_logprobs, first)
            for out, first in zip(outputs, firsts, strict=True)
        ]
