"""Where model work runs: in this process (``local``, the default) or on Ray actors (``ray``).

See :mod:`imprint.executors.base` for the contract; :func:`make_executor` builds one from an
:class:`ExecutorConfig` and the run's backend factories (Ray is imported only for ``ray``).
"""

from __future__ import annotations

from collections.abc import Mapping

from imprint.executors.base import (
    BackendFactory,
    BatchWork,
    CallFactory,
    Executor,
    ExecutorConfig,
    ExecutorStats,
    Factory,
    PlannedBatch,
    WorkerLostError,
    check_ray_installed,
)
from imprint.executors.local import LocalExecutor

__all__ = [
    "BackendFactory",
    "BatchWork",
    "CallFactory",
    "Executor",
    "ExecutorConfig",
    "ExecutorStats",
    "Factory",
    "LocalExecutor",
    "PlannedBatch",
    "WorkerLostError",
    "check_ray_installed",
    "make_executor",
]


def make_executor(
    config: ExecutorConfig, factories: Mapping[str, Factory] | None = None
) -> Executor:
    """The executor ``config`` asks for; ``factories`` (model role -> how a worker builds its
    replica) are needed by ``ray`` only: a role without one runs locally."""
    if config.kind == "local":
        return LocalExecutor()
    check_ray_installed()
    from imprint.executors.ray import RayExecutor

    return RayExecutor(config, factories or {})
