"""Gray-box HTTP answers kept in the run's store as they arrive, and asked once per run.

Every ``POST`` of the ``openai-logprobs`` backend (the probes, each echo or ``prompt_logprobs``
answer, each context and forced-token request) is stored in the run's answer store
(:class:`imprint.requests.store.RequestStore`, the ``response`` rows the black-box backend
writes) under the SHA-256 of the server (API root and model) and the exact request body, as the
server's JSON text, in its own transaction. A rerun of a stopped or killed run reads it from
there and sends only what is missing. :class:`Once` makes concurrent askers of one body wait for
one answer instead of sending it each (the context request at ``concurrency`` > 1).
"""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import Future
from typing import Any


def answer_key(server: str, path: str, body: dict[str, Any]) -> str:
    """The store key of ``body`` POSTed to ``server``'s ``path`` (the answer depends on these
    only; how the answer is read is the backend's fingerprint, not the key's)."""
    raw = f"http-logprobs-answer|{server}|{path}|{json.dumps(body, sort_keys=True)}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class Once:
    """Run a computation once per key; callers that come while it runs wait for its result
    (or its error). A key whose computation failed is asked again by the next caller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Future[Any]] = {}
        self._done: dict[str, Any] = {}

    def get(self, key: str, compute: Any) -> Any:
        with self._lock:
            if key in self._done:
                return self._done[key]
            future = self._running.get(key)
            owner = future is None
            if owner:
                future = self._running[key] = Future()
        assert future is not None
        if not owner:
            return future.result()
        try:
            value = compute()
        except BaseException as err:
            with self._lock:
                self._running.pop(key, None)
            future.set_exception(err)
            raise
        with self._lock:
            self._done[key] = value
            self._running.pop(key, None)
        future.set_result(value)
        return value

    def peek(self, key: str, default: Any) -> Any:
        """The result computed for ``key``, else ``default`` (never computes)."""
        with self._lock:
            return self._done.get(key, default)
