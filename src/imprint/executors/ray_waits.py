"""Deadlines on every wait for a Ray cluster, about liveness rather than task length.

A model pass over a big batch may legitimately run for a long time, so a wait for work has no
fixed deadline: it waits :attr:`WaitLimits.check_s` at a time and, whenever nothing arrived in
that time, checks that the work can still arrive: the cluster answers, each busy replica
answers a ping within :attr:`WaitLimits.reply_s` (a ping runs in its own thread of the actor, so
it answers while a batch runs; a frozen process or a node cut off does not), each starting
replica is placed on a node within :attr:`WaitLimits.place_s` and builds its model within
:attr:`WaitLimits.build_s`. A quick answer (a built replica's ``info()``, a ready result's
transfer) has the fixed deadline ``reply_s``. Each limit is set in seconds by its environment
variable (:data:`ENV`). A dead actor or node needs none of this: Ray fails its references.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imprint.errors import ConfigError, ImprintError
from imprint.executors.ray_setup import REPLY_ENV, cluster_name

__all__ = [
    "ENV",
    "PING_GROUP",
    "ClusterLostError",
    "WaitLimits",
    "check_cluster",
    "cluster_name",
    "free",
    "placed",
    "unanswered",
    "wait_any",
]

#: the environment variable setting each limit (seconds)
ENV = {
    "check_s": "IMPRINT_RAY_CHECK_S",
    "reply_s": REPLY_ENV,
    "place_s": "IMPRINT_RAY_PLACE_S",
    "build_s": "IMPRINT_RAY_BUILD_S",
}
#: the actor's concurrency group for pings: its own thread, so a running batch does not delay it
PING_GROUP = "ping"


class ClusterLostError(ImprintError, RuntimeError):
    """The Ray cluster stopped answering while work was out; what was stored stays stored."""


@dataclass(frozen=True)
class WaitLimits:
    """Seconds: between liveness checks; for a quick answer (a ping, a built replica's info, a
    ready result); for a replica to be placed on a node; for a placed replica to build its model
    (a download of large weights included)."""

    check_s: float = 30.0
    reply_s: float = 60.0
    place_s: float = 600.0
    build_s: float = 3600.0

    @classmethod
    def from_env(cls) -> WaitLimits:
        """The defaults, each replaced by its environment variable (:data:`ENV`) where set."""
        values: dict[str, float] = {}
        for name, var in ENV.items():
            text = os.environ.get(var, "").strip()
            if not text:
                continue
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(
                    f"{var}={text!r}: a number of seconds > 0 (default {getattr(cls, name):g}); "
                    f"unset it for the default"
                )
            values[name] = value
        return cls(**values)


def check_cluster(address: str | None = None) -> None:
    """Raise :class:`ClusterLostError` when the cluster's GCS does not answer or has no live
    node (the head went away)."""
    import ray

    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
    except Exception as err:  # Ray raises many kinds here when its GCS is gone
        said = str(err).strip().splitlines()[-1][:200] if str(err).strip() else type(err).__name__
        raise ClusterLostError(_lost(address, f"it stopped answering ({said})")) from None
    if not alive:
        raise ClusterLostError(_lost(address, "it has no live node left"))


def _lost(address: str | None, what: str) -> str:
    return (
        f"{cluster_name(address)}: {what}, with work still out. Check the cluster (`ray status` "
        "on the head; restart it with `ray start --head`); running the same command again "
        "resumes from the cache"
    )


def placed(actor: Any) -> bool | None:
    """Whether Ray has given ``actor`` a worker process on a node (None: unknown; read from the
    GCS's actor table, which Ray offers without its dashboard only as a private module)."""
    try:
        from ray._private import state

        entry = state.actors(actor._actor_id.hex())
        return bool(entry.get("Pid")) or entry.get("State") == "ALIVE"
    except Exception:  # another Ray version's table: no placement deadline
        return None


def free(cpus: int, gpus: int) -> bool:
    """Whether the cluster has ``cpus`` CPUs and ``gpus`` GPUs free now (summed over nodes: a
    "no" is certain, a "yes" may still be split across nodes)."""
    import ray

    available = ray.available_resources()
    return available.get("CPU", 0) >= cpus and available.get("GPU", 0) >= gpus


def unanswered(actors: Mapping[str, Any], reply_s: float) -> list[str]:
    """The workers among ``actors`` whose ping (in the actor's :data:`PING_GROUP` thread) is not
    answered within ``reply_s``; a ping that fails (a dead actor) counts as answered: Ray fails
    that actor's references by itself."""
    import ray

    refs = {a.ping.options(concurrency_group=PING_GROUP).remote(): w for w, a in actors.items()}
    if not refs:
        return []
    _, late = ray.wait(list(refs), num_returns=len(refs), timeout=reply_s)
    return sorted(refs[ref] for ref in late)


def wait_any(refs: list[Any], limits: WaitLimits, on_quiet: Callable[[], None]) -> list[Any]:
    """``ray.wait`` for one of ``refs``, ``check_s`` at a time; ``on_quiet`` runs whenever none
    arrived in that time (it raises when the work cannot arrive, or ends what blocks it)."""
    import ray

    while True:
        ready, _ = ray.wait(refs, num_returns=1, timeout=limits.check_s)
        if ready:
            return ready
        on_quiet()
