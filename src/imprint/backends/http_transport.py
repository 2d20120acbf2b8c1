"""The HTTP client's transport: one POST with retries, and the checks of a 200 answer.

:class:`Transport` is the part of :class:`imprint.backends.http.OpenAICompatibleBackend` that
sends one request body: retried with exponential backoff and full jitter (``Retry-After``
honoured) on 429, 5xx, timeouts and connection errors, failing at once with the reason on other
4xx and on complete bodies of the wrong shape.

A 200 body that is not an OpenAI answer (not JSON, or JSON without a list of choice objects) is
sent again once: a body cut short may be transient. A second such answer to the same request is
a protocol error (a server that is not OpenAI-compatible, or not at this route or version), so
the run stops with one line naming the URL, the request, what was wrong, the start of the body
and the fix, rather than spending the whole retry budget and advising to raise it. Nothing of
such an answer is stored; ``usage()["retries"]["malformed body"]`` counts the ones sent again.

Timeouts depend on what the slow start measured (:mod:`imprint.backends.http_adapt`):

- On a server measured to serve several requests at once, a request past ``timeout_s`` is
  abandoned and retried, and the requests in flight are halved (its ``Gate``).
- Otherwise (a server measured to serve one request at a time, one not measured yet, or one
  request in flight as configured) the client **waits for the answer** instead: the abandoned
  request would go on running on such a server and the re-sent copy would queue behind it (and
  every other request behind both: ``transformers serve`` took 20 POSTs for 9 answers, 727 s),
  so a retry costs the server the work twice and still times out. The answer is awaited up to
  ``timeout_s x (1 + max_retries)`` (the time the retries would have had) for each request the
  client may have in flight (on such a server each may be computed before it); a warning says
  so when ``timeout_s`` passes, and ``usage()["past_timeout"]`` counts such answers. No answer
  even then is a real failure, not retried (one POST for it).

It expects the attributes the backend sets (``_client``, ``retry``, ``_gate``, ``limits``,
``_usage`` ...).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from imprint.backends.http_checks import (
    SHAPE_FIX,
    APIError,
    choice_index,
    choice_text,
    malformed_line,
    mask_secret,
    read_answer,
    snippet,
    usage_tokens,
)

log = logging.getLogger("imprint.backends.http")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class _Retry(Exception):
    """``waited``: the seconds an answer was awaited past ``timeout_s`` before this timeout
    (None: abandoned at ``timeout_s``, to be retried)."""

    def __init__(self, reason: str, wait: float | None = None, waited: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.wait, self.waited = reason, wait, waited


class _Malformed(_Retry):
    """A complete 200 answer that is not an OpenAI answer: ``what`` was wrong, ``raw`` its body."""

    def __init__(self, what: str, raw: bytes) -> None:
        super().__init__("malformed body")
        self.what, self.raw = what, raw


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


class Transport:
    """POST, retry, parse; see the module docstring."""

    _client: Any
    _httpx: Any
    _gate: Any
    _most_in_flight: int
    limits: Any
    _lock: threading.Lock
    _rng: random.Random
    _usage: dict[str, Any]
    _reported: dict[str, set[str]]
    retry: RetryPolicy
    timeout_s: float
    base_url: str
    api_key_env: str | None
    mode: str

    def _send(self, body: dict[str, Any], abort: threading.Event) -> list[str]:
        """POST one request, retrying transient failures; returns its ``n`` texts."""
        url = f"{self.base_url}/{'chat/completions' if self.mode == 'chat' else 'completions'}"
        attempt = malformed = 0
        while True:
            if abort.is_set():
                raise _Cancelled
            self._count("attempts")
            entered = 0
            try:
                with self._gate as entered:
                    texts = self._post(url, body)
            except _Retry as retry:
                if retry.reason == "timeout" and retry.waited is not None:
                    self._count("failed")
                    raise APIError(self._not_answered(url, retry.waited)) from None
                if retry.reason == "timeout":
                    self._timed_out(entered)
                if isinstance(retry, _Malformed):
                    malformed += 1
                    if malformed > 1 or attempt >= self.retry.max_retries:
                        self._count("failed")
                        message = self._malformed(url, body, retry, malformed, attempt + 1)
                        raise APIError(message) from None
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

    def _timed_out(self, entered: int) -> None:
        """Halve the requests in flight (the abandoned ones may still run on the server), once
        for all requests in flight together, and settle the learned limit there."""
        lowered = self._gate.halve(entered)
        if lowered is None:
            return
        with self._lock:
            self.limits.lower(lowered)
        log.warning("timeout: %d request(s) in flight from now on", lowered)

    def _waited_s(self, in_flight: int = 1) -> float:
        """How long an answer is awaited on a server not measured to serve requests at once,
        with up to ``in_flight`` requests of this client in flight (itself included)."""
        return self.timeout_s * (1 + self.retry.max_retries) * max(1, in_flight)

    def _not_answered(self, url: str, waited_s: float) -> str:
        return (
            f"{url}: gave up after 1 attempt (last: timeout, its answer awaited {waited_s:g} s = "
            "--api-timeout x (1 + --api-max-retries) x the requests in flight at most; "
            "not sent again: the server was not measured to serve requests at once, and a copy "
            "sent to one that serves one at a time queues behind the first); raise --api-timeout "
            f"(now {self.timeout_s:g} s) or --api-max-retries (now {self.retry.max_retries}), or "
            "check that the server is alive"
        )

    def _gave_up(self, url: str, attempts: int, reason: str) -> str:
        if reason == "timeout":
            fix = (
                f"raise --api-timeout (now {self.timeout_s:g} s) or --api-max-retries (now "
                f"{self.retry.max_retries}), or lower --api-concurrency "
                f"(now {self._gate.limit} in flight: a server that answers one request at a time "
                "queues the others)"
            )
        else:
            fix = (
                f"raise --api-max-retries (now {self.retry.max_retries}) or, if requests time "
                f"out, --api-timeout (now {self.timeout_s:g} s), or check the server"
            )
        return f"{url}: gave up after {attempts} attempts (last: {reason}); {fix}"

    def _malformed(
        self, url: str, body: dict[str, Any], answer: _Malformed, times: int, posts: int
    ) -> str:
        """One line for a request answered 200 ``times`` with a body that is not an answer."""
        kind = "chat sampling" if self.mode == "chat" else "sampling"
        request = f"a black-box {kind} request (n={body['n']})"
        seen = "twice" if times == 2 else "once"
        if posts != times:
            seen += f" in {posts} POSTs"
        return malformed_line(
            url, request, answer.what, answer.raw, seen, self.base_url, self._secret()
        )

    def _post(self, url: str, body: dict[str, Any]) -> list[str]:
        httpx = self._httpx
        waits = self.limits.waits_past_timeout()
        in_flight = min(self._gate.limit, self._most_in_flight)
        read_s = self._waited_s(in_flight) if waits else self.timeout_s
        timeout = httpx.Timeout(self.timeout_s, read=read_s)
        warn = threading.Timer(self.timeout_s, self._warn_past_timeout, (url, read_s))
        warn.daemon = True
        if waits:
            warn.start()
        started = time.perf_counter()
        try:
            response = self._client.post(url, json=body, timeout=timeout)
        except httpx.TimeoutException:
            raise _Retry("timeout", waited=read_s if waits else None) from None
        except httpx.TransportError as err:
            raise _Retry(f"connection error ({type(err).__name__})") from None
        finally:
            warn.cancel()
        if waits and time.perf_counter() - started > self.timeout_s:
            self._count("past_timeout")
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
        """The texts of a 200 answer: ``n``, or fewer from a server that caps or ignores ``n``
        (never retried: the caller learns the limit). A truncated body is retried; a complete
        body of the wrong shape fails at once (retrying would get the same)."""
        data, what = read_answer(raw)
        if data is None:
            raise _Malformed(what or "", raw)
        choices = data["choices"]
        if not choices or len(choices) > n:
            raise APIError(f"{url} answered 200 with {len(choices)} choices for n={n}; {SHAPE_FIX}")
        order = sorted(range(len(choices)), key=lambda i: choice_index(choices[i], i))
        texts = [choice_text(url, choices[i], i, self.mode == "chat", self._quote) for i in order]
        tokens = usage_tokens(data.get("usage"))
        if isinstance(tokens, str):
            raise APIError(f"{url} answered 200 but {self._quote(tokens)}; {SHAPE_FIX}")
        with self._lock:
            self._usage["samples"] += len(texts)
            for field in ("model", "system_fingerprint"):
                if isinstance(data.get(field), str):
                    self._reported[field].add(data[field])
            self._usage["prompt_tokens"] += tokens[0]
            self._usage["completion_tokens"] += tokens[1]
        return texts

    def _warn_past_timeout(self, url: str, read_s: float) -> None:
        log.warning(
            "%s: no answer after --api-timeout %g s; waiting for it (up to %g s) rather than "
            "sending it again: the server was not measured to serve requests at once, and one "
            "that serves one at a time would compute both",
            url,
            self.timeout_s,
            read_s,
        )

    def _quote(self, text: str) -> str:
        """Server text safe to show: the API key masked (before truncation), then shortened."""
        return snippet(mask_secret(text, self._secret()))

    def _secret(self) -> str:
        """The API key this client sends ('' without one), to mask in what it quotes."""
        return str(self._client.headers.get("authorization", "")).removeprefix("Bearer ").strip()

    def _count(self, key: str, k: int = 1) -> None:
        with self._lock:
            self._usage[key] += k

    def _count_retry(self, reason: str) -> None:
        with self._lock:
            retries = self._usage["retries"]
            retries[reason] = retries.get(reason, 0) + 1


def _retry_after(headers: Any) -> float | None:
    """``Retry-After`` in seconds; None when absent or not a finite number >= 0 (``nan``,
    ``inf``, negative: the backoff applies instead; an HTTP date is not read either)."""
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None
