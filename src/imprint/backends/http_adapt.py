"""What the HTTP client learns from a server's first answers, and acts on instead of retrying.

- **Choices per request.** Many servers ignore ``n`` (llama-cpp-python's and ``transformers
  serve`` return one choice) or cap it. The first request with ``n > 1`` is sent alone; an answer
  with m < n choices (m >= 1) is kept as the answer to ``n = m`` and from then on no request asks
  more than m. That is not a fault and is never retried. The limit is stored with the answers
  (:func:`limits_key`), so a rerun builds exactly the requests the first run sent.
- **Concurrency.** The server's useful parallelism is measured by slow start: one request
  alone (its latency t1), then waves of 2, 4, ... requests; a wave of s requests that takes T
  shows an effective parallelism P = s t1 / T. The first wave with P < 0.75 s settles the limit
  at round(P) (a one-at-a-time server gets 1, so requests do not queue behind each other on it
  and time out); a wave at the configured maximum settles it there. A wave in which a request
  was retried (backoff, ``Retry-After``) measures the waits, not the server: it is skipped. A
  timeout halves the limit (:class:`Gate`), once for all the requests that were in flight
  together (they time out together), and settles it there (the manifest reports the lowered
  limit): the abandoned requests may still be running on the server.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any


class Gate:
    """At most ``limit`` requests in flight; the limit may be lowered while others wait.

    Entering returns the gate's epoch (how often a timeout lowered it so far): a request that
    times out lowers it only if no other timeout did since it entered (:meth:`halve`)."""

    def __init__(self, limit: int) -> None:
        self.limit, self._in_flight, self._epoch = limit, 0, 0
        self._cv = threading.Condition()

    def __enter__(self) -> int:
        with self._cv:
            while self._in_flight >= self.limit:
                self._cv.wait()
            self._in_flight += 1
            return self._epoch

    def __exit__(self, *exc: object) -> None:
        with self._cv:
            self._in_flight -= 1
            self._cv.notify_all()

    def set(self, limit: int) -> None:
        with self._cv:
            self.limit = max(1, limit)
            self._cv.notify_all()

    def halve(self, entered: int) -> int | None:
        """After a timeout of a request that entered at epoch ``entered``: the halved limit, or
        None when a timeout of the same window (since it entered) already halved it, or at 1."""
        with self._cv:
            if entered != self._epoch or self.limit <= 1:
                return None
            self.limit, self._epoch = max(1, self.limit // 2), self._epoch + 1
            return self.limit


@dataclass
class ServerLimits:
    """The server's limits as learned so far (``describe()`` goes to the manifest)."""

    max_concurrency: int
    choices: int | None = None  # most choices one request returned (None: never fewer)
    choices_checked: bool = False  # an answer to n > 1 was seen (full or short)
    concurrency: int | None = None  # settled in-flight limit (None: still measuring)
    wave: int = 1
    solo_s: float | None = None  # one request's latency, sent alone
    parallelism: float | None = None
    lowered: int | None = None  # the limit a timeout lowered it to (None: never lowered)

    @property
    def settled(self) -> bool:
        return self.concurrency is not None

    def next_wave(self, pending: int, asks_many: bool) -> tuple[int, int]:
        """(requests to send now, in flight at once)."""
        if asks_many and not self.choices_checked:
            return 1, 1  # learn the choices per request before building the rest
        if self.settled:
            assert self.concurrency is not None
            return pending, self.concurrency
        return min(self.wave, pending), self.wave

    def observe(
        self, size: int, sent: int, wall_s: float, full: bool, attempts: int | None = None
    ) -> bool:
        """Learn from a wave of ``size`` requests (``sent`` of them sent, the rest answered by
        the store; ``attempts``: POSTs made, retries included) that took ``wall_s``; ``full``:
        the wave had as many as asked. True when this wave settled the concurrency."""
        if self.settled or sent < size or wall_s <= 0:
            return False  # a wave the store answered in part measures nothing
        if attempts is not None and attempts > sent:
            return False  # its wall time holds backoff sleeps and Retry-After waits
        if size == 1:
            self.solo_s = wall_s if self.solo_s is None else min(self.solo_s, wall_s)
            if self.max_concurrency == 1:
                self.concurrency, self.parallelism = 1, 1.0
                return True
            self.wave = 2
            return False
        if self.solo_s is None or not full:
            return False
        parallelism = size * self.solo_s / wall_s
        if parallelism < 0.75 * size:
            self.parallelism = parallelism
            self.concurrency = max(1, min(size, round(parallelism)))
            return True
        if size >= self.max_concurrency:
            self.parallelism, self.concurrency = parallelism, self.max_concurrency
            return True
        self.wave = min(size * 2, self.max_concurrency)
        return False

    def lower(self, limit: int) -> None:
        """A timeout lowered the in-flight limit to ``limit``: it is settled there."""
        self.lowered = limit
        self.concurrency = limit if self.concurrency is None else min(self.concurrency, limit)

    def requests_per_s(self) -> float | None:
        if self.solo_s is None or self.concurrency is None or self.solo_s <= 0:
            return None
        return min(float(self.concurrency), self.parallelism or 1.0) / self.solo_s

    def describe(self) -> dict[str, Any]:
        return {
            "choices_per_request": self.choices,
            "choices_checked": self.choices_checked,
            "concurrency": self.concurrency,
            "parallelism": None if self.parallelism is None else round(self.parallelism, 2),
            "solo_request_s": None if self.solo_s is None else round(self.solo_s, 3),
            "lowered_after_timeout": self.lowered,
        }


def limits_key(base_url: str, model: str, mode: str) -> str:
    """The store key of a server's learned choices per request."""
    return hashlib.sha256(f"imprint-server-limits|{base_url}|{model}|{mode}".encode()).hexdigest()


def encode_limits(choices: int) -> list[str]:
    return [json.dumps({"choices_per_request": choices})]


def decode_limits(stored: list[str] | None) -> int | None:
    try:
        value = json.loads(stored[0])["choices_per_request"] if stored else None
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return value if isinstance(value, int) and value >= 1 else None


def estimate_line(where: str, limits: ServerLimits, planned: int | None, sent: int) -> str:
    """What the first answers said about the server at ``where``, and the time the rest of
    ``planned`` requests (``sent`` so far) should take."""
    rate = limits.requests_per_s()
    choices = (
        f"{limits.choices} choice(s) per request (the server ignores or caps n)"
        if limits.choices
        else "n honoured"
        if limits.choices_checked
        else "no request asked n > 1 yet"
    )
    line = (
        f"{where}: {choices}; {limits.concurrency} request(s) in flight (effective "
        f"parallelism {limits.parallelism or 1:.1f}, one request alone {limits.solo_s or 0:.2f} s)"
    )
    if rate and planned:
        left = max(planned - sent, 0)
        line += f"; about {duration(left / rate)} for the ~{left:,} requests left"
    elif rate:
        line += f"; about {rate:.1f} requests/s"
    return line


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
