"""Text-only access to any OpenAI-compatible server (``/v1/completions``, ``/v1/chat/completions``).

- Before the first request, ``GET /v1/models``: a model name the server does not list is
  refused (naming the names it serves), and the server's dialect is read
  (:mod:`imprint.backends.http_sampling`): every request states the whole sampling law (temperature,
  top-k, top-p 1, min-p 0, no penalties, seed) in the server's own fields, so none of the server's
  defaults applies; what was sent and what the server said back go to the manifest.
- ``n`` samples per request (split into requests of at most ``max_n_per_request``); a server that
  returns fewer choices than asked is not retried: the client learns its choices per request and
  its useful concurrency from the first answers (:mod:`imprint.backends.http_adapt`).
- Up to ``max_concurrency`` requests in flight (a thread pool over one pooled HTTP client).
- Retries with exponential backoff and full jitter (``Retry-After`` honoured) on 429, 5xx,
  timeouts and connection errors; a 200 body that is not a completions answer (cut short, not
  JSON, no ``choices``) is asked once more, then refused in one line; other 4xx and bodies of the
  wrong shape
  (``text: null``, ``usage`` not an object, token counts not integers) fail at once with the
  reason. The first request that fails for good cancels every request still queued.
- The API key is read from the environment variable ``api_key_env`` when the backend is built;
  it is sent only in the ``Authorization`` header and never logged, repr'd or counted, and it is
  masked in any server answer an error quotes. ``base_url`` may not carry credentials, a query
  or a fragment (:func:`check_api_base`): it is written to the manifest.
- ``usage()``: requests, attempts, retries by reason, failures, prompt and completion tokens,
  answers served from the response cache.
- ``cache`` (a :class:`imprint.signals.cache.SignalCache`, optional): every answer is stored as it
  arrives, keyed by the fingerprint and the exact request body (seed included), so a killed run
  resumes without sending a request twice.

Chat endpoints get an instruction: continue the text (``task="continue"``) or, for SimMIA, give
only the next word (``task="next_word"``, the paper's way of asking a chat model for one word).
Needs ``httpx``: ``pip install 'llm-imprint[api]'``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from imprint.backends.base import SAMPLING, Backend, SamplingSettings
from imprint.backends.http_adapt import (
    Gate,
    ServerLimits,
    decode_limits,
    encode_limits,
    estimate_line,
    limits_key,
)
from imprint.backends.http_checks import (
    APIError,
    check_api_base,
    check_model,
    read_models,
)
from imprint.backends.http_sampling import (
    SERVERS,
    SamplingSpec,
    detect_dialect,
    known_ignored,
    sampling_fields,
)
from imprint.backends.http_transport import (
    RETRY_STATUS,
    RetryPolicy,
    Transport,
    _Cancelled,
    _retry_after,
)
from imprint.errors import ConfigError, MissingDependencyError

log = logging.getLogger(__name__)
__all__ = ["RETRY_STATUS", "APIError", "OpenAICompatibleBackend", "RetryPolicy", "_retry_after"]

MODES = ("completions", "chat")
INSTRUCTIONS: dict[str, str] = {
    "continue": (
        "Continue the following text. Reply with the continuation only, without repeating the "
        "text.\n\nText: {prompt}"
    ),
    "next_word": (
        "Predict the next word of the following text. Reply with exactly one word: the word "
        "that comes next. Do not repeat the text, do not explain.\n\nText: {prompt}"
    ),
    "answer": "{prompt}",  # the prompt is the whole instruction (DE-COP's question, paraphrasing)
}


class OpenAICompatibleBackend(Transport, Backend):
    """Samples text from an OpenAI-compatible API; see the module docstring.

    ``base_url`` ends with the API root, e.g. ``http://127.0.0.1:8000/v1``. ``server`` names the
    server's dialect (``auto``: read from ``GET /v1/models``; see
    :mod:`imprint.backends.http_sampling`). ``top_k`` is the top-k of calls that give none (an
    attack's own top-k wins); 0 or None = no top-k filter.
    """

    capabilities = frozenset({SAMPLING})
    # every prompt is its own HTTP request carrying the seed: its draws never depend on the batch
    seeds_per_prompt = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        name: str = "target",
        mode: str = "completions",
        api_key_env: str | None = "OPENAI_API_KEY",
        temperature: float = 1.0,
        top_k: int | None = None,
        max_concurrency: int = 8,
        max_n_per_request: int = 128,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        seed: int = 0,
        cache: Any = None,
        server: str = "auto",
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
        if server not in SERVERS:
            raise ConfigError(f"server must be one of {SERVERS}, got {server!r}")
        if max_concurrency < 1 or max_n_per_request < 1 or not timeout_s > 0:
            raise ConfigError("max_concurrency, max_n_per_request and timeout_s must be positive")
        check_api_base(base_url)
        try:
            import httpx
        except ImportError as err:
            raise MissingDependencyError("httpx", "api") from err
        self.base_url, self.model, self.name, self.mode = base_url.rstrip("/"), model, name, mode
        self.spec = f"{self.base_url}#{model}"
        self.api_key_env = api_key_env
        self.temperature, self.top_k = temperature, top_k
        self.max_concurrency, self.max_n_per_request = max_concurrency, max_n_per_request
        self.retry, self.timeout_s = retry or RetryPolicy(), timeout_s
        self.cache, self.server = cache, server
        self.dialect: str | None = None  # read at start-up
        self._server_facts: dict[str, Any] = {}
        self._ignored: dict[str, str] = {}  # sampling fields the server does not read: not sent
        self.limits = ServerLimits(max_concurrency)
        self._gate = Gate(max_concurrency)
        self._most_in_flight = max_concurrency  # of the requests being sent now
        self.planned_requests: int | None = None  # the run's total, when a plan set it
        self._call_stored = 0
        self._rng = random.Random(seed)
        self._lock, self._start_lock = threading.Lock(), threading.Lock()
        self._sent_laws: dict[str, dict[str, Any]] = {}
        self._reported: dict[str, set[str]] = {"model": set(), "system_fingerprint": set()}
        self._usage: dict[str, Any] = {
            "requests": 0,
            "attempts": 0,
            "retries": {},
            "failed": 0,
            "cancelled": 0,
            "samples": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached": 0,
            "stored": 0,
            "past_timeout": 0,  # answers awaited past timeout_s instead of sent again
        }
        key = os.environ.get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=max_concurrency),
        )

    @classmethod
    def from_choice(cls, choice: Any, context: Any) -> OpenAICompatibleBackend:
        """The backend of a resolved provider choice (``--api-base``, typed ``OpenAIOptions``)."""
        options = choice.options
        return cls(
            choice.api_base,
            choice.target,
            name=context.name,
            mode=options.mode,
            api_key_env=options.key_env,
            max_concurrency=options.concurrency,
            max_n_per_request=options.max_n_per_request,
            top_k=options.top_k,
            timeout_s=options.timeout,
            retry=RetryPolicy(max_retries=options.max_retries),
            seed=context.seed,
            cache=context.cache,
            server=options.server,
        )

    def __repr__(self) -> str:  # never shows the key, only where it comes from
        return (
            f"OpenAICompatibleBackend({self.base_url!r}, model={self.model!r}, mode={self.mode!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    @property
    def fingerprint(self) -> str:
        # law=whole: every attack's whole sampling law is sent (answers stored before were
        # drawn under the server's defaults and must not be served); server: a forced dialect
        return f"{self.spec}|{self.mode}|{self.temperature}|{self.top_k}|law=whole|{self.server}"

    def usage(self) -> dict[str, Any]:
        with self._lock:
            return {**self._usage, "retries": dict(self._usage["retries"])}

    def describe(self) -> dict[str, Any]:
        """The manifest entry: the server as read at start-up, the sampling laws sent (each as
        the fields of the request body), what the answers reported, the limits learned."""
        with self._lock:
            reported = {k: sorted(v) for k, v in self._reported.items() if v}
            sent = [self._as_sent(law) for law in self._sent_laws.values()]
        return {
            **super().describe(),
            "server": {"dialect": self.dialect, **self._server_facts},
            "sampling_sent": sent,
            "server_reported": reported,
            "limits": self.limits.describe(),
        }

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- start-up --------------------------------------------------------------------------------
    def start(self) -> None:
        """Once, before the first request: check the model name against ``GET /v1/models``,
        read the server's dialect, and load the choices per request a previous run learned."""
        with self._start_lock:
            if self.dialect is not None:
                return
            listed, unlisted = read_models(
                self._client, self.base_url, self._quote, self.api_key_env
            )
            names = check_model(listed, self.model, self.base_url)
            dialect, reason = (
                (self.server, "given (--model-arg server)")
                if self.server != "auto"
                else detect_dialect(listed, self.base_url)
            )
            if unlisted and self.server == "auto":  # said where a field is refused for it
                reason = f"{unlisted}, so the server's sampling fields are unknown: {reason}"
            self._ignored = known_ignored(listed, dialect)
            self._server_facts = {
                "detected_by": reason,
                "served_models": names[:50] or None,
                "known_ignored": self._ignored or None,  # not sent; see http_sampling
            }
            if self.cache is not None:
                key = limits_key(self.base_url, self.model, self.mode)
                learned = decode_limits(self.cache.get_response(key))
                if learned is not None:
                    self.limits.choices, self.limits.choices_checked = learned, True
            self.dialect = dialect

    # -- sampling --------------------------------------------------------------------------------
    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        """``settings.n`` continuations per prompt, shape (len(prompts), n), in prompt order."""
        asked = settings.with_defaults(self.temperature, self.top_k)
        temperature, top_k, n = asked.temperature, asked.top_k, asked.n
        assert temperature is not None
        self.start()
        assert self.dialect is not None
        law = SamplingSpec(temperature, (top_k or 0) if temperature > 0 else 0)
        try:  # refused here, before any request
            fields = sampling_fields(law, self.dialect, None)
        except ConfigError as err:
            raise ConfigError(f"{err} (server: {self._server_facts.get('detected_by')})") from None
        with self._lock:
            self._sent_laws.setdefault(json.dumps(fields, sort_keys=True), fields)
        context = (prompts, asked.max_tokens, asked.stop, fields, asked.task, asked.seed)
        with self._lock:  # what the store held of this call's answers so far, if it fails
            self._call_stored = self._usage["stored"] + self._usage["cached"]
        pending = [(p, s, k) for p in range(len(prompts)) for s, k in self._chunks(0, n)]
        got: dict[tuple[int, int], list[str]] = {}
        while pending:
            pending = [(p, a, b) for p, s, k in pending for a, b in self._chunks(s, k)]
            size, concurrency = self.limits.next_wave(len(pending), n > 1)
            wave, pending = pending[:size], pending[size:]
            answers = self._wave(wave, concurrency, context, len(pending))
            for (p, s, k), texts in zip(wave, answers, strict=True):
                got[(p, s)] = texts
                if len(texts) < k:  # the server's choices per request: ask the rest
                    self._learn_choices(len(texts), k)
                    pending[:0] = [
                        (p, a, b) for a, b in self._chunks(s + len(texts), k - len(texts))
                    ]
                elif k > 1:
                    self.limits.choices_checked = True
        by_prompt: list[list[tuple[int, list[str]]]] = [[] for _ in prompts]
        for (p, s), texts in got.items():  # one pass, not one scan of ``got`` per prompt
            by_prompt[p].append((s, texts))
        return [[t for _, texts in sorted(parts) for t in texts] for parts in by_prompt]

    def _chunks(self, start: int, count: int) -> list[tuple[int, int]]:
        """(first sample, samples) of the requests for samples start .. start + count - 1."""
        step = min(self.max_n_per_request, self.limits.choices or self.max_n_per_request)
        return [(i, min(step, start + count - i)) for i in range(start, start + count, step)]

    def _wave(
        self,
        wave: list[tuple[int, int, int]],
        concurrency: int,
        context: tuple[Any, ...],
        queued: int,
    ) -> list[list[str]]:
        """Send one wave of requests and learn the server's parallelism from its timing."""
        prompts, max_tokens, stop, fields, task, seed = context
        bodies = []
        for p, s, k in wave:
            body = self._body(prompts[p], k, max_tokens, stop, fields, task)
            if seed is not None:
                body["seed"] = seed + p * 1_000 + s
            bodies.append(body)
        before = self.usage()
        started = time.perf_counter()
        finished: list[float] = []  # each answer's arrival, for the server's pattern
        results = self._request_all(bodies, concurrency, queued, finished)
        wall_s, after = time.perf_counter() - started, self.usage()
        finishes = tuple(sorted(t - started for t in finished))
        sent = after["requests"] - before["requests"]
        attempts = after["attempts"] - before["attempts"]
        full = len(wave) == concurrency  # a smaller wave says nothing of the next size
        if self.limits.observe(len(wave), sent, wall_s, full, attempts, finishes):
            assert self.limits.concurrency is not None
            self._gate.set(self.limits.concurrency)
            log.warning("%s", self.estimate_line())
        return results

    def estimate_line(self) -> str:
        """What the first answers said about the server, and the time the rest should take."""
        where = f"{self.name} at {self.base_url}"
        return estimate_line(where, self.limits, self.planned_requests, self._usage["requests"])

    def _learn_choices(self, got: int, asked: int) -> None:
        with self._lock:
            first = self.limits.choices is None
            self.limits.choices = min(got, self.limits.choices or got)
            self.limits.choices_checked = True
        if first:
            log.warning(
                "%s returned %d choice(s) for n=%d: it ignores or caps n, so requests now ask "
                "for at most %d (no retry; --model-arg max_n_per_request=%d says so up front)",
                self.base_url,
                got,
                asked,
                got,
                got,
            )
        if self.cache is not None:
            key = limits_key(self.base_url, self.model, self.mode)
            self.cache.put_response(key, encode_limits(self.limits.choices or got))

    def _body(
        self,
        prompt: str,
        n: int,
        max_tokens: int,
        stop: Sequence[str] | None,
        fields: dict[str, Any],
        task: str,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "n": n, "max_tokens": max_tokens}
        body |= self._as_sent(fields)
        if self.mode == "chat":
            content = INSTRUCTIONS[task].format(prompt=prompt)
            body["messages"] = [{"role": "user", "content": content}]
        else:
            body["prompt"] = prompt
        if stop:
            body["stop"] = list(stop)[:4]
        return body

    def _as_sent(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The sampling ``fields`` a request carries: without those the server does not read."""
        return {k: v for k, v in fields.items() if k not in self._ignored}

    def _request_all(
        self,
        bodies: list[dict[str, Any]],
        concurrency: int,
        queued: int = 0,
        finished: list[float] | None = None,
    ) -> list[list[str]]:
        """Each body's texts (at most its ``n``), in order, ``concurrency`` requests in flight at
        most (``finished`` gets each answer's ``perf_counter`` time). The first request that
        fails for good stops the others (queued ones, and the ``queued`` requests of later
        waves, are not sent; retrying ones stop) and its error is raised, once, saying what was
        stored."""
        abort, failures = threading.Event(), list[BaseException]()

        def job(body: dict[str, Any]) -> list[str]:
            try:
                texts = self._request(body, abort)
                if finished is not None:
                    finished.append(time.perf_counter())  # list.append is atomic
                return texts
            except _Cancelled:
                raise
            except BaseException as err:
                failures.append(err)  # in the order they happened
                abort.set()
                raise

        self._most_in_flight = max(1, min(concurrency, len(bodies)))  # bounds a timeout's wait
        with ThreadPoolExecutor(max_workers=self._most_in_flight) as pool:
            futures = [pool.submit(job, body) for body in bodies]
            wait(futures, return_when=FIRST_EXCEPTION)
            abort.set()  # a no-op when every request succeeded
            for future in futures:
                future.cancel()
        if not failures:
            return [future.result() for future in futures]
        unsent = queued + sum(future.cancelled() or _was_cancelled(future) for future in futures)
        self._count("cancelled", unsent)
        first = failures[0]
        if not isinstance(first, APIError):
            raise first
        note = f"; {unsent} other requests of this call were cancelled" if unsent else ""
        raise APIError(f"{first}{note}; {self._stored_note(self._call_stored)}") from None

    def _stored_note(self, before: int) -> str:
        """What a rerun will not send again: the answers in the store, stored by this process or
        read from it (a rerun answered from the store), ``before`` of them before this call
        (never claimed when none were)."""
        if self.cache is None:
            return "no answer store is attached, so a rerun sends every request again"
        with self._lock:
            stored, hits = self._usage["stored"], self._usage["cached"]
        if stored + hits == 0:
            return "no answer had been received, so nothing is stored"
        read = f" ({hits} of them read from the store)" if hits else ""
        return (
            f"{stored + hits - before} answers of this call and {before} earlier ones are "
            f"stored{read}, so a rerun sends only the rest"
        )

    def _request(self, body: dict[str, Any], abort: threading.Event) -> list[str]:
        """One request's ``n`` texts: from the response cache, else POSTed (and then cached)."""
        if self.cache is None:
            return self._send(body, abort)
        key = self._key(body)
        texts = self.cache.get_response(key)
        if texts is not None and len(texts) == body["n"]:
            self._count("cached")
            return texts
        texts = self._send(body, abort)
        if len(texts) < body["n"]:  # a server that caps n: this is its answer to n = len(texts)
            key = self._key({**body, "n": len(texts)})
        self.cache.put_response(key, texts)
        self._count("stored")
        return texts

    def _key(self, body: dict[str, Any]) -> str:
        return hashlib.sha256(
            f"{self.fingerprint}|{json.dumps(body, sort_keys=True)}".encode()
        ).hexdigest()


def _was_cancelled(future: Future[Any]) -> bool:
    return not future.cancelled() and isinstance(future.exception(), _Cancelled)
