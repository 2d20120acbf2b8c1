"""The local executor: every batch runs in this process, in plan order (the default)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from imprint.executors.base import ExecutorStats, Factory, OnResults, PlannedBatch, run_local


class LocalExecutor:
    """Runs batches one after another with the driver's own backends (worker ``driver``)."""

    kind = "local"

    def __init__(self) -> None:
        self.stats = ExecutorStats()

    def register(self, role: str, factory: Factory) -> None:
        """Nothing to build: the driver's backend serves every role."""

    def factory(self, role: str) -> Factory | None:
        """None: every role is served by the driver's own backend."""
        return None

    def run_batches(
        self,
        role: str,
        kind: Any,
        batches: Sequence[PlannedBatch],
        on_results: OnResults,
        *,
        backend: Callable[[], Any],
        fingerprint: str = "",
        advance: Callable[[int], None] | None = None,
    ) -> None:
        for index, batch in enumerate(batches):
            on_results(index, run_local(kind, backend(), batch, advance))
            self.stats.add("driver", len(batch.requests), role, kind.kind)

    def close(self) -> None:
        """Nothing to release: the run owns its backends."""
