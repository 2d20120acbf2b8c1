"""Text-only access to any OpenAI-compatible server (``/v1/completions``, ``/v1/chat/completions``).

- ``n`` samples per request (split into requests of at most ``max_n_per_request``).
- Up to ``max_concurrency`` requests in flight (a thread pool over one pooled HTTP client).
- Retries with exponential backoff and full jitter (``Retry-After`` honoured) on 429, 5xx,
  timeouts, connection errors and truncated bodies; other 4xx and bodies of the wrong shape
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
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from imprint.backends.base import SAMPLING, Backend
from imprint.backends.http_checks import (
    SHAPE_FIX,
    check_api_base,
    choice_index,
    mask_secret,
    short,
    snippet,
    usage_tokens,
)
from imprint.backends.text import TASKS, Task, check_sample_args
from imprint.errors import ConfigError, ImprintError, MissingDependencyError

log = logging.getLogger(__name__)

MODES = ("completions", "chat")
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
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


class APIError(ImprintError):
    """The server refused or kept failing; the message says which request and why."""


class _Retry(Exception):
    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.wait = reason, wait


class _Cancelled(Exception):
    """Another request of the same call failed for good: this one is not sent (again)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: sleep ~ U(0, min(cap, base * 2**attempt)), ``max_retries`` times."""

    max_retries: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random, hint: float | None) -> float:
        if hint is not None:
            return min(max(hint, 0.0), self.cap_s)
        return rng.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


class OpenAICompatibleBackend(Backend):
    """Samples text from an OpenAI-compatible API; see the module docstring.

    ``base_url`` ends with the API root, e.g. ``http://127.0.0.1:8000/v1``. ``top_k`` is sent
    only when the backend is built with one (vLLM and llama.cpp servers accept it, OpenAI rejects
    it); then a per-call ``top_k`` overrides it, otherwise per-call values are not sent.
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
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
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
        self.cache = cache
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
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
        }
        key = os.environ.get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=max_concurrency),
        )

    def __repr__(self) -> str:  # never shows the key, only where it comes from
        return (
            f"OpenAICompatibleBackend({self.base_url!r}, model={self.model!r}, mode={self.mode!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    @property
    def fingerprint(self) -> str:
        return f"{self.spec}|{self.mode}|{self.temperature}|{self.top_k}"

    def usage(self) -> dict[str, Any]:
        with self._lock:
            return {**self._usage, "retries": dict(self._usage["retries"])}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sampling --------------------------------------------------------------------------------
    def sample(
        self,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        stop: Sequence[str] | None = None,
        *,
        seed: int | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        task: Task = "continue",
    ) -> list[list[str]]:
        """``n`` continuations per prompt, shape (len(prompts), n), in prompt order."""
        temperature = self.temperature if temperature is None else temperature
        top_k = None if self.top_k is None else (self.top_k if top_k is None else top_k)
        check_sample_args(n, max_tokens, temperature, top_k)
        if task not in TASKS:
            raise ConfigError(f"task must be one of {TASKS}, got {task!r}")
        jobs = []
        for p, prompt in enumerate(prompts):
            for start in range(0, n, self.max_n_per_request):
                k = min(self.max_n_per_request, n - start)
                body = self._body(prompt, k, max_tokens, stop, temperature, top_k, task)
                if seed is not None:
                    body["seed"] = seed + p * 1_000 + start
                jobs.append((p, body))
        results = self._request_all([body for _, body in jobs])
        out: list[list[str]] = [[] for _ in prompts]
        for (p, _), texts in zip(jobs, results, strict=True):
            out[p].extend(texts)
        return out

    def _body(
        self,
        prompt: str,
        n: int,
        max_tokens: int,
        stop: Sequence[str] | None,
        temperature: float,
        top_k: int | None,
        task: str,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if self.mode == "chat":
            content = INSTRUCTIONS[task].format(prompt=prompt)
            body["messages"] = [{"role": "user", "content": content}]
        else:
            body["prompt"] = prompt
        if stop:
            body["stop"] = list(stop)[:4]
        if top_k and temperature > 0:
            body["top_k"] = top_k
        return body

    def _request_all(self, bodies: list[dict[str, Any]]) -> list[list[str]]:
        """Each body's texts, in order. The first request that fails for good stops the others
        (queued ones are not sent, retrying ones stop) and its error is raised, once."""
        abort, failures = threading.Event(), list[BaseException]()

        def job(body: dict[str, Any]) -> list[str]:
            try:
                return self._request(body, abort)
            except _Cancelled:
                raise
            except BaseException as err:
                failures.append(err)  # in the order they happened
                abort.set()
                raise

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures = [pool.submit(job, body) for body in bodies]
            wait(futures, return_when=FIRST_EXCEPTION)
            abort.set()  # a no-op when every request succeeded
            for future in futures:
                future.cancel()
        if not failures:
            return [future.result() for future in futures]
        unsent = sum(future.cancelled() or _was_cancelled(future) for future in futures)
        self._count("cancelled", unsent)
        first = failures[0]
        if not isinstance(first, APIError):
            raise first
        note = f"; {unsent} other requests of this call were cancelled" if unsent else ""
        if self.cache is not None:
            note += "; the answers received are cached, so a rerun sends only the rest"
        raise APIError(f"{first}{note}") from None

    def _request(self, body: dict[str, Any], abort: threading.Event) -> list[str]:
        """One request's ``n`` texts: from the response cache, else POSTed (and then cached)."""
        if self.cache is None:
            return self._send(body, abort)
        key = hashlib.sha256(
            f"{self.fingerprint}|{json.dumps(body, sort_keys=True)}".encode()
        ).hexdigest()
        texts = self.cache.get_response(key)
        if texts is not None and len(texts) == body["n"]:
            self._count("cached")
            return texts
        texts = self._send(body, abort)
        self.cache.put_response(key, texts)
        return texts

    def _send(self, body: dict[str, Any], abort: threading.Event) -> list[str]:
        """POST one request, retrying transient failures; returns its ``n`` texts."""
        url = f"{self.base_url}/{'chat/completions' if self.mode == 'chat' else 'completions'}"
        attempt = 0
        while True:
            if abort.is_set():
                raise _Cancelled
            self._count("attempts")
            try:
                texts = self._post(url, body)
            except _Retry as retry:
                if attempt >= self.retry.max_retries:
                    self._count("failed")
                    raise APIError(self._gave_up(url, attempt + 1, retry.reason)) from None
                self._count_retry(retry.reason)
                with self._lock:
                    pause = self.retry.delay(attempt, self._rng, retry.wait)
                log.warning(
                    "retrying %s after %s (attempt %d, %.2fs)",
                    url,
                    retry.reason,
                    attempt + 1,
                    pause,
                )
                if abort.wait(pause):  # another request failed for good meanwhile
                    raise _Cancelled from None
                attempt += 1
                continue
            except APIError:
                self._count("failed")
                raise
            self._count("requests")
            return texts

    def _gave_up(self, url: str, attempts: int, reason: str) -> str:
        return (
            f"{url}: gave up after {attempts} attempts (last: {reason}); raise --api-max-retries "
            f"(now {self.retry.max_retries}) or, if requests time out, --api-timeout (now "
            f"{self.timeout_s:g} s), or check the server"
        )

    def _post(self, url: str, body: dict[str, Any]) -> list[str]:
        httpx = self._httpx
        try:
            response = self._client.post(url, json=body)
        except httpx.TimeoutException:
            raise _Retry("timeout") from None
        except httpx.TransportError as err:
            raise _Retry(f"connection error ({type(err).__name__})") from None
        if response.status_code in RETRY_STATUS:
            raise _Retry(str(response.status_code), _retry_after(response.headers))
        if response.status_code >= 400:
            hint = (
                f"; check the API key in ${self.api_key_env}"
                if response.status_code in (401, 403)
                else ""
            )
            raise APIError(
                f"{url} answered {response.status_code}: {self._quote(response.text)}{hint}"
            )
        return self._parse(url, response.content, body["n"])

    def _parse(self, url: str, raw: bytes, n: int) -> list[str]:
        """The ``n`` texts of a 200 answer. A truncated body or too few choices is retried; a
        complete body of the wrong shape fails at once (retrying would get the same)."""
        try:
            data = json.loads(raw)
        except ValueError:  # not JSON (cut short) or not UTF-8
            raise _Retry("malformed body") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise _Retry("malformed body (no choices)")
        if len(choices) != n:
            raise _Retry(f"malformed body ({len(choices)} choices for n={n})")
        order = sorted(range(n), key=lambda i: choice_index(choices[i], i))
        texts = [self._choice_text(url, choices[i], i) for i in order]
        tokens = usage_tokens(data.get("usage"))
        if isinstance(tokens, str):
            raise APIError(f"{url} answered 200 but {self._quote(tokens)}; {SHAPE_FIX}")
        with self._lock:
            self._usage["samples"] += n
            self._usage["prompt_tokens"] += tokens[0]
            self._usage["completion_tokens"] += tokens[1]
        return texts

    def _choice_text(self, url: str, choice: dict[str, Any], i: int) -> str:
        """A choice's text; a missing or non-string text is an error, never scored as ``str``."""
        chat = self.mode == "chat"
        message = choice.get("message")
        value = message.get("content") if isinstance(message, dict) else None
        value = value if chat else choice.get("text")
        if isinstance(value, str):
            return value
        other = "completions" if chat else "chat"
        if ("text" in choice) if chat else ("message" in choice):
            fix = f"this is a {other} endpoint's answer: use --api-mode {other}"
        else:
            fix = (
                "the server gave no text for this sample (a refusal, a content filter, or tokens "
                "spent on hidden reasoning?); a missing text cannot be scored"
            )
        field = "message.content" if chat else "text"
        detail = f"choice {i} has {field} = {short(value)}"
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if refusal:
            detail += f" (refusal: {short(refusal)})"
        raise APIError(
            f"{url} answered 200 but {self._quote(detail)} "
            f"(finish_reason {short(choice.get('finish_reason'))}); {fix}"
        )

    def _quote(self, text: str) -> str:
        """Server text safe to show: the API key masked (before truncation), then shortened."""
        key = self._client.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return snippet(mask_secret(text, key))

    def _count(self, key: str, k: int = 1) -> None:
        with self._lock:
            self._usage[key] += k

    def _count_retry(self, reason: str) -> None:
        with self._lock:
            retries = self._usage["retries"]
            retries[reason] = retries.get(reason, 0) + 1


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _was_cancelled(future: Future[Any]) -> bool:
    return not future.cancelled() and isinstance(future.exception(), _Cancelled)
