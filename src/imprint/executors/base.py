"""What an executor is: where the planned batches of model work run.

The request runner (:mod:`imprint.requests.runner`) decides *what* to compute: deduplicated
requests of one kind, looked up in the store, sorted and batched. An executor decides *where*: in
this process (:class:`~imprint.executors.local.LocalExecutor`, the default) or on Ray actors, one
model replica each (:mod:`imprint.executors.ray`). Both call the kind's ``execute(backend,
batch)``, with the driver's backend or the worker's replica; every batch's results come back to
the driver, which stores them in its one store as they arrive.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from imprint.errors import ConfigError, ImprintError, MissingDependencyError
from imprint.executors.ray_setup import check_address, mask_address

KINDS = ("local", "ray")


class WorkerLostError(ImprintError, RuntimeError):
    """Every worker of a pool was lost; what was stored stays in the cache."""


@dataclass(frozen=True)
class ExecutorConfig:
    """Where model work runs (``imprint run --executor local|ray --address --workers``).

    ``address``: ``None`` starts a private Ray on this machine; ``auto`` joins the cluster
    started here with ``ray start --head``; ``ray://HOST:PORT`` joins a remote one.
    ``workers``: model replicas (Ray actors); default one per GPU of the cluster, else its CPUs
    divided by ``worker_cpus``. ``worker_cpus``: cores per CPU actor (torch threads match).
    ``exit_after`` is a test hook: the first actor exits abruptly after executing that many
    requests, as a lost machine would.
    """

    kind: str = "local"
    # recorded (manifest) with any password masked; see imprint.report.writer.to_jsonable
    address: str | None = field(default=None, metadata={"to_json": mask_address})
    workers: int | None = None
    worker_cpus: int = 1
    shards_per_worker: int = 4  # shards per replica: a lost actor costs at most one shard
    exit_after: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"--executor {self.kind!r} is unknown; use one of {', '.join(KINDS)}")
        if self.kind == "local" and (self.address is not None or self.workers is not None):
            raise ConfigError(
                "--address and --workers place work on a Ray cluster; add --executor ray "
                "(the local executor runs in this process)"
            )
        for name in ("workers", "worker_cpus", "shards_per_worker", "exit_after"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"executor option {name} must be an integer >= 1, got {value!r}")
        if self.kind == "ray":
            check_ray_installed()
            check_address(self.address)  # an unreachable head fails now, not after model loads


def check_ray_installed() -> None:
    """Fail before any work when Ray is missing, naming the install command."""
    if "ray" in sys.modules:  # None there: an import blocked on purpose (tests)
        found = sys.modules["ray"] is not None
    else:
        found = importlib.util.find_spec("ray") is not None
    if not found:
        raise MissingDependencyError("ray", "ray")


@dataclass(frozen=True)
class BackendFactory:
    """How a worker builds its own replica of a backend: the provider's choice and load context
    (picklable; a loaded model never travels). ``imports`` are modules that register model
    schemes (e.g. ``imprint.game`` for ``game:DIR``)."""

    choice: Any  # imprint.backends.registry.BackendChoice
    context: Any  # imprint.backends.registry.LoadContext, without a cache
    imports: tuple[str, ...] = ()

    def build(self) -> Any:
        import imprint.backends  # noqa: F401  (registers the built-in providers)

        for module in self.imports:
            importlib.import_module(module)
        return self.choice.load(self.context)


@dataclass(frozen=True)
class CallFactory:
    """How a worker builds a role's backend by calling ``make(*args)`` (a module-level, so
    picklable, function or class: e.g. a masked-LM neighbour generator from its spec)."""

    make: Callable[..., Any]
    args: tuple[Any, ...] = ()

    def build(self) -> Any:
        return self.make(*self.args)


#: what a worker builds a replica from (anything with a picklable ``build()``)
Factory = BackendFactory | CallFactory


@dataclass(frozen=True)
class PlannedBatch:
    """One batch of requests of one kind as planned: ``units`` is what the progress bar counts
    (tokens for token-batched kinds, requests for the others)."""

    requests: tuple[Any, ...]
    units: int

    @property
    def n_tokens(self) -> int:
        return self.units


#: ``on_results(index, results)``: store one finished batch (called on the driver, any order)
OnResults = Callable[[int, list[Any]], None]


@dataclass(frozen=True)
class BatchWork:
    """One call of :meth:`Executor.run_batches`: ``kind.execute(model, batch)`` for every batch,
    with ``backend()`` (the driver's model in ``role``) or a worker's replica of it, whose
    fingerprint must equal ``fingerprint``; ``on_results(index, results)`` per batch as it
    arrives, ``advance(units)`` per batch done."""

    role: str
    kind: Any
    batches: Sequence[PlannedBatch]
    on_results: OnResults
    backend: Callable[[], Any]
    fingerprint: str = ""
    advance: Callable[[int], None] | None = None


@dataclass
class ExecutorStats:
    """What an executor did: requests executed per worker (``"driver"`` for this process) and
    per role and kind (``where``: role -> kind -> worker -> requests), each Ray worker's node
    (``nodes``), shards retried, workers lost."""

    executed: dict[str, int] = field(default_factory=dict)  # worker id -> requests
    where: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)  # Ray worker id -> Ray node id
    shards: int = 0
    retried_shards: int = 0
    lost_workers: int = 0
    unresponsive_workers: int = 0  # Ray workers killed for not answering a ping (frozen, cut off)
    started_workers: int = 0
    start_s: float = 0.0  # seconds spent starting Ray and the workers (their model loads)

    def add(self, worker: str, n: int, role: str = "", kind: str = "") -> None:
        self.executed[worker] = self.executed.get(worker, 0) + n
        if role and kind:
            per = self.where.setdefault(role, {}).setdefault(kind, {})
            per[worker] = per.get(worker, 0) + n

    def to_dict(self) -> dict[str, Any]:
        where = {
            role: {kind: dict(sorted(w.items())) for kind, w in sorted(kinds.items())}
            for role, kinds in sorted(self.where.items())
        }
        return {
            **vars(self),
            "executed": dict(sorted(self.executed.items())),
            "where": where,
            "nodes": dict(sorted(self.nodes.items())),
        }


def run_local(
    kind: Any,
    backend: Any,
    batch: PlannedBatch,
    advance: Callable[[int], None] | None,
) -> list[Any]:
    """``kind.execute(backend, batch)`` in this process; a kind that streams progress advances
    the bar as it goes (one long text shows progress), which ends the batch at ``units``."""
    requests = list(batch.requests)
    if advance is None:
        return list(kind.execute(backend, requests))
    if not kind.streams_progress:
        results = list(kind.execute(backend, requests))
        advance(batch.units)
        return results
    done = 0

    def step(n: int) -> None:
        nonlocal done
        n = min(n, batch.units - done)  # scored tokens exclude start tokens; never overshoot
        done += n
        advance(n)

    results = list(kind.execute(backend, requests, progress=step))
    advance(batch.units - done)
    return results


class Executor(Protocol):
    """Runs planned batches of one request kind for one model role; results come back through
    ``on_results`` on the driver, in any order."""

    kind: str
    stats: ExecutorStats

    def register(self, role: str, factory: Factory) -> None:
        """How a worker builds its replica of ``role`` (a role without one runs here)."""
        ...

    def factory(self, role: str) -> Factory | None:
        """How a worker builds ``role``, or None (this process serves it), so a role derived
        from another (a tempered target) can be built on workers from the other's recipe."""
        ...

    def run_batches(self, work: BatchWork) -> None:
        """Every batch of ``work``, on the driver or on workers (see :class:`BatchWork`)."""
        ...

    def close(self) -> None: ...
