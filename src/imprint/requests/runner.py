"""Run typed requests once: deduplicate, answer from the store, execute the rest in batches.

``RequestRunner.run(role, fingerprint, requests, backend)`` is the one path every model call
takes, log-prob passes included: the kind's checks run before any work, requests are
deduplicated by key, looked up in the store, the misses sorted longest first and batched by the
kind's policy (``count``: ``batch_size`` per batch; ``tokens``: one :meth:`Request.group` per
batch, rows x longest <= the token budget, and at most :data:`BATCH_SECONDS` of work at the
model's rate where it is known, so an interrupt loses seconds, not the run), then handed to the
executor, which calls ``kind.execute(backend, batch)`` in this process or on a Ray worker's
replica of ``role`` (:mod:`imprint.executors`). Each batch's results are stored in one
transaction as they arrive (any order), by one writer thread, so the next batch runs while SQLite
writes. Counts are kept per (role, kind).

Adding a request kind touches two files: the kind (a frozen dataclass subclassing
:class:`~imprint.requests.kinds.Request`, with ``kind``, its fields, ``size()``, and a static or
class method ``execute(backend, batch) -> list``; ``encode``/``decode`` when the result is not
JSON, ``batching``/``batch_size`` when the defaults do not fit), and the client method that
builds the requests and calls :meth:`RequestRunner.run`. Runner, store and both executors need
no change (``tests/test_requests_engine.py`` adds one in a test module).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from imprint.backends.base import Backend
from imprint.errors import ConfigError
from imprint.executors import BatchWork, Executor, LocalExecutor, PlannedBatch
from imprint.requests.kinds import Request
from imprint.requests.store import RequestStore

R = TypeVar("R", bound=Request)
Progress = Callable[[str, int], Callable[[int], None]]
DEFAULT_TOKEN_BUDGET = 4096  # used where neither the run nor the backend sets one
# seconds of work one token batch may hold where the model's rate is known: a batch is stored
# whole or not at all, so an interrupt loses at most this much (a quiet CPU or a GPU fills its
# token budget well within it; a loaded CPU or a large model on CPU gets smaller batches)
BATCH_SECONDS = 10.0
# never below this: on a CPU, forwards of 512 and 1,024 tokens ran at about 0.5x and 0.6x the
# tokens/s of 4,096, 2,048 at 0.95x (SmolLM2-135M, 2 loaded cores); a device slower than
# 205 tokens/s loses up to one such batch
MIN_BATCH_TOKENS = 2048


@dataclass
class KindCounts:
    """Per (model role, request kind): unique requests, answered from the store, executed,
    batches; ``tokens`` executed for token-batched kinds (None for the others); ``damaged``:
    stored answers that failed their checksum and were computed again (None: none)."""

    requests: int = 0
    cache_hits: int = 0
    executed: int = 0
    batches: int = 0
    tokens: int | None = None
    # a served backend keeps each answer as it comes (a stopped run's answers survive it): of
    # the requests it executed, ``sent`` went to the server and ``answered_by_store`` were read
    # back from its answers (None for backends that keep none of their own)
    sent: int | None = None
    answered_by_store: int | None = None
    damaged: int | None = None

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def add_served(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Count what a served backend's ``usage()`` says it sent and read between two calls."""
        if before is None or after is None:
            return
        self.sent = (self.sent or 0) + after["requests"] - before["requests"]
        self.answered_by_store = (self.answered_by_store or 0) + after["cached"] - before["cached"]


@dataclass
class RequestCounts:
    """Counts of every request a run made, by model role and kind (the manifest's
    ``requests``)."""

    by_role: dict[str, dict[str, KindCounts]] = field(default_factory=dict)

    def of(self, role: str, kind: str) -> KindCounts:
        return self.by_role.setdefault(role, {}).setdefault(kind, KindCounts())

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        return {
            role: {kind: c.to_dict() for kind, c in sorted(kinds.items())}
            for role, kinds in sorted(self.by_role.items())
        }


class Lazy:
    """A backend loaded on first use (``load()``): e.g. a masked LM needed only for texts that
    are not in the store yet."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._backend: Any = None

    def get(self) -> Any:
        if self._backend is None:
            self._backend = self._load()
        return self._backend


class RequestRunner:
    """Executes requests through the store; ``progress(label, total)`` gives an advance callback
    (advanced by tokens for token-batched kinds, by requests for the others)."""

    def __init__(
        self,
        store: RequestStore,
        *,
        progress: Progress | None = None,
        counts: RequestCounts | None = None,
        executor: Executor | None = None,
        token_budget: int | None = None,
        batch_seconds: float | None = BATCH_SECONDS,
    ) -> None:
        self.store = store
        self.progress = progress
        self.counts = counts if counts is not None else RequestCounts()
        # where batches run: this process unless the run hands a Ray executor in
        self.executor: Executor = executor if executor is not None else LocalExecutor()
        self.token_budget = token_budget
        # tokens/s of log-prob work per model fingerprint: given by the run (its plan's rate)
        # or measured here on each call's batches; caps a token batch at ``batch_seconds``
        self.rates: dict[str, float] = {}
        self.batch_seconds = batch_seconds

    def run(
        self,
        role: str,
        fingerprint: str,
        requests: Sequence[R],
        backend: Any,
        *,
        batch_size: int | None = None,
    ) -> list[Any]:
        """One result per request, in order, computed by ``type(request).execute(backend, ...)``
        (``backend``: the model in ``role``, or a :class:`Lazy` one) for those not stored under
        ``fingerprint``; ``batch_size`` overrides the kind's for ``count`` batching."""
        if not requests:
            return []
        kinds = {type(r) for r in requests}
        if len({k.kind for k in kinds}) != 1:
            raise ConfigError(
                f"one run() call takes one request kind, got {sorted(kinds, key=str)}"
            )
        kind = type(requests[0])
        get = backend.get if isinstance(backend, Lazy) else (lambda: backend)
        keys = [r.key() for r in requests]
        unique = list(dict(zip(keys, requests, strict=True)).values())
        if kind.check.__func__ is not Request.check.__func__:  # type: ignore[attr-defined]
            kind.check(role, get(), unique)
        counts = self.counts.of(role, kind.kind)
        if kind.batching == "tokens" and counts.tokens is None:
            counts.tokens = 0
        found = self.store.get_many(fingerprint, unique)
        self._count_damaged(fingerprint, kind.kind, keys, counts)
        counts.requests += len(unique)
        counts.cache_hits += len(found)
        missing = [r for r in unique if r.key() not in found]
        if missing:
            batches = self._plan(kind, missing, get, batch_size, fingerprint)
            before = _served_usage(backend)
            try:
                self._execute(role, kind, fingerprint, batches, get, found, counts)
            finally:
                counts.add_served(before, _served_usage(backend))
        return [found[k] for k in keys]

    def _plan(
        self,
        kind: type[Request],
        missing: list[Any],
        get: Callable[[], Any],
        size: int | None,
        fingerprint: str = "",
    ) -> list[PlannedBatch]:
        if kind.batching != "tokens":
            n = size or kind.batch_size
            missing = sorted(missing, key=lambda r: -r.size())  # longest first: little padding
            return [
                PlannedBatch(tuple(missing[i : i + n]), len(missing[i : i + n]))
                for i in range(0, len(missing), n)
            ]
        backend = get()
        lengths = backend.count_tokens([r.token_text() for r in missing])
        budget = self.batch_budget(
            fingerprint, self.token_budget or backend.batch_tokens or DEFAULT_TOKEN_BUDGET
        )
        max_length = backend.max_length
        # longest first by tokens, ties in request order (batches_by_budget sorts stably): the
        # batches, and so the float sums of every forward, are those of the planner before
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(missing):
            groups.setdefault(r.group(), []).append(i)
        out = []
        for rows in groups.values():  # one group (prefix) per batch: its KV cache is reused
            sizes = [lengths[i] for i in rows]
            for idx in batches_by_budget(sizes, budget, max_length=max_length):
                chosen = [rows[j] for j in idx]
                out.append(
                    PlannedBatch(tuple(missing[i] for i in chosen), sum(lengths[i] for i in chosen))
                )
        return out

    def _count_damaged(
        self, fingerprint: str, kind: str, keys: list[str], counts: KindCounts
    ) -> None:
        """Count this call's requests whose stored answer the store found damaged (now, or
        when the plan looked): they are computed again."""
        damaged = self.store.damaged.get((fingerprint, kind), set())
        hit = damaged.intersection(keys)
        if hit:
            damaged.difference_update(hit)
            counts.damaged = (counts.damaged or 0) + len(hit)

    def batch_budget(self, fingerprint: str, budget: int) -> int:
        """``budget`` halved until it holds at most ``batch_seconds`` of work at the model's
        known rate (never below :data:`MIN_BATCH_TOKENS`); unchanged while no rate is known.
        Halving, not the exact figure: runs at about the same speed form the same batches, so
        their forwards sum the same floats."""
        rate = self.rates.get(fingerprint)
        if not rate or not self.batch_seconds:
            return budget
        while budget > rate * self.batch_seconds and budget // 2 >= MIN_BATCH_TOKENS:
            budget //= 2
        return budget

    def _execute(
        self,
        role: str,
        kind: type[Request],
        fingerprint: str,
        batches: list[PlannedBatch],
        get: Callable[[], Any],
        found: dict[str, Any],
        counts: KindCounts,
    ) -> None:
        total = sum(b.units for b in batches)
        label = (
            f"scoring with {role}"
            if kind.batching == "tokens"
            else f"{kind.kind} requests to {role}"
        )
        advance = self.progress(label, total) if self.progress else None
        # one writer thread commits each batch as it arrives (any order under Ray): on a GPU the
        # next forward runs while SQLite writes (the write releases the GIL). A write error
        # surfaces here; a kill loses at most the batches still queued.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="imprint-store") as writer:
            writes: list[Future[None]] = []

            def on_results(index: int, results: list[Any]) -> None:
                batch = batches[index].requests
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"{kind.kind}: {len(batch)} requests gave {len(results)} results"
                    )
                pairs = list(zip(batch, results, strict=True))
                writes.append(writer.submit(self.store.put_many, fingerprint, pairs))
                found.update((r.key(), res) for r, res in pairs)
                counts.executed += len(batch)
                counts.batches += 1
                if counts.tokens is not None:
                    counts.tokens += batches[index].units

            started = time.perf_counter()
            tokens_before = counts.tokens or 0
            try:
                self.executor.run_batches(
                    BatchWork(role, kind, batches, on_results, get, fingerprint, advance)
                )
            finally:
                for write in writes:
                    write.result()
            done = (counts.tokens or 0) - tokens_before
            if done >= 256:  # this model's rate here (enough tokens to time), for its next batches
                self.rates[fingerprint] = done / max(time.perf_counter() - started, 1e-6)


def batches_by_budget(
    lengths: Sequence[int], budget: int, *, max_length: int | None = None
) -> list[list[int]]:
    """Indices sorted by length (longest first) and grouped so that rows x width <= budget.

    A text longer than ``max_length`` is a batch of its own: the backend streams its sliding
    windows and its result reaches the store (and the progress bar) before the next text starts.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        if max_length and lengths[i] > max_length:
            out.append([i])
            continue
        n = lengths[i]
        if current and (len(current) + 1) * max(width, n) > budget:
            out.append(current)
            current, width = [], 0
        current.append(i)
        width = max(width, n)
    if current:
        out.append(current)
    return out


def _served_usage(backend: Any) -> dict[str, Any] | None:
    """A served backend's usage (requests sent, answers read from its own store), or None for
    a backend that keeps no answers (a local model; a :class:`Lazy` one is never loaded here)."""
    if not isinstance(backend, Backend):  # a Lazy one (never loaded here), or a plain object
        return None
    found = backend.usage()
    return found if {"requests", "cached"} <= found.keys() else None
