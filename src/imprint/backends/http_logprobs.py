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
so a stopped run resumes without asking any stored answer again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.backends import ambiguous_tokens as amb
from imprint.backends import http_prompt_logprobs as plp
from imprint.backends.alignment import (
    PROBE_TEXT,
    Alignment,
    EchoAnswer,
    MissingLogprob,
    TokenRow,
    ambiguous_texts,
    decode_answer,
    detect_shift,
    local_token_texts,
    rank_of,
    server_text,
    token_rows,
    topk_moments,
)
from imprint.backends.base import TOKEN_LOGPROBS, Backend, ScoreRequest, TokenStats
from imprint.backends.http_answer_store import Once, answer_key
from imprint.backends.http_checks import (
    check_api_base,
    check_model,
    first_choice,
    list_models,
    mask_secret,
    snippet,
)
from imprint.backends.http_transport import RETRY_STATUS, RetryPolicy, _retry_after
from imprint.errors import ConfigError, ImprintError, MissingDependencyError

log = logging.getLogger(__name__)


FORMS = ("auto", "echo", "prompt_logprobs")
AMBIGUOUS = ("resolve", "drop", "resolve_or_drop")


class ServerError(ImprintError):
    """The server refused a log-prob request or kept failing."""


@dataclass(frozen=True)
class LogprobOptions:
    """``openai-logprobs``: prompt log-probs from an OpenAI-compatible completions server."""

    top_logprobs: int = 5  # candidates asked per position (OpenAI caps it at 5)
    # a shifted answer missing a token's log p is asked once more with this many candidates
    # (llama-cpp-python needs the vocabulary size, e.g. 49152, for exact scores)
    max_top_logprobs: int = 200
    tokenizer: str | None = None  # a local tokenizer of the served model (alias, folder, hub id)
    start_token: str = "auto"  # auto (the tokenizer's; none without one), none, or literal text
    topk_moments: bool = False  # fill mean/var of log p from the top-k (min_k_pp_topk)
    # auto: vLLM's prompt_logprobs when the server answers it, else echo + logprobs
    form: str = "auto"
    # a token read by text whose text several ids render to (needs tokenizer): resolve (asked
    # by id, one forced request each), drop (the text is left out, counted), or resolve_or_drop
    ambiguous: str = "resolve"
    key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout: float = 600.0
    max_retries: int = 6

    EXAMPLES: ClassVar[dict[str, str]] = {
        "top_logprobs": "20",
        "max_top_logprobs": "49152",
        "tokenizer": "smollm2-135m",
        "start_token": "<|endoftext|>",
        "topk_moments": "true",
        "form": "prompt_logprobs",
        "ambiguous": "resolve_or_drop",
        "key_env": "MY_API_KEY",
        "concurrency": "1",
        "timeout": "300",
        "max_retries": "3",
    }

    def __post_init__(self) -> None:
        from imprint.backends.options import OptionError

        if self.top_logprobs < 1:
            raise OptionError("top_logprobs", "an integer >= 1", self.top_logprobs)
        if self.max_top_logprobs < self.top_logprobs:
            raise OptionError(
                "max_top_logprobs", "an integer >= top_logprobs", self.max_top_logprobs
            )
        if self.form not in FORMS:
            raise OptionError("form", " | ".join(FORMS), self.form)
        if self.ambiguous not in AMBIGUOUS:
            raise OptionError("ambiguous", " | ".join(AMBIGUOUS), self.ambiguous)
        if self.concurrency < 1:
            raise OptionError("concurrency", "an integer >= 1", self.concurrency)
        if not self.timeout > 0:
            raise OptionError("timeout", "seconds > 0", self.timeout)
        if self.max_retries < 0:
            raise OptionError("max_retries", "an integer >= 0", self.max_retries)


class HTTPLogprobBackend(Backend):
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

    # -- ambiguous token texts ---------------------------------------------------------------
    def _local_tokens(self, text: str) -> amb.TextTokens | None:
        if self.tokenizer is None:
            return None
        return amb.text_tokens(self.tokenizer, text, ambiguous_texts(self.tokenizer))

    def _read_by_text(self, local: amb.TextTokens) -> tuple[int, ...]:
        """The ambiguous positions whose log p this server's answer gives by text: every token
        on a shifted server, only the first (its context's candidates) on an aligned one."""
        if self.mode != "echo":
            return ()
        if self._shift() == 1:
            return local.ambiguous
        return tuple(i for i in local.ambiguous if i == 0)

    def _blocked(self, local: amb.TextTokens) -> str | None:
        """Why this text cannot be scored whatever is asked (None: it can)."""
        if self.mode != "echo":
            return None
        if any(server_text(self.tokenizer, local.ids[i]) == "" for i in local.ambiguous):
            return amb.EMPTY_REASON  # the echo answer's tokens cannot spell the text
        if set(self._read_by_text(local)) & set(local.unsplit):
            return amb.UNSPLIT_REASON
        return None

    def _resolve_ambiguous(
        self, context: str, text: str, local: amb.TextTokens | None, where: str
    ) -> dict[int, float]:
        """Position -> log p asked by id, for this text's ambiguous tokens read by text."""
        if local is None or not (positions := self._read_by_text(local)):
            return {}
        blocked = self._blocked(local)
        if self.options.ambiguous == "drop" or blocked:
            shown = ", ".join(repr(local.texts[i]) for i in positions[:3])
            raise amb.TokenAmbiguous(
                f"{where}: {len(positions)} token(s) of this text ({shown}) render to a text "
                f"other token ids share; {blocked or 'ambiguous=drop'}: such texts are left out "
                "before scoring by imprint run (counted, ids in the manifest); here the text "
                "is refused. --model-arg ambiguous=resolve asks each such token by id"
            )
        note = self._forcing_note()
        if note is not None:
            raise amb.TokenAmbiguous(amb.cannot_force(where, note, len(positions)))
        return {i: self._forced(context, text, local, i, where) for i in positions}

    def _forced(self, context: str, text: str, local: amb.TextTokens, i: int, where: str) -> float:
        """Token ``i``'s log p by id: the text before it completed with that token forced."""
        token_id = local.ids[i]
        body = amb.forced_body(self.model, context + text[: local.starts[i]], token_id, 1)
        at = f"{where} token {i} {local.texts[i]!r} forced"
        answer = EchoAnswer.from_choice(first_choice(self._post("completions", body, at), at), at)
        self._count("forced_token_requests")
        return amb.forced_logprob(answer, server_text(self.tokenizer, token_id), at)

    def _forcing_note(self) -> str | None:
        """None when the server honours a forced token and reports its unbiased log p by id
        (probed once, before the first text that needs it); else why not."""
        return self._forcing.get("probe", self._probe_forcing)  # type: ignore[no-any-return]

    def _probe_forcing(self) -> str | None:
        if self.tokenizer is None:
            return "no local tokenizer to name token ids (--model-arg tokenizer=SPEC)"
        where = f"{self.base_url}/completions (forced-token probe)"
        prompt, expected, forced = amb.forcing_probe(self.tokenizer, self.start_text)
        body = amb.forced_body(self.model, prompt, forced, 5)
        try:
            data = self._post("completions", body, where)
            answer = EchoAnswer.from_choice(first_choice(data, where), where)
        except (ServerError, ConfigError) as err:
            return f"the probe was refused ({str(err)[:160]})"
        return amb.check_forcing(
            answer, server_text(self.tokenizer, forced), server_text(self.tokenizer, expected)
        )

    def unscorable(self, texts: Sequence[str]) -> dict[int, str]:
        """Before any text is asked (``imprint run`` calls it on the samples): index -> why,
        for the texts ``ambiguous=`` leaves out; a text that needs what ``ambiguous=resolve``
        cannot give is refused here, naming the option that leaves it out."""
        if self.tokenizer is None or self.mode != "echo":
            return {}
        table = ambiguous_texts(self.tokenizer)
        need: list[int] = []
        out: dict[int, str] = {}
        blocked: dict[int, str] = {}
        for n, text in enumerate(texts):
            local = amb.text_tokens(self.tokenizer, text, table)
            if not self._read_by_text(local) and self._blocked(local) is None:
                continue
            why = self._blocked(local)
            if self.options.ambiguous == "drop":
                out[n] = why or amb.DROP_REASON
            elif why is not None:
                blocked[n] = why
            else:
                need.append(n)
        note = self._forcing_note() if need else None
        if note is not None and self.options.ambiguous == "resolve_or_drop":
            out.update({n: amb.UNFORCED_REASON for n in need})
        elif note is not None:
            raise amb.TokenAmbiguous(amb.cannot_force(self.base_url, note, len(need), texts=True))
        if blocked and self.options.ambiguous == "resolve":
            first = min(blocked)
            raise amb.TokenAmbiguous(
                f"{self.base_url}: {len(blocked)} of {len(texts)} texts cannot be scored on this "
                f"server ({blocked[first]}, e.g. {texts[first][:60]!r}); nothing was asked. "
                "--model-arg ambiguous=resolve_or_drop leaves them out (counted, ids in the "
                "manifest) and asks the other ambiguous tokens by id"
            )
        out.update(blocked)
        return out

    def _ambiguous(self) -> dict[str, tuple[int, ...]] | None:
        """Token texts several ids render to (from the local tokenizer; None without one)."""
        return ambiguous_texts(self.tokenizer) if self.tokenizer is not None else None

    def _shift(self) -> int:
        assert self.alignment is not None, "probe() first"
        return self.alignment.shift

    def _stats(self, rows: Sequence[TokenRow]) -> TokenStats:
        n = len(rows)
        logp = np.array([r.logp for r in rows], np.float32)
        rank = np.array(
            [r.rank if r.rank is not None else rank_of(r.logp, r.candidates, r.text) for r in rows],
            np.int32,
        )
        best = [max(r.candidates, key=r.candidates.__getitem__) for r in rows]
        top1 = np.array(
            [
                r.best_logp if r.best_logp is not None else r.candidates[b]
                for r, b in zip(rows, best, strict=True)
            ],
            np.float32,
        )
        mean = np.full(n, np.nan, np.float32)
        var = np.full(n, np.nan, np.float32)
        if self.options.topk_moments:
            moments = [topk_moments(r.candidates) for r in rows]
            mean[:] = [m for m, _ in moments]
            var[:] = [v for _, v in moments]
        ids = [r.token_id if r.token_id is not None else self._token_id(r.text) for r in rows]
        argmax = [
            r.best_id if r.best_id is not None else self._token_id(b)
            for r, b in zip(rows, best, strict=True)
        ]
        return TokenStats(
            token_ids=np.array(ids, np.int32),
            logp=logp,
            mean_logp=mean,
            var_logp=var,
            rank=rank,
            argmax=np.array(argmax, np.int32),
            top1_logp=top1,
        )

    def _token_id(self, text: str) -> int:
        """The local tokenizer's id of a token text, else a stable hash of it (never -1)."""
        if self.tokenizer is not None:
            if not self._ids:
                vocab = range(len(self.tokenizer))
                self._ids = {self.tokenizer.decode([i]): i for i in reversed(vocab)}
            found = self._ids.get(text)
            if found is not None:
                return found
        return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF

    def _check_local_tokens(self, text: str, rows: Sequence[TokenRow], where: str) -> None:
        """With a local tokenizer: the server must tokenise the text as it does."""
        if self.tokenizer is None:
            return
        local = local_token_texts(self.tokenizer, text)
        server = [r.text for r in rows]
        if local != server:
            i = next(
                (j for j, (a, b) in enumerate(zip(local, server, strict=False)) if a != b),
                min(len(local), len(server)),
            )
            raise ConfigError(
                f"{where}: the server tokenises the text differently from the local tokenizer "
                f"{self.options.tokenizer!r} from token {i} (local {local[i : i + 3]!r}, server "
                f"{server[i : i + 3]!r}; {len(local)} vs {len(server)} tokens): is it the same "
                "model? Drop --model-arg tokenizer or give the served model's tokenizer"
            )

    # -- probing -------------------------------------------------------------------------------
    def _probe(self) -> None:
        """Once, before any text: the model name, which form of prompt log-probs the server
        answers (vLLM's prompt_logprobs, else echo + logprobs), and how it is aligned."""
        self._check_model()
        context = self.start_text
        prompt = context + PROBE_TEXT
        if self.options.form in ("auto", "prompt_logprobs") and self._probe_prompt_logprobs(
            prompt, context
        ):
            return
        where = f"{self.base_url}/completions (alignment probe)"
        try:
            data = self._post("completions", self._body(prompt, self.options.top_logprobs), where)
            answer = EchoAnswer.from_choice((data.get("choices") or [None])[0], where)
        except (ServerError, ConfigError) as err:
            tried = "; ".join(f"{k}: {v}" for k, v in self.forms_probed.items())
            raise ConfigError(f"{err}{f' ({tried})' if tried else ''}") from None
        self.forms_probed["echo"] = "answered"
        self.server_version = str(data.get("system_fingerprint") or "")
        self.alignment = detect_shift(answer, prompt, context, where, self.start_text)
        if self.alignment.shift:
            log.warning(
                "%s: the server's prompt log-probs are shifted by one token (%s); correcting",
                self.base_url,
                self.alignment.example or "see the manifest",
            )

    def _check_model(self) -> None:
        """``GET /v1/models``: a model the server does not list is refused before any work
        (llama-cpp-python answers any name with the model it serves)."""
        try:
            listed = list_models(self._client, self.base_url, snippet, self.options.key_env)
        except ImprintError as err:
            raise ConfigError(str(err)) from None
        self.served_models = check_model(listed, self.model, self.base_url)

    def _probe_prompt_logprobs(self, prompt: str, context: str) -> bool:
        """Ask in vLLM's form; True (mode prompt_logprobs) when it answers aligned entries."""
        where = f"{self.base_url}/completions (prompt_logprobs probe)"
        body = plp.body(self.model, prompt, self.options.top_logprobs)
        try:
            data = self._post("completions", body, where)
            choice = (data.get("choices") or [None])[0]
            entries = plp.entries_of(choice)
        except (ServerError, ConfigError) as err:
            entries, found = None, f"refused ({str(err)[:120]})"
        else:
            found = "answered" if entries is not None else "no prompt_logprobs in the answer"
        self.forms_probed["prompt_logprobs"] = found
        if entries is None:
            if self.options.form == "prompt_logprobs":
                raise ConfigError(
                    f"{where}: form=prompt_logprobs asked, but the server {found}; drop "
                    "--model-arg form to read echo + logprobs"
                )
            return False
        ids = plp.prompt_ids(choice, self.tokenizer, prompt, len(entries), where)
        evidence = plp.check_aligned(entries, ids, self.tokenizer, context, where)
        self.alignment = Alignment(
            0, evidence["probe_positions"], evidence["argmax_is_this_token"],
            evidence["argmax_is_next_token"], "",
        )  # fmt: skip
        self.mode = "prompt_logprobs"
        self.server_version = str(data.get("system_fingerprint") or "")
        return True

    def _prompt_logprob_rows(self, prompt: str, context: str, where: str) -> list[TokenRow]:
        body = plp.body(self.model, prompt, self.options.top_logprobs)
        data = self._post("completions", body, where)
        choice = (data.get("choices") or [None])[0]
        entries = plp.entries_of(choice)
        if entries is None:
            raise ConfigError(f"{where}: the answer has no prompt_logprobs (it had at the probe)")
        ids = plp.prompt_ids(choice, self.tokenizer, prompt, len(entries), where)
        return plp.rows(entries, ids, plp.first_scored(self.tokenizer, ids, context, where), where)

    def _first_candidates(self, context: str, k: int) -> dict[str, float]:
        """The candidates for the token after ``context``: asked once per context and k, however
        many texts ask at once (they wait for the one answer)."""
        found = self._first.get(f"{k}|{context}", lambda: self._ask_first(context, k))
        return dict(found)

    def _ask_first(self, context: str, k: int) -> dict[str, float]:
        where = f"{self.base_url}/completions (context {context[-30:]!r})"
        body = {**self._body(context, k), "echo": False}
        answer = EchoAnswer.from_choice(
            first_choice(self._post("completions", body, where), where), where
        )
        found = answer.top[0] if answer.top else None
        if not found:
            raise ConfigError(f"{where}: no candidates for the first generated token")
        return dict(found)

    def _echo(self, prompt: str, k: int, where: str) -> EchoAnswer:
        data = self._post("completions", self._body(prompt, k), where)
        return EchoAnswer.from_choice(first_choice(data, where), where)

    def _body(self, prompt: str, k: int) -> dict[str, Any]:
        # max_tokens 1, not 0: llama-cpp-python reads 0 as "until the context is full"
        return {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": k,
        }

    # -- HTTP ----------------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any], where: str) -> dict[str, Any]:
        """The JSON answer to ``body``: from the run's store when it holds it, else POSTed
        (retrying 429, 5xx and connection errors, not timeouts) and stored as it arrives."""
        key = answer_key(self.spec, path, body)
        if self.cache is not None:
            stored = self.cache.get_response(key)
            if stored is not None and len(stored) == 1:
                data = decode_answer(stored[0])
                if isinstance(data, dict):
                    self._count("cached")
                    return data
        url = f"{self.base_url}/{path}"
        for attempt in range(self._retry.max_retries + 1):
            reason, hint = self._attempt(url, body, where)
            if isinstance(reason, tuple):
                data, raw = reason
                self._count("requests")
                if self.cache is not None:
                    self.cache.put_response(key, [raw])
                    self._count("stored")
                return data
            if attempt == self._retry.max_retries:
                break
            self._count("retries")
            with self._lock:
                pause = self._retry.delay(attempt, self._rng, hint)
            log.warning("retrying %s after %s (%.2fs)", url, reason, pause)
            time.sleep(pause)
        raise ServerError(
            f"{where}: gave up after {self._retry.max_retries + 1} attempts (last: {reason}); "
            "check the server, or raise --model-arg max_retries / timeout"
        )

    def _attempt(
        self, url: str, body: dict[str, Any], where: str
    ) -> tuple[tuple[dict[str, Any], str] | str, float | None]:
        httpx = self._httpx
        try:
            response = self._client.post(url, json=body)
        except httpx.TimeoutException:
            # not retried: a server that works one request at a time would still be computing
            # the abandoned one, and each retry would queue behind it
            raise ServerError(
                f"{where}: no answer within {self.options.timeout:g} s (not retried: the server "
                "may still be computing it); raise --model-arg timeout=SECONDS (a shifted "
                "server's full-vocabulary answers take minutes on a CPU)"
            ) from None
        except httpx.TransportError as err:
            return f"connection error ({type(err).__name__})", None
        if response.status_code in RETRY_STATUS:
            return str(response.status_code), _retry_after(response.headers)
        if response.status_code >= 400:
            raise ServerError(
                f"{where} answered {response.status_code}: "
                f"{snippet(mask_secret(response.text, self._key))}{_too_long_hint(response)}"
            )
        try:
            data = decode_answer(response.content)
        except ValueError:
            return "malformed body", None
        if not isinstance(data, dict):
            return "malformed body", None
        return (data, response.text), None

    def _count(self, key: str) -> None:
        with self._lock:
            self._usage[key] += 1

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


def _too_long_hint(response: Any) -> str:
    """The fix for a text longer than the server's context window (vLLM, llama-cpp-python and
    OpenAI all say "maximum context length"): the served backend takes no --max-length, so the
    text is shortened in the data or the server given a longer context."""
    if response.status_code == 400 and "context length" in response.text.lower():
        return (
            "; the text is longer than the server's context window: shorten the data's texts "
            "(--truncate N words) or serve a longer context (llama-cpp-python: --n_ctx)"
        )
    return ""
