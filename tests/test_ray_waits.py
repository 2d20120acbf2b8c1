"""Every wait on a Ray cluster ends (issue 37 item 10): a quick check (a replica's info) has a
fixed deadline, a wait for work checks liveness each ``IMPRINT_RAY_CHECK_S`` instead (a batch may
legitimately run long): a frozen worker is killed and its work re-queued, a replica no node can
place and a cluster that stops answering end in one line naming the cluster and the fix."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import numpy as np
import pytest
from ray_runs import local_pass, pass_on_executor, tiny_factory

from imprint.errors import ConfigError
from imprint.executors import ExecutorConfig, make_executor
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

ray = pytest.importorskip("ray", reason="Ray is the [ray] extra (in [dev]): pip install ray")

from imprint.executors.ray_setup import check_replica  # noqa: E402
from imprint.executors.ray_waits import (  # noqa: E402
    ClusterLostError,
    WaitLimits,
    check_cluster,
    unanswered,
)

WATCHDOG_S = 240  # seconds; the run takes 10-90 s (a replacement worker loads the model)
TEXTS = [f"Numbers like {i}, {i * 10} and {i * 100} appear in many documents." for i in range(24)]


@pytest.fixture
def quick_limits(monkeypatch):
    """Liveness checked every second, a quick answer awaited 2 s."""
    for var, value in (("CHECK_S", "1"), ("REPLY_S", "2")):
        monkeypatch.setenv(f"IMPRINT_RAY_{var}", value)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_replica_check_on_an_actor_that_never_answers_ends_at_its_deadline(local_ray):
    class Silent:  # defined here: pickled by value for the worker
        def info(self) -> dict:
            time.sleep(3600)
            return {}

    actor = ray.remote(num_cpus=0)(Silent).remote()
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError) as caught:
            check_replica("target", "target-0", actor.info.remote(), "fp", reply_s=2)
    finally:
        ray.kill(actor)
    assert time.monotonic() - started < 10  # before: ray.get waited for ever
    message = str(caught.value)
    assert "\n" not in message
    assert "Ray worker target-0 on the Ray cluster at '" in message  # the GCS address joined
    assert "did not answer within 2 s" in message and "IMPRINT_RAY_REPLY_S" in message


def test_a_frozen_worker_is_killed_and_its_work_runs_elsewhere(
    local_ray, quick_limits, tiny_model_dir
):
    """SIGSTOP on a busy worker's process: Ray sees nothing wrong (the process and its node
    live), so before the run waited for ever; now its ping goes unanswered, it is killed, its
    batches run on the other worker and a replacement, and nothing is lost or stored twice."""
    factory, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=2), {"target": factory})
    frozen: list[int] = []
    watchdog: list[threading.Timer] = []

    def progress(label: str, total: int):
        def advance(n: int) -> None:
            actors = executor.actors()  # type: ignore[attr-defined]
            if not frozen and len(actors) == 2:  # at the first result, freeze one worker
                actor = sorted(actors.items())[0][1]
                pid = ray.get(actor.ping.options(concurrency_group="ping").remote(), timeout=10)
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
                # a watchdog, so the test cannot hang where the check is missing: it kills the
                # frozen process (which Ray does see) long after the check should have
                watchdog.append(threading.Timer(WATCHDOG_S, _kill, (pid,)))
                watchdog[0].start()

        return advance

    cache = SignalCache(None)
    started = time.monotonic()
    try:
        signals, report = pass_on_executor(executor, backend, TEXTS, cache, progress)
    finally:  # after the executor is closed
        for timer in watchdog:
            timer.cancel()
        for pid in frozen:  # the executor killed it through Ray; make sure it is gone
            _kill(pid)
    took = time.monotonic() - started
    expected = local_pass(backend, TEXTS)
    for got, want in zip(signals.get(), expected.get(), strict=True):
        np.testing.assert_allclose(got.logp, want.logp, atol=1e-5)
    stats = executor.stats
    # found by the ping (the watchdog's kill is not counted), well before the watchdog
    assert frozen and stats.unresponsive_workers == 1 and stats.lost_workers == 1
    assert sum(stats.executed.values()) == report.per_model["target"].executed == len(TEXTS)
    assert len(cache) == len(TEXTS)
    assert took < WATCHDOG_S, took


def test_a_worker_no_node_can_place_ends_naming_the_fix(
    local_ray, quick_limits, tiny_model_dir, monkeypatch
):
    """The cluster has 2 CPUs (so --workers 2 passes the size check) but another job holds one:
    the second worker waits to be placed for ever before; now the run ends after PLACE_S."""
    monkeypatch.setenv("IMPRINT_RAY_PLACE_S", "4")

    class Holder:
        def ready(self) -> bool:
            return True

    holder = ray.remote(num_cpus=1)(Holder).remote()
    ray.get(holder.ready.remote(), timeout=60)
    factory, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=2), {"target": factory})
    watchdog = threading.Timer(WATCHDOG_S, ray.kill, (holder,))  # where the check is missing,
    watchdog.start()  # the run would wait for ever; this ends it (and the test fails)
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError) as caught:
            run_plan(TEXTS[:4], [Need()], {"target": backend}, SignalCache(None), executor=executor)
    finally:
        watchdog.cancel()
        executor.close()
        ray.kill(holder)
    assert time.monotonic() - started < WATCHDOG_S
    message = str(caught.value)
    assert "has not placed Ray worker target-" in message and "\n" not in message
    assert "1 free CPU(s)" in message and "--workers" in message
    assert "IMPRINT_RAY_PLACE_S" in message


def test_a_cluster_that_stops_answering_is_named_with_the_fix(monkeypatch):
    def gone():
        raise ConnectionError("GCS unreachable\nfailed to connect to 10.0.0.5:6379")

    monkeypatch.setattr(ray, "nodes", gone)
    with pytest.raises(ClusterLostError) as caught:
        check_cluster("ray://user:secret@10.0.0.5:10001")
    message = str(caught.value)
    assert message.startswith("the Ray cluster at 'ray://user:***@10.0.0.5:10001': it stopped")
    assert "secret" not in message and "resumes from the cache" in message
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": False}])
    with pytest.raises(ClusterLostError, match="no live node left"):
        check_cluster("10.0.0.5:6379")


def test_the_wait_limits_come_from_the_environment(monkeypatch):
    assert WaitLimits.from_env() == WaitLimits()
    monkeypatch.setenv("IMPRINT_RAY_CHECK_S", "5")
    assert WaitLimits.from_env().check_s == 5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv("IMPRINT_RAY_REPLY_S", bad)
        with pytest.raises(ConfigError, match=r"IMPRINT_RAY_REPLY_S=.*seconds > 0 \(default 60\)"):
            WaitLimits.from_env()
    monkeypatch.setenv("IMPRINT_RAY_REPLY_S", "0")
    with pytest.raises(ConfigError, match="IMPRINT_RAY_REPLY_S"):
        make_executor(ExecutorConfig(kind="ray"), {})  # before any work: no Ray started
    assert unanswered({}, 1.0) == []
