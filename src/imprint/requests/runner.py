"""Run typed requests once: deduplicate, answer from the store, execute the rest in batches.

``RequestRunner.run(role, fingerprint, requests, execute)`` is the one path every model call
takes (besides the log-prob planner, which shares the counting): requests are deduplicated by
key, looked up in the store, the misses sorted longest first and handed to ``execute`` a batch at
a time; each batch's results are stored in one transaction before the next batch starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from imprint.errors import ConfigError
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
    ) -> None:
        self.store = store
        self.progress = progress
        self.counts = counts if counts is not None else RequestCounts()

    def run(
        self,
        role: str,
        fingerprint: str,
        requests: Sequence[R],
        execute: Callable[[list[R]], Sequence[Any]],
        *,
        batch_size: int = 16,
    ) -> list[Any]:
        """One result per request, in order; ``execute(batch)`` returns one result per request."""
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
        for start in range(0, len(missing), batch_size):
            batch = missing[start : start + batch_size]
            results = list(execute(batch))
            if len(results) != len(batch):
                raise RuntimeError(f"{kind}: {len(batch)} requests gave {len(results)} results")
            self.store.put_many(fingerprint, zip(batch, results, strict=True))
            found.update((r.key(), res) for r, res in zip(batch, results, strict=True))
            counts.executed += len(batch)
            counts.batches += 1
            if advance:
                advance(len(batch))
        return [found[r.key()] for r in requests]
