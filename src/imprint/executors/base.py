"""What an executor is: where the planned batches of model work run.

The planner (:mod:`imprint.signals.plan`) and the request runner (:mod:`imprint.requests.runner`)
decide *what* to compute: deduplicated requests, looked up in the cache, sorted and batched. An
executor decides *where*: in this process (:class:`~imprint.executors.local.LocalExecutor`, the
default) or on Ray actors, one model replica each (:mod:`imprint.executors.ray`). Either way every
batch's results come back to the driver, which stores them in its one cache as they arrive.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from imprint.backends.base import ScoreRequest, TokenStats
from imprint.errors import ConfigError, ImprintError, MissingDependencyError

KINDS = ("local", "ray")


class WorkerLostError(ImprintError, RuntimeError):
    """Every worker of a pool was lost; what was stored stays in the cache."""


def mask_address(address: str | None) -> str | None:
    """``address`` with any ``user:password@`` shown as ``user:***@``: errors and the manifest
    never repeat a password."""
    if address is None:
        return None
    head, sep, rest = address.rpartition("@")
    if not sep:
        return address
    scheme, slashes, userinfo = head.rpartition("//")
    user = f"{userinfo.split(':', 1)[0]}:" if ":" in userinfo else ""
    return f"{scheme}{slashes}{user}***@{rest}"


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
            from imprint.executors.ray_setup import check_address

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
class PlannedBatch:
    """One batch of log-prob requests as planned (one prefix, within the token budget)."""

    requests: tuple[ScoreRequest, ...]
    n_tokens: int


#: ``on_batch(index, stats)``: store one finished batch (called on the driver, in any order)
OnBatch = Callable[[int, list[TokenStats]], None]
#: ``on_results(index, results)``: store one finished batch of typed requests
OnResults = Callable[[int, list[Any]], None]


@dataclass
class ExecutorStats:
    """What an executor did: requests executed per worker, shards retried, workers lost."""

    executed: dict[str, int] = field(default_factory=dict)  # worker id -> requests
    shards: int = 0
    retried_shards: int = 0
    lost_workers: int = 0
    started_workers: int = 0
    start_s: float = 0.0  # seconds spent starting Ray and the workers (their model loads)

    def add(self, worker: str, n: int) -> None:
        self.executed[worker] = self.executed.get(worker, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "executed": dict(sorted(self.executed.items()))}


class Executor(Protocol):
    """Runs planned batches for one model role; results are handed back through callbacks."""

    kind: str
    stats: ExecutorStats

    def score_batches(
        self,
        role: str,
        backend: Any,
        batches: Sequence[PlannedBatch],
        on_batch: OnBatch,
        *,
        advance: Callable[[int], None] | None = None,
    ) -> None:
        """Score every batch with ``backend`` (or a replica of it); ``on_batch`` each."""
        ...

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
        """Run typed request batches: ``execute(batch)`` here, or ``remote(backend, batch)``
        on a worker's replica when given (a picklable function, never a closure over a model);
        a replica's fingerprint must equal ``fingerprint``, the driver's."""
        ...

    def close(self) -> None: ...
