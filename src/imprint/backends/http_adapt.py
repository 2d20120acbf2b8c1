"""What the HTTP client learns from a server's first answers, and acts on instead of retrying.

- **Choices per request.** Many servers ignore ``n`` (llama-cpp-python's and ``transformers
  serve`` return one choice) or cap it. The first request with ``n > 1`` is sent alone; an answer
  with m < n choices (m >= 1) is kept as the answer to ``n = m`` and from then on no request asks
  more than m. That is not a fault and is never retried. The limit is stored with the answers
  (:func:`limits_key`), so a rerun builds exactly the requests the first run sent.
- **Concurrency.** The server's useful parallelism is measured by slow start on *warm*
  requests: the first request (cold: a server loads, compiles or fills caches on it) is sent
  alone and its latency is kept apart (``first_request_s``, never the one-request timing); then
  one more alone (its latency t1), then waves of 2, 4, ... requests. A wave of s requests whose
  answers come back at f_1 <= ... <= f_s = T shows an effective parallelism
  P = s min(t1, f_1) / T: a server that serves one request at a time answers at t, 2t, 3t, ...,
  so P = 1 (f_1 is itself a warm one-request timing, so a slow t1 cannot inflate P). P is never
  reported above the s requests in flight: a larger quotient is clipped to s and the manifest
  says so (``parallelism_clipped_from``). The first wave with P < 0.75 s settles the limit at
  round(P) (a one-at-a-time server gets 1, and ``serial`` is true); a wave at the configured
  maximum settles it there. A wave in which a request was retried (backoff, ``Retry-After``)
  measures the waits, not the server: it is skipped.
- **Timeouts.** A request past the timeout is still being computed on the server: re-sending it
  to a server that serves one request at a time queues the copy behind the original (and every
  other request behind both), so each copy times out too. Unless the server was measured to
  serve requests in parallel, the client therefore waits for the original answer instead
  (:meth:`ServerLimits.waits_past_timeout`, see :mod:`imprint.backends.http_transport`). On a
  server measured parallel a timeout halves the limit (:class:`Gate`), once for all the
  requests that were in flight together (they time out together), and settles it there (the
  manifest reports the lowered limit); the timed-out request is retried.
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
    first_s: float | None = None  # the first (cold) request's latency, sent alone: not t1
    solo_s: float | None = None  # one warm request's latency, sent alone (t1)
    parallelism: float | None = None  # measured, at most the requests in flight
    clipped_from: float | None = None  # the quotient before clipping (None: not clipped)
    finishes_s: tuple[float, ...] = ()  # the settling wave's answers, s after it started
    lowered: int | None = None  # the limit a timeout lowered it to (None: never lowered)

    @property
    def settled(self) -> bool:
        return self.concurrency is not None

    @property
    def serial(self) -> bool | None:
        """True: measured to serve one request at a time; False: measured to serve several at
        once; None: not measured (still measuring, or one request in flight as configured)."""
        if self.parallelism is None:
            return None
        return self.parallelism < 1.5

    def waits_past_timeout(self) -> bool:
        """Whether a request past the timeout is waited for rather than re-sent: always, unless
        the server was measured to serve several requests at once (a re-sent request would
        queue behind the abandoned one on a server that serves one at a time)."""
        return self.serial is not False

    def next_wave(self, pending: int, asks_many: bool) -> tuple[int, int]:
        """(requests to send now, in flight at once)."""
        if asks_many and not self.choices_checked:
            return 1, 1  # learn the choices per request before building the rest
        if self.settled:
            assert self.concurrency is not None
            return pending, self.concurrency
        return min(self.wave, pending), self.wave

    def observe(
        self,
        size: int,
        sent: int,
        wall_s: float,
        full: bool,
        attempts: int | None = None,
        finishes: tuple[float, ...] = (),
    ) -> bool:
        """Learn from a wave of ``size`` requests (``sent`` of them sent, the rest answered by
        the store; ``attempts``: POSTs made, retries included) that took ``wall_s``, its answers
        back at ``finishes`` (s after the wave started); ``full``: the wave had as many as
        asked. True when this wave settled the concurrency."""
        if self.settled or sent < size or wall_s <= 0:
            return False  # a wave the store answered in part measures nothing
        if attempts is not None and attempts > sent:
            return False  # its wall time holds backoff sleeps and Retry-After waits
        if size == 1:
            if self.first_s is None:  # cold: loading, compiling, filling caches
                self.first_s = wall_s
                return False
            self.solo_s = wall_s if self.solo_s is None else min(self.solo_s, wall_s)
            if self.max_concurrency == 1:  # as configured: nothing to measure
                self.concurrency = 1
                return True
            self.wave = 2
            return False
        if self.solo_s is None or not full:
            return False
        one = min(self.solo_s, min(finishes)) if finishes else self.solo_s
        quotient = size * one / wall_s
        parallelism = min(quotient, float(size))  # never more than the requests in flight
        if parallelism < 0.75 * size or size >= self.max_concurrency:
            self.parallelism, self.finishes_s = parallelism, tuple(sorted(finishes))
            self.clipped_from = quotient if quotient > size else None
            self.concurrency = (
                max(1, min(size, round(parallelism)))
                if parallelism < 0.75 * size
                else self.max_concurrency
            )
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
            "serial": self.serial,
            "parallelism": None if self.parallelism is None else round(self.parallelism, 2),
            "parallelism_clipped_from": _rounded(self.clipped_from, 2),
            "first_request_s": _rounded(self.first_s, 3),
            "solo_request_s": _rounded(self.solo_s, 3),
            "settling_wave_answers_s": [round(f, 3) for f in self.finishes_s] or None,
            "lowered_after_timeout": self.lowered,
        }


def _rounded(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places)


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
    if limits.parallelism is None:
        measured = "not measured: --api-concurrency 1"
    else:
        measured = f"effective parallelism {limits.parallelism:.1f}"
        if limits.clipped_from is not None:
            measured += f" (measured {limits.clipped_from:.1f}, clipped to the requests in flight)"
        if limits.serial:
            measured += ", it serves one request at a time"
    first = f", the first (cold) one {limits.first_s:.2f} s" if limits.first_s is not None else ""
    line = (
        f"{where}: {choices}; {limits.concurrency} request(s) in flight ({measured}; one warm "
        f"request alone {limits.solo_s or 0:.2f} s{first})"
    )
    if rate and planned:
        left = max(planned - sent, 0)
        line += f"; about {duration(left / rate)} for the ~{left:,} requests left"
    elif rate:
        line += f"; about {rate:.2g} requests/s"
    return line


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
