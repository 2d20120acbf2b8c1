"""The local executor: every batch runs in this process, in plan order (the default)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from imprint.backends.base import LogprobBackend, ScoreRequest, TokenStats
from imprint.executors.base import ExecutorStats, OnBatch, OnResults, PlannedBatch


class LocalExecutor:
    """Runs batches one after another with the driver's own backends."""

    kind = "local"

    def __init__(self) -> None:
        self.stats = ExecutorStats()

    def score_batches(
        self,
        role: str,
        backend: Any,
        batches: Sequence[PlannedBatch],
        on_batch: OnBatch,
        *,
        advance: Callable[[int], None] | None = None,
    ) -> None:
        for index, batch in enumerate(batches):
            stats = score_batch(backend, list(batch.requests), batch.n_tokens, advance)
            on_batch(index, stats)
            self.stats.add("local", len(batch.requests))

    def run_batches(
        self,
        role: str,
        batches: Sequence[Sequence[Any]],
        execute: Callable[[list[Any]], Sequence[Any]],
        on_results: OnResults,
        *,
        fingerprint: str = "",
        remote: Callable[[Any, list[Any]], Sequence[Any]] | None = None,
    ) -> None:
        for index, batch in enumerate(batches):
            on_results(index, list(execute(list(batch))))
            self.stats.add("local", len(batch))

    def close(self) -> None:
        """Nothing to release: the run owns its backends."""


def score_batch(
    backend: LogprobBackend,
    requests: list[ScoreRequest],
    n_tokens: int,
    advance: Callable[[int], None] | None,
) -> list[TokenStats]:
    """Score one batch; a backend that streams (``reports_progress``) advances the bar per
    forward, so one long text shows progress; the bar ends the batch at exactly ``n_tokens``."""
    if advance is None:
        return backend.score(requests)
    if not getattr(backend, "reports_progress", False):
        stats = backend.score(requests)
        advance(n_tokens)
        return stats
    done = 0

    def step(n: int) -> None:
        nonlocal done
        n = min(n, n_tokens - done)  # scored tokens exclude start tokens; never overshoot
        done += n
        advance(n)

    stats = backend.score(requests, progress=step)  # type: ignore[call-arg]
    advance(n_tokens - done)
    return stats
