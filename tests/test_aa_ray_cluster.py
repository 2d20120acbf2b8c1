"""``--executor ray --address`` against a real 2-node Ray cluster started on this machine.

The cluster (see ``ray_cluster.py``): a ``ray start --head`` node and a second ``ray start
--address`` node, separate raylets with one CPU each, so a pool of two workers has one on each
node. A run there gives the local run's scores, with work done on both nodes; a node killed
mid-run (all its processes, SIGKILL) costs only what it had not delivered: the run finishes on
the other node, its scores equal the local run's and no request is stored twice. The tests run
in file order: the node-killing test comes after those that need both nodes.

Named to run first (test_aa_): in one pytest process, a driver that earlier started and shut
down a private Ray could not place actors on a cluster joined afterwards (a user's process runs
one executor; to investigate).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import wikimia_subset
from ray_cluster import RayCluster, free_port

from imprint.errors import ConfigError
from imprint.executors import ExecutorConfig
from imprint.executors.ray_setup import check_address
from imprint.run import RunConfig, execute_run

ray = pytest.importorskip("ray", reason="Ray is the [ray] extra (in [dev]): pip install ray")

# three request kinds of the target: log-prob passes, sampled continuations, gradient norms
ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "samia", "gradnorm")
KINDS = {"logprobs", "sample", "gradnorm"}


@pytest.fixture(scope="module")
def cluster():
    nodes = RayCluster()
    try:
        nodes.start(cpus=1)
        nodes.add_node("b", cpus=1)
        nodes.wait_alive()
        yield nodes
    finally:
        nodes.stop()


def _config(model: Path, tmp: Path, name: str, **executor: object) -> RunConfig:
    return RunConfig(
        model=str(model),
        data=str(wikimia_subset(tmp, 8)),
        out=tmp / name,
        attacks=ATTACKS,
        params={"samia": {"n_samples": 2, "max_tokens": 6}},
        shared_args={"device": "cpu"},
        token_budget=96,  # many small batches, so each worker's shards hold several
        cache=tmp / f"{name}.sqlite",
        progress=False,
        n_bootstrap=20,
        blind=False,
        executor=ExecutorConfig(**executor),  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def local_scores(tiny_model_dir, tmp_path_factory):
    return execute_run(_config(tiny_model_dir, tmp_path_factory.mktemp("local"), "local")).scores


def _assert_equal_scores(got: dict, want: dict) -> None:
    assert got.keys() == want.keys() >= set(ATTACKS)
    for column, values in want.items():
        np.testing.assert_allclose(got[column], values, rtol=0, atol=1e-5, err_msg=column)


def test_the_address_check_answers_at_once_for_the_real_head_and_a_refused_port(cluster):
    started = time.monotonic()
    check_address(cluster.address)
    assert time.monotonic() - started < 1.0
    dead = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        check_address(f"127.0.0.1:{dead}")
    assert time.monotonic() - started < 1.0
    message = str(err.value)
    assert "\n" not in message and f"nothing answers at 127.0.0.1:{dead}" in message
    assert "ray start --head" in message


def test_every_kind_of_a_run_on_two_nodes_runs_on_workers_and_equals_the_local_run(
    cluster, local_scores, tiny_model_dir, tmp_path
):
    config = _config(
        tiny_model_dir, tmp_path, "ray", kind="ray", address=cluster.address, workers=2
    )
    remote = execute_run(config)
    _assert_equal_scores(remote.scores, local_scores)
    stats = remote.manifest["executor"]
    assert stats["kind"] == "ray" and stats["lost_workers"] == stats["retried_shards"] == 0
    written = json.loads((tmp_path / "ray" / "manifest.json").read_text(encoding="utf-8"))
    assert written["config"]["executor"]["address"] == cluster.address
    assert written["executor"] == json.loads(json.dumps(stats))
    # two workers, one on each node (each node has one CPU), by Ray node id
    assert stats["nodes"] == {
        "target-0": stats["nodes"]["target-0"],
        "target-1": stats["nodes"]["target-1"],
    }
    assert set(stats["nodes"].values()) == {n.node_id for n in cluster.nodes.values()}
    # every kind ran on the workers, none in the driver; the log-prob passes on both nodes
    counts, where = remote.manifest["requests"]["target"], stats["where"]["target"]
    assert set(counts) == set(where) == KINDS
    for kind in KINDS:
        assert set(where[kind]) <= {"target-0", "target-1"}, kind
        assert sum(where[kind].values()) == counts[kind]["executed"] == counts[kind]["requests"]
    assert {stats["nodes"][w] for w in where["logprobs"]} == set(stats["nodes"].values())


def test_a_node_killed_mid_run_loses_nothing_and_repeats_nothing(
    cluster, local_scores, tiny_model_dir, tmp_path, monkeypatch
):
    """At the first result stored, every process of node b dies (raylet, agents, its worker):
    node b's undelivered batches are queued again on the head's worker, which then runs the
    other kinds alone."""
    from imprint.executors.base import ExecutorStats

    killed: list[int] = []
    add = ExecutorStats.add

    def add_then_kill(self: ExecutorStats, *args: object, **kwargs: object) -> None:
        add(self, *args, **kwargs)  # type: ignore[arg-type]
        if not killed:
            killed.extend(cluster.kill_node("b"))

    monkeypatch.setattr(ExecutorStats, "add", add_then_kill)
    config = _config(
        tiny_model_dir, tmp_path, "ray", kind="ray", address=cluster.address, workers=2
    )
    remote = execute_run(config)
    assert len(killed) >= 3  # ray start, raylet, agents and node b's worker
    _assert_equal_scores(remote.scores, local_scores)
    stats = remote.manifest["executor"]
    assert stats["lost_workers"] == 1 and stats["retried_shards"] >= 1
    # the replacement is started but cannot be placed (the head's one CPU is busy): the
    # surviving worker, on the head, finishes the work
    assert stats["started_workers"] == 3
    head = cluster.nodes["head"].node_id
    on_b = [w for w, node in stats["nodes"].items() if node == cluster.nodes["b"].node_id]
    assert len(on_b) == 1 and set(stats["nodes"].values()) == {head, cluster.nodes["b"].node_id}
    counts, where = remote.manifest["requests"]["target"], stats["where"]["target"]
    assert set(counts) == set(where) == KINDS
    # node b delivered results of at most the kind running when it died; every later kind
    # ran on the head's worker alone
    assert sum(on_b[0] in where[kind] for kind in KINDS) <= 1
    assert sum(stats["nodes"][w] == head for kind in KINDS for w in where[kind]) >= len(KINDS)
    # every request executed (delivered) once and stored once, for every kind
    assert sum(stats["executed"].values()) == sum(c["requests"] for c in counts.values())
    with sqlite3.connect(tmp_path / "ray.sqlite") as db:
        stored = dict(db.execute("SELECT kind, COUNT(*) FROM request_results GROUP BY kind"))
    assert stored == {kind: c["requests"] for kind, c in counts.items()}


def test_a_cluster_with_token_authentication_is_refused_with_how_to_pass_the_token(
    tmp_path, monkeypatch
):
    """`ray start` turns token authentication on where a token exists (any private Ray writes
    ~/.ray/auth_token); this process does not hold the cluster's token."""
    from imprint.executors.ray_setup import connect

    head = RayCluster(token=secrets.token_hex(16))
    try:
        address = head.start(cpus=1)
        monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "2")  # Ray retries 20 s
        with pytest.raises(ConfigError) as err:
            connect(ExecutorConfig(kind="ray", address=address))
    finally:
        head.stop()
    message = str(err.value)
    assert "\n" not in message and f"--address {address!r}: " in message
    assert "token authentication" in message and "RAY_AUTH_MODE=token" in message
    assert "RAY_AUTH_TOKEN_PATH" in message and head.token not in message
    assert not ray.is_initialized()
