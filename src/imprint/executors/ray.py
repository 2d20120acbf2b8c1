"""The Ray executor: planned batches of every request kind run on Ray actors, one replica each.

The driver plans (dedupes, looks up its store, batches) exactly as for the local executor; the
batches of one model role and request kind are dealt into shards (interleaved, so each shard
mixes long and short texts) and the shards queued on a pool of actors, each of which builds its
own replica of the backend from the run's factory for that role (a loaded model is never
pickled) and checks that its content fingerprint equals the driver's. A worker answers a batch
with the kind's own ``execute(replica, batch)`` (the kind class travels by reference); a role
the run registered no factory for runs on the driver (the stats' ``where`` says ``driver``).
An actor streams back one result per batch (a Ray streaming generator); the driver stores each
in its one store as it arrives (``ray.wait``), so the store never leaves the driver. When an
actor dies (lost machine, OOM kill, ``ray.kill``), the batches of its shards that have not
arrived are queued again for the other actors and a replacement actor is started: nothing
stored is run again, nothing is stored twice.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from imprint.errors import ConfigError
from imprint.executors.base import (
    BatchWork,
    ExecutorConfig,
    ExecutorStats,
    Factory,
    WorkerLostError,
)
from imprint.executors.local import LocalExecutor
from imprint.executors.ray_waits import (
    ENV,
    PING_GROUP,
    WaitLimits,
    check_cluster,
    cluster_name,
    free,
    placed,
    unanswered,
    wait_any,
)

DEPTH = 2  # shards queued per actor: the next is ready when one ends


class Replica:
    """A Ray actor's state: one backend replica built from a :class:`BackendFactory`."""

    def __init__(self, factory: Factory, threads: int, exit_after: int | None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import torch

            torch.set_num_threads(threads)  # as many torch threads as cores reserved
        except ImportError:  # a backend without torch (an API client)
            pass
        self.threads = threads
        self.backend = factory.build()
        self.exit_after = exit_after
        self.executed = 0

    def info(self) -> dict[str, Any]:
        """Where this replica runs (host, pid, Ray node, imprint version) and the fingerprint
        of the model it built."""
        from imprint.executors.ray_setup import replica_place

        fingerprint = str(self.backend.fingerprint)  # every role's model has one
        return {"fingerprint": fingerprint, **replica_place()}

    def ping(self) -> int:
        """This replica's process id; called in the actor's ping thread (see
        :mod:`imprint.executors.ray_waits`), so it answers while a batch runs."""
        return os.getpid()

    def run(self, kind: Any, shard: list[tuple[int, list[Any]]]) -> Iterator[tuple[int, list[Any]]]:
        """Answer a shard batch by batch with ``kind.execute(replica, batch)``, yielding
        ``(index, results)`` as each ends."""
        for index, batch in shard:
            self._count(len(batch))
            yield index, list(kind.execute(self.backend, batch))

    def _count(self, n: int) -> None:
        if self.exit_after is not None and self.executed + n > self.exit_after:
            os._exit(1)  # the test hook: die abruptly, mid-shard, as a lost machine does
        self.executed += n


@dataclass
class _Pool:
    """The actors serving one model role (``starting``: replacements loading their model)."""

    role: str
    factory: Factory
    fingerprint: str
    actors: dict[str, Any] = field(default_factory=dict)
    starting: dict[Any, tuple[str, Any]] = field(default_factory=dict)  # info ref -> actor
    started: int = 0
    launched: dict[str, float] = field(default_factory=dict)  # worker -> when it was created


class RayExecutor:
    """Runs one model role at a time on a pool of Ray actors (see the module docstring)."""

    kind = "ray"

    def __init__(self, config: ExecutorConfig, factories: Mapping[str, Factory]) -> None:
        self.config = config
        self.factories = dict(factories)
        self.stats = ExecutorStats()
        self._pool: _Pool | None = None
        self._started_ray = False
        self._local = LocalExecutor()  # for roles no worker can build a model for
        self._local.stats = self.stats  # counted with the rest (worker ``driver``)
        self.limits = WaitLimits.from_env()  # a bad value fails before any work

    def register(self, role: str, factory: Factory) -> None:
        """How a worker builds ``role`` (an auxiliary model the client loaded: an embedder, a
        masked LM, a surrogate); a role already registered keeps its factory."""
        self.factories.setdefault(role, factory)

    def factory(self, role: str) -> Factory | None:
        return self.factories.get(role)

    # -- the work ------------------------------------------------------------------------------
    def run_batches(self, work: BatchWork) -> None:
        role, kind, batches, advance = work.role, work.kind, work.batches, work.advance
        if not batches:
            return
        if role not in self.factories:
            self._local.run_batches(work)
            return
        pool = self._pool_for(role, work.fingerprint)

        def submit(actor: Any, shard: list[int]) -> Any:
            items = [(i, list(batches[i].requests)) for i in shard]
            return actor.run.options(num_returns="streaming").remote(kind, items)

        def arrived(index: int, results: Any) -> None:
            work.on_results(index, list(results))
            if advance is not None:
                advance(batches[index].units)

        sizes = [len(b.requests) for b in batches]
        self._schedule(pool, sizes, submit, arrived, kind.kind)

    # -- scheduling ----------------------------------------------------------------------------
    def _schedule(
        self,
        pool: _Pool,
        sizes: list[int],
        submit: Callable[[Any, list[int]], Any],
        arrived: Callable[[int, Any], None],
        kind: str,
    ) -> None:
        """Deal batches into shards, keep every actor busy, store results as they arrive and
        queue again what a lost actor did not deliver (a replacement joins once its model is
        loaded and checked; the others work on meanwhile)."""
        import ray

        from imprint.executors.ray_setup import check_replica

        queue = deque(_shards(len(sizes), len(pool.actors) * self.config.shards_per_worker))
        self.stats.shards += len(queue)
        done: set[int] = set()
        inflight: dict[Any, tuple[str, list[int]]] = {}
        while queue or inflight:
            self._fill(pool, queue, inflight, done, submit)
            if not inflight and not pool.starting:
                raise self._all_lost(pool, len(done), len(sizes))
            ready = wait_any(
                [*inflight, *pool.starting], self.limits, lambda: self._quiet(pool, inflight)
            )
            if ready[0] in pool.starting:
                worker, actor = pool.starting.pop(ready[0])
                info = check_replica(
                    pool.role, worker, ready[0], pool.fingerprint,
                    address=self.config.address, reply_s=self.limits.reply_s,
                )  # fmt: skip
                self.stats.nodes[worker] = str(info.get("node", ""))
                pool.actors[worker] = actor
                continue
            gen: Any = ready[0]
            worker, shard = inflight[gen]
            try:  # the result is ready: only its transfer from the worker's node is waited for
                index, payload = ray.get(next(gen), timeout=self.limits.reply_s)
            except StopIteration:
                del inflight[gen]
                continue
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.ActorUnavailableError,
                ray.exceptions.GetTimeoutError,  # a node that cannot hand over its result
            ):
                del inflight[gen]
                if worker in pool.actors:
                    ray.kill(pool.actors[worker], no_restart=True)
                self._lost(pool, worker, [i for i in shard if i not in done], queue)
                continue
            except ray.exceptions.RayTaskError as err:
                self._close_pool()
                raise err.as_instanceof_cause() from None
            if index not in done:  # never stored twice (a shard is re-run only for the
                arrived(index, payload)  # batches its lost actor did not deliver)
                done.add(index)
                self.stats.add(worker, sizes[index], pool.role, kind)

    def _quiet(self, pool: _Pool, inflight: Mapping[Any, tuple[str, list[int]]]) -> None:
        """Nothing arrived for ``check_s``: the cluster must answer, starting replicas must be
        placed and built in time, and a busy replica that does not answer a ping within
        ``reply_s`` (a frozen process, a node cut off) is killed, so its work is queued again."""
        import ray

        self._check_starting(pool.starting, pool)  # the cluster's check included
        busy = {w: pool.actors[w] for w, _ in inflight.values() if w in pool.actors}
        for worker in unanswered(busy, self.limits.reply_s):
            self.stats.unresponsive_workers += 1
            ray.kill(pool.actors[worker], no_restart=True)  # its streams fail: _lost re-queues

    def _check_starting(self, starting: Mapping[Any, tuple[str, Any]], pool: _Pool) -> None:
        """Refuse a starting replica that no node has taken within ``place_s`` while the cluster
        has no free resources for it (other work holds them: no progress is possible), or that
        has not built its model within ``build_s``."""
        check_cluster(self.config.address)
        now, cpus = time.monotonic(), self.config.worker_cpus
        gpus = 1 if starting and self._gpus() else 0
        where = cluster_name(self.config.address)
        for worker, actor in starting.values():
            waited = now - pool.launched.get(worker, now)
            if waited > self.limits.place_s and placed(actor) is False and not free(cpus, gpus):
                gpu = " and a free GPU" if gpus else ""
                raise ConfigError(
                    f"{where} has not placed Ray worker {worker} in {waited:.0f} s: no node has "
                    f"{self.config.worker_cpus} free CPU(s){gpu} for it (other jobs hold "
                    "them?). Free them (`ray status` lists the demand), pass fewer --workers, "
                    f"or wait longer ({ENV['place_s']}, now "
                    f"{self.limits.place_s:g} s)"
                )
            if waited > self.limits.build_s:
                raise ConfigError(
                    f"Ray worker {worker} on {where} has not built model {pool.role!r} in "
                    f"{waited:.0f} s (its process is alive): check its log (a download stuck?); "
                    f"allow longer with {ENV['build_s']} (now {self.limits.build_s:g} s)"
                )

    def _fill(
        self,
        pool: _Pool,
        queue: deque[list[int]],
        inflight: dict[Any, tuple[str, list[int]]],
        done: set[int],
        submit: Callable[[Any, list[int]], Any],
    ) -> None:
        """Give each live actor shards until it has ``DEPTH`` queued."""
        load = {worker: 0 for worker in pool.actors}
        for worker, _ in inflight.values():
            if worker in load:
                load[worker] += 1
        for worker, actor in pool.actors.items():
            while load[worker] < DEPTH and queue:
                shard = [i for i in queue.popleft() if i not in done]
                if shard:
                    inflight[submit(actor, shard)] = (worker, shard)
                    load[worker] += 1

    def _lost(self, pool: _Pool, worker: str, left: list[int], queue: deque[list[int]]) -> None:
        """An actor died: queue what it owed first, replace it once (replacements are capped
        at the pool's size)."""
        if left:
            queue.appendleft(left)
            self.stats.retried_shards += 1
        if worker in pool.actors:
            del pool.actors[worker]
            self.stats.lost_workers += 1
            if pool.started < 2 * self._workers():
                for new, actor in self._launch(pool, 1).items():
                    pool.starting[actor.info.remote()] = (new, actor)

    def _all_lost(self, pool: _Pool, done: int, total: int) -> WorkerLostError:
        return WorkerLostError(
            f"every Ray worker for model {pool.role!r} was lost ({pool.started} started, "
            f"{self.stats.lost_workers} lost); {done} of {total} batches were stored in the "
            "cache. Check the cluster (ray status, the workers' logs: out of memory?); "
            "running the same command again resumes from the cache"
        )

    # -- pools ---------------------------------------------------------------------------------
    def actors(self) -> dict[str, Any]:
        """The live actors of the current pool by worker id (e.g. to kill one in a test)."""
        return dict(self._pool.actors) if self._pool is not None else {}

    def _pool_for(self, role: str, fingerprint: str) -> _Pool:
        """The actors for ``role`` (one role at a time: another role's pool is closed first)."""
        if self._pool is not None and self._pool.role == role:
            return self._pool
        self._close_pool()
        started = time.perf_counter()
        self._ensure_ray()
        pool = _Pool(role, self.factories[role], fingerprint)
        self._start_actors(pool, self._placeable())
        self._pool = pool
        self.stats.start_s += time.perf_counter() - started
        return pool

    def _start_actors(self, pool: _Pool, n: int) -> None:
        """Start ``n`` actors and wait for their models; a fingerprint unlike the driver's, or a
        model a worker cannot build, is an error that names the worker's host."""
        import ray

        from imprint.executors.ray_setup import check_replica

        new = self._launch(pool, n)
        pending = {a.info.remote(): (w, a) for w, a in new.items()}
        try:
            while pending:
                quiet = lambda: self._check_starting(pending, pool)  # noqa: E731
                ready = wait_any(list(pending), self.limits, quiet)
                for ref in ready:
                    worker, _ = pending.pop(ref)
                    info = check_replica(
                        pool.role, worker, ref, pool.fingerprint,
                        address=self.config.address, reply_s=self.limits.reply_s,
                    )  # fmt: skip
                    self.stats.nodes[worker] = str(info.get("node", ""))
        except BaseException:  # refused (or interrupted): no actor of this pool outlives it
            for actor in new.values():
                ray.kill(actor)
            raise
        pool.actors.update(new)

    def _launch(self, pool: _Pool, n: int) -> dict[str, Any]:
        """Create ``n`` actors (each builds its replica in the background)."""
        import ray

        from imprint.executors.ray_setup import actor_options

        options = actor_options(self.config, self._gpus())
        # pings run in their own thread (answered while a batch runs); work keeps one thread
        cls = ray.remote(concurrency_groups={PING_GROUP: 1})(Replica)  # type: ignore[call-overload]
        new: dict[str, Any] = {}
        for _ in range(n):
            exit_after = self.config.exit_after if pool.started == 0 else None
            worker = f"{pool.role}-{pool.started}"
            new[worker] = cls.options(**options).remote(  # type: ignore[attr-defined]
                pool.factory, self.config.worker_cpus, exit_after
            )
            pool.launched[worker] = time.monotonic()
            pool.started += 1
        self.stats.started_workers += n
        return new

    def _workers(self) -> int:
        from imprint.executors.ray_setup import default_workers

        return self.config.workers or default_workers(self.config, self._gpus())

    def _placeable(self) -> int:
        """Workers for the next pool: the run's number, or after a lost node as many as the
        cluster can still place (the first pool refused a number it could not place)."""
        if not self.stats.lost_workers:
            return self._workers()
        import ray

        gpus = self._gpus()
        cpus = int(ray.cluster_resources().get("CPU", 0)) // self.config.worker_cpus
        return max(1, min(self._workers(), gpus or cpus))

    def _gpus(self) -> int:
        import ray

        return int(ray.cluster_resources().get("GPU", 0))

    def _ensure_ray(self) -> None:
        import ray

        from imprint.executors.ray_setup import check_resources, connect

        if not ray.is_initialized():
            connect(self.config)
            self._started_ray = True
        if not self.stats.lost_workers:  # after a lost node, later pools shrink to fit
            check_resources(self.config, self._workers(), self._gpus())

    def _close_pool(self) -> None:
        if self._pool is None:
            return
        import ray

        for actor in [*self._pool.actors.values(), *(a for _, a in self._pool.starting.values())]:
            ray.kill(actor)
        self._pool = None

    def close(self) -> None:
        """Stop the actors, and Ray itself when this executor started it."""
        self._close_pool()
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False


def _shards(n_batches: int, n_shards: int) -> list[list[int]]:
    """Batch indices dealt round-robin into at most ``n_shards`` non-empty shards."""
    k = max(1, min(n_batches, n_shards))
    return [list(range(s, n_batches, k)) for s in range(k)]
