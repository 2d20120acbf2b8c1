"""One gray-box completions request: from the run's answer store, else POSTed with retries.

:class:`StoredPost` is the part of :class:`imprint.backends.http_logprobs.HTTPLogprobBackend`
that sends a request body: an answer the run's store holds (:mod:`.http_answer_store`) is read
from it, any other is POSTed (429, 5xx and connection errors retried with backoff, timeouts not;
a 200 answer that is not a completions answer asked once more, then refused in one line, never
stored) and stored as it arrives, so a stopped run resumes without asking a stored answer again. It
expects the attributes the backend sets (``_client``, ``_retry``, ``cache``, ``_usage`` ...).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

from imprint.backends.alignment import decode_answer
from imprint.backends.http_answer_store import answer_key
from imprint.backends.http_checks import malformed_line, mask_secret, read_answer, snippet
from imprint.backends.http_logprob_options import LogprobOptions
from imprint.backends.http_transport import RETRY_STATUS, RetryPolicy, _Malformed, _retry_after
from imprint.errors import ImprintError

log = logging.getLogger(__name__)


class ServerError(ImprintError):
    """The server refused a log-prob request or kept failing."""


class StoredPost:
    """POST a completions body, or read its stored answer; see the module docstring."""

    options: LogprobOptions
    spec: str
    base_url: str
    cache: Any  # the run's answer store (None: answers are not kept)
    _client: Any
    _httpx: Any
    _key: str
    _retry: RetryPolicy
    _rng: random.Random
    _lock: threading.Lock
    _usage: dict[str, int]

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
        malformed = 0  # answers that are not completions answers: a protocol error, asked twice
        for attempt in range(self._retry.max_retries + 1):
            try:
                reason, hint = self._attempt(url, body, where)
            except _Malformed as bad:  # nothing stored
                malformed += 1
                if malformed == 2 or attempt == self._retry.max_retries:
                    raise ServerError(self._malformed(url, where, bad, malformed)) from None
                reason, hint = bad.reason, None
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

    def _malformed(self, url: str, where: str, bad: _Malformed, times: int) -> str:
        """The one line that stops a request whose 200 answers were not completions answers."""
        detail = where.removeprefix(url).strip()
        request = f"a gray-box log-prob request{f' {detail}' if detail else ''}"
        seen = "twice" if times == 2 else "once"
        return malformed_line(url, request, bad.what, bad.raw, seen, self.base_url, self._key)

    def _attempt(
        self, url: str, body: dict[str, Any], where: str
    ) -> tuple[tuple[dict[str, Any], str] | str, float | None]:
        """One POST: ((answer, its text) | a retryable reason, the server's Retry-After); a 200
        body that is not a completions answer raises ``_Malformed`` (as on the black-box path)."""
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
        data, what = read_answer(response.content, decode_answer)
        if data is None:
            raise _Malformed(str(what), response.content)
        return (data, response.text), None

    def _count(self, key: str) -> None:
        with self._lock:
            self._usage[key] += 1


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
