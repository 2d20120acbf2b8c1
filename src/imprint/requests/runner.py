"""Run typed requests once: deduplicate, answer from the store, execute the rest in batches.

``RequestRunner.run(role, fingerprint, requests, execute)`` is the one path every model call
takes (besides the log-prob planner, which shares the counting): requests are deduplicated by
key, looked up in the store, the misses sorted longest first and handed to ``execute`` a batch at
a time; each batch's results are stored in one transaction as it arrives. Where a batch runs is
the executor's business (:mod:`imprint.executors`: this process, or Ray actors when the call
gives a ``remote`` form of ``execute``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from imprint.errors import ConfigError
from imprint.executors import Executor, LocalExecutor
from imprint.requests.kinds import Request
from imprint.requests.store import RequestStore

R = TypeVar("R", bound=Request)
Progress = Callable[[str, int], Callable[[int], None]]


@dataclass
class KindCounts:
    """Per (model role, request kind): unique requests, answered from the cache, executed."""

    requests: int = 0
    cache_hits: int = 0
    executed: int = 0
    batches: int = 0


@dataclass
class RequestCounts:
    """Counts of every request a run made, by model role and kind (written to the manifest)."""

    by_role: dict[str, dict[str, KindCounts]] = field(default_factory=dict)

    def of(self, role: str, kind: str) -> KindCounts:
        return self.by_role.setdefault(role, {}).setdefault(kind, KindCounts())

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        return {
            role: {kind: asdict(c) for kind, c in sorted(kinds.items())}
            for role, kinds in sorted(self.by_role.items())
        }


class RequestRunner:
    """Executes requests through the store; ``progress(label, total)`` gives an advance callback."""

    def __init__(
        self,
        store: RequestStore,
        *,
        progress: Progress | None = None,
        counts: RequestCounts | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.store = store
        self.progress = progress
        self.counts = counts if counts is not None else RequestCounts()
        # where batches run: this process unless the run hands a Ray executor in
        self.executor: Executor = executor if executor is not None else LocalExecutor()

    def run(
        self,
        role: str,
        fingerprint: str,
        requests: Sequence[R],
        execute: Callable[[list[R]], Sequence[Any]],
        *,
        batch_size: int = 16,
        remote: Callable[[Any, list[R]], Sequence[Any]] | None = None,
    ) -> list[Any]:
        """One result per request, in order; ``execute(batch)`` returns one result per request.

        ``remote(backend, batch)``, a picklable function (never a closure over a loaded model),
        lets a Ray executor run the batch on a worker's own replica of the ``role`` model.
        """
        if not requests:
            return []
        kinds = {r.kind for r in requests}
        if len(kinds) != 1:
            raise ConfigError(f"one run() call takes one request kind, got {sorted(kinds)}")
        kind = kinds.pop()
        unique = list(dict.fromkeys(requests))
        counts = self.counts.of(role, kind)
        found = self.store.get_many(fingerprint, unique)
        counts.requests += len(unique)
        counts.cache_hits += len(found)
        missing = sorted((r for r in unique if r.key() not in found), key=lambda r: -r.size())
        advance = (
            self.progress(f"{kind} requests to {role}", len(missing))
            if self.progress and missing
            else None
        )
        batches = [missing[i : i + batch_size] for i in range(0, len(missing), batch_size)]

        def store(index: int, results: list[Any]) -> None:
            # each batch is stored in one transaction as it arrives (any order under Ray)
            batch = batches[index]
            if len(results) != len(batch):
                raise RuntimeError(f"{kind}: {len(batch)} requests gave {len(results)} results")
            self.store.put_many(fingerprint, zip(batch, results, strict=True))
            found.update((r.key(), res) for r, res in zip(batch, results, strict=True))
            counts.executed += len(batch)
            counts.batches += 1
            if advance:
                advance(len(batch))

        self.executor.run_batches(
            role, batches, execute, store, fingerprint=fingerprint, remote=remote
        )
        return [found[r.key()] for r in requests]
