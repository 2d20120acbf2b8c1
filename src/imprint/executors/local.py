"""The local executor: every batch runs in this process, in plan order (the default)."""

from __future__ import annotations

from imprint.executors.base import BatchWork, ExecutorStats, Factory, run_local


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

    def run_batches(self, work: BatchWork) -> None:
        kind = work.kind
        for index, batch in enumerate(work.batches):
            work.on_results(index, run_local(kind, work.backend(), batch, work.advance))
            self.stats.add("driver", len(batch.requests), work.role, kind.kind)

    def close(self) -> None:
        """Nothing to release: the run owns its backends."""
