"""The planner: the attacks' log-prob needs as ``logprobs`` requests, run once through the runner.

A :class:`~imprint.signals.needs.Need` names a model role, a text variant and a prefix; each
(need, text) expands to one :class:`~imprint.requests.logprobs.LogprobRequest` per variant text.
The request runner (:mod:`imprint.requests.runner`) does the rest as for every other kind:
deduplicates across needs, serves what the store holds, batches the misses by tokens (one prefix
per batch, longest first, within the budget), executes them locally or on Ray workers, stores
each batch in one transaction and counts per (role, kind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from imprint.backends.base import LogprobBackend, ScoreRequest, TokenStats
from imprint.errors import CapabilityError, ConfigError
from imprint.executors import Executor
from imprint.requests.logprobs import LogprobRequest, check_context, check_logprobs
from imprint.requests.runner import (
    DEFAULT_TOKEN_BUDGET,
    KindCounts,
    RequestCounts,
    RequestRunner,
    batches_by_budget,
)
from imprint.requests.store import RequestStore
from imprint.signals.needs import Need, SignalSet

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "PlanReport",
    "batches_by_budget",
    "check_capabilities",
    "check_context",
    "run_plan",
]


@dataclass
class PlanReport:
    """The ``logprobs`` counts of one plan, per model role (the runner's own counts type)."""

    per_model: dict[str, KindCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {role: counts.to_dict() for role, counts in self.per_model.items()}


def check_capabilities(needs: Iterable[Need], backends: dict[str, LogprobBackend]) -> None:
    """Fail before any work when a need names a missing or incapable backend."""
    for need in needs:
        if need.model not in backends:
            raise CapabilityError(
                f"an attack needs model {need.model!r} but the run has only "
                f"{sorted(backends)}; add it (for reference attacks: --ref NAME=SPEC)"
            )
        check_logprobs(need.model, backends[need.model])


def run_plan(
    texts: Sequence[str],
    needs: Iterable[Need],
    backends: dict[str, LogprobBackend],
    cache: RequestStore,
    *,
    prefixes: dict[str, str] | None = None,
    token_budget: int | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    executor: Executor | None = None,
    runner: RequestRunner | None = None,
) -> tuple[SignalSet, PlanReport]:
    """Compute (or fetch) the signals of every need for every text.

    ``progress(label, total_tokens)`` returns a callback advanced by tokens scored; ``executor``
    runs the batches (default: this process); ``token_budget=None`` batches by each backend's
    own budget. ``runner`` (the run's, sharing its counts) replaces the four options before it.
    Every need is checked (models, capabilities, prefixes, context) before any work.
    """
    needs = list(dict.fromkeys(needs))
    check_capabilities(needs, backends)
    prefixes = prefixes or {}
    for need in needs:
        if need.prefix is not None and need.prefix not in prefixes:
            raise ConfigError(f"an attack needs prefix {need.prefix!r}, which the run lacks")
    layout: dict[Need, list[list[LogprobRequest]]] = {}
    wanted: dict[str, dict[LogprobRequest, None]] = {}
    for need in needs:
        prefix = prefixes.get(need.prefix) if need.prefix else None
        rows = [[LogprobRequest(v, prefix) for v in need.variant.apply(t)] for t in texts]
        for row in rows:
            wanted.setdefault(need.model, {}).update(dict.fromkeys(row))
        layout[need] = rows
    for model, requests in wanted.items():
        check_context(backends[model], model, [ScoreRequest(r.text, r.prefix) for r in requests])
    if runner is None:
        runner = RequestRunner(
            cache,
            progress=progress,
            counts=RequestCounts(),
            executor=executor,
            token_budget=token_budget,
        )
    report = PlanReport()
    results: dict[str, dict[LogprobRequest, TokenStats]] = {}
    for model, requests in wanted.items():
        reqs = list(requests)
        backend = backends[model]
        before = _snapshot(runner.counts.of(model, LogprobRequest.kind))
        stats = runner.run(model, str(backend.fingerprint), reqs, backend)
        results[model] = dict(zip(reqs, stats, strict=True))
        report.per_model[model] = _since(before, runner.counts.of(model, LogprobRequest.kind))
    data = {
        need: [tuple(results[need.model][r] for r in row) for row in rows]
        for need, rows in layout.items()
    }
    return SignalSet(texts, data), report


def _snapshot(counts: KindCounts) -> KindCounts:
    return KindCounts(**vars(counts))


def _since(before: KindCounts, after: KindCounts) -> KindCounts:
    """What this plan added to a runner's running counts."""
    return KindCounts(
        requests=after.requests - before.requests,
        cache_hits=after.cache_hits - before.cache_hits,
        executed=after.executed - before.executed,
        batches=after.batches - before.batches,
        tokens=(after.tokens or 0) - (before.tokens or 0),
    )
