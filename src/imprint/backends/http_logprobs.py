"""Gray-box attacks over HTTP: prompt log-probs from an OpenAI-compatible completions server.

Selected with ``--model openai-logprobs:MODEL --api-base URL``. Each text is one ``POST
/completions`` with ``echo: true``, ``logprobs: k`` and ``max_tokens: 1`` (the generated token is
ignored; ``max_tokens: 0`` means "no limit" on llama-cpp-python's server), prompt = start token +
prefix + text. Per scored token the backend returns log p, the top-k candidates' best (argmax,
top-1 log p) and the rank when the token is among the candidates (0 otherwise). That serves every
attack that reads only per-token log p (:data:`TOKEN_LOGPROBS`); full-vocabulary statistics are
NaN, so Min-K%++ and kin are refused before any request, except ``min_k_pp_topk`` (an
approximation from the candidates, named as such) when ``topk_moments=true``.

Before any text is scored the backend probes the server once (:mod:`.alignment`): vLLM's
``prompt_logprobs`` extension is noted when the server answers with it, and an echo answer to a
probe text decides which entry holds which token's distribution (llama-cpp-python's is shifted by
one for models without a BOS). A shifted answer is corrected by reading each token's log p from
the previous entry's candidates; where a token is not among them the request is repeated with more
candidates (up to ``max_top_logprobs``), then refused. The first scored token, whose entry servers
null, is read from one extra request per distinct context (the context alone, its next-token
candidates; concurrent texts wait for that one answer). With ``tokenizer=SPEC`` (a local
tokenizer of the same model) the server's tokens are checked against it and token ids are real;
without one, ids are stable hashes of token texts.

With a local tokenizer, a token read by text whose text several ids render to
(:mod:`.ambiguous_tokens`, decided before any request), and a first token missing from its
context's candidates, are asked by id instead: a completion of the text before the token with its
one generated token forced to the token's id (``logit_bias``); ``ambiguous=drop`` leaves such texts
out, counted. Every answer is kept in the run's store as it arrives (:mod:`.http_answer_store`),

The backend is composed of parts, one module each: the options (:mod:`.http_logprob_options`),
the stored or POSTed request (:mod:`.http_stored_post`), the echo and first-token requests
(:mod:`.http_context_requests`), the probe (:mod:`.http_logprob_probe`), the forced-token
requests (:mod:`.http_forced_tokens`) and the rows' statistics (:mod:`.http_logprob_stats`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from imprint.backends.alignment import Alignment, MissingLogprob, token_rows
from imprint.backends.base import TOKEN_LOGPROBS, Backend, ScoreRequest, TokenStats
from imprint.backends.http_answer_store import Once
from imprint.backends.http_checks import check_api_base
from imprint.backends.http_forced_tokens import ForcedTokens
from imprint.backends.http_logprob_options import AMBIGUOUS, FORMS, LogprobOptions
from imprint.backends.http_logprob_stats import TokenRowStats
from imprint.backends.http_stored_post import ServerError
from imprint.backends.http_transport import RetryPolicy
from imprint.errors import MissingDependencyError

# the names other modules and tests import from here (their parts live in the modules above)
__all__ = ["AMBIGUOUS", "FORMS", "HTTPLogprobBackend", "LogprobOptions", "ServerError"]


class HTTPLogprobBackend(ForcedTokens, TokenRowStats, Backend):
    """Per-token log p of prompts from an OpenAI-compatible server; see the module docstring."""

    capabilities = frozenset({TOKEN_LOGPROBS})

    def __init__(
        self,
        base_url: str,
        model: str,
        options: LogprobOptions | None = None,
        *,
        name: str = "target",
        probe: bool = True,
        cache: Any = None,
    ) -> None:
        check_api_base(base_url)
        try:
            import httpx
        except ImportError as err:
            raise MissingDependencyError("httpx", "api") from err
        import os

        self.options = opts = options or LogprobOptions()
        self.base_url, self.model, self.name = base_url.rstrip("/"), model, name
        self.spec = f"{self.base_url}#{model}"
        key = os.environ.get(opts.key_env) if opts.key_env else None
        self._key = key or ""
        self._httpx = httpx
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=opts.timeout,
            limits=httpx.Limits(max_connections=opts.concurrency),
        )
        self._retry = RetryPolicy(max_retries=opts.max_retries)
        self._rng, self._lock = random.Random(0), threading.Lock()
        self.cache = cache  # the run's answer store (None: answers are not kept)
        self._usage = {
            "requests": 0,
            "retries": 0,
            "rerequested_more_candidates": 0,
            "forced_token_requests": 0,
            "stored": 0,
            "cached": 0,
        }
        self._first = Once()  # context -> its next-token candidates, asked once
        self._forcing: Once = Once()  # whether the server honours a forced token (probed once)
        self.dropped_ids: dict[str, list[str]] = {}  # reason -> sample ids left out
        self.tokenizer = _load_tokenizer(opts.tokenizer) if opts.tokenizer else None
        self.start_text, self.start_reason = self._start_token(opts.start_token)
        self._ids: dict[str, int] = {}
        self.mode = "echo"
        self.forms_probed: dict[str, str] = {}  # form -> what the probe found
        self.served_models: list[str] = []
        self.alignment: Alignment | None = None
        self.server_version = ""
        if probe:
            self._probe()

    # -- identity ----------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        # every option that changes the stats returned: the store is keyed by this
        o, shift = self.options, (self.alignment.shift if self.alignment else "?")
        return (
            f"http-logprobs|{self.spec}|start={self.start_text!r}|shift={shift}|form={o.form}"
            f"|k={o.top_logprobs}/{o.max_top_logprobs}|moments={o.topk_moments}"
            f"|tokenizer={o.tokenizer}|by_id=first,ambiguous"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "fingerprint": self.fingerprint,
            "mode": self.mode,  # the form read: echo or prompt_logprobs (vLLM)
            "forms_probed": dict(self.forms_probed),
            "served_models": self.served_models,
            "alignment": self.alignment.describe() if self.alignment else None,
            "start_token": {"text": self.start_text, "reason": self.start_reason},
            "top_logprobs": self.options.top_logprobs,
            "max_top_logprobs": self.options.max_top_logprobs,
            "topk_moments_approximate": self.options.topk_moments,
            "tokenizer": self.options.tokenizer,
            "server": self.server_version,
            "ambiguous": {
                "option": self.options.ambiguous,
                "forced_token": self._forcing.peek("probe", "not probed (not needed)")
                or "honoured",
                "dropped_ids": {k: list(v) for k, v in self.dropped_ids.items()},
            },
            "answers_stored": self.cache is not None,
        }

    def usage(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._usage)

    def close(self) -> None:
        self._client.close()

    # -- tokens --------------------------------------------------------------------------------
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text (start token included); about 4 characters a token without a
        tokenizer (only used to plan batches)."""
        extra = 1 if self.start_text else 0
        if self.tokenizer is None:
            return [len(t) // 4 + 1 + extra for t in texts]
        return [len(self.tokenizer.encode(t, add_special_tokens=False)) + extra for t in texts]

    # -- scoring -------------------------------------------------------------------------------
    def score(self, requests: Sequence[ScoreRequest], *, progress: Any = None) -> list[TokenStats]:
        """One request per text (plus one per new context for its first token), in parallel."""
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            return list(pool.map(self._score_one, requests))

    def _score_one(self, req: ScoreRequest) -> TokenStats:
        context = self.start_text + (req.prefix or "")
        prompt = context + req.text
        where = f"{self.base_url}/completions (text {req.text[:30]!r})"
        if self.mode == "prompt_logprobs":
            return self._stats(self._prompt_logprob_rows(prompt, context, where))
        k = self.options.top_logprobs
        local = self._local_tokens(req.text)
        known = self._resolve_ambiguous(context, req.text, local, where)
        answer = self._echo(prompt, k, where)
        while True:
            first = self._first_candidates(context, k) if context else None
            try:
                rows = token_rows(
                    answer, prompt, context, self._shift(), first, where, self.start_text,
                    ambiguous=self._ambiguous(), asked=k, known=known,
                )  # fmt: skip
                break
            except MissingLogprob as err:
                if err.position == 0 and local is not None and self._forcing_note() is None:
                    # the first token, missing from its context's candidates: asked by id (one
                    # small request), not the whole text again with every candidate
                    known[0] = self._forced(context, req.text, local, 0, where)
                    continue
                if k >= self.options.max_top_logprobs:
                    raise
                k = self.options.max_top_logprobs  # one more request, not a ladder of them
                self._count("rerequested_more_candidates")
                answer = self._echo(prompt, k, where)
        self._check_local_tokens(req.text, rows, where)
        return self._stats(rows)

    def _start_token(self, option: str) -> tuple[str, str]:
        """The text put before every scored text, and why."""
        word = option.strip().lower()
        if word == "none":
            return "", "none: the first text token is context only"
        if word in ("auto", "bos"):
            if self.tokenizer is None:
                return "", (
                    f"{word} without a local tokenizer: none (give --model-arg tokenizer=SPEC or "
                    "start_token=TEXT to score the first token)"
                )
            from imprint.backends.start_token import choose_start_token

            chosen = choose_start_token(self.tokenizer, word)
            return chosen.text or "", chosen.reason
        return option, "given"


def _load_tokenizer(spec: str) -> Any:
    """A local tokenizer for ``spec`` (alias, gguf:PATH, folder, hub id), as the hf backend."""
    from transformers import AutoTokenizer

    from imprint.backends.models import materialize, resolve_model

    source = materialize(resolve_model(spec))
    return AutoTokenizer.from_pretrained(source.location)
