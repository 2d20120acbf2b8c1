"""A real multi-node Ray cluster on this machine, for tests: one ``ray start --head`` and more
``ray start --address`` nodes, each a separate raylet with its own CPUs and a custom resource
named after it (so work can be pinned to a node).

Every node runs ``ray start --block`` as a child of the test process, with its own temp dir and
free ports, so the cluster shares nothing with other Ray instances on the machine. Nodes are
stopped (or killed, to lose one mid-run) by the process ids of that node only: never ``ray stop``,
which stops every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

RAY_CLI = str(Path(sys.executable).with_name("ray"))
#: the GCS marks a silent node dead after about 1.5 s (Ray's default is about 15 s)
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}
OBJECT_STORE_BYTES = 80 * 2**20  # Ray's minimum is 75 MiB; the tests move kilobytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str  # also the node's custom resource
    process: subprocess.Popen[bytes]
    log: Path
    node_id: str = ""

    def pids(self) -> list[int]:
        """The ``ray start`` process and everything it started (raylet, agents, workers:
        Ray's workers call setsid, so a process group would miss them)."""
        try:
            root = psutil.Process(self.process.pid)
            return [root.pid, *(p.pid for p in root.children(recursive=True))]
        except psutil.NoSuchProcess:
            return []


@dataclass
class RayCluster:
    """Start with :meth:`start` (head) and :meth:`add_node`; :meth:`stop` at the end."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rc", dir="/tmp")))
    nodes: dict[str, Node] = field(default_factory=dict)
    port: int = 0
    #: token authentication: the token a driver must present (kept in a file of ``root``,
    #: never in ~/.ray); ``None``: authentication off
    token: str | None = None

    @property
    def token_path(self) -> Path:
        return self.root / "auth_token"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, cpus: int = 1, timeout: float = 120) -> str:
        """The head node (GCS, its raylet, no dashboard UI); returns the cluster's address."""
        self.port = free_port()
        head = ["--head", "--port", str(self.port), "--include-dashboard", "false"]
        node = self._spawn("head", [*head, "--dashboard-port", str(free_port())], cpus)
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if node.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start: {_tail(node.log)}")
            time.sleep(0.2)
        return self.address

    def add_node(self, name: str, *, cpus: int = 1) -> Node:
        """A worker node joining the head (a separate raylet with ``cpus`` CPUs)."""
        return self._spawn(name, ["--address", self.address], cpus)

    def wait_alive(self, timeout: float = 120) -> dict[str, str]:
        """Wait until every started node is alive in ``ray.nodes()``; node name -> node id.
        Connects this process for the check and disconnects again."""
        import ray

        ray.init(address=self.address, log_to_driver=False, logging_level="error")
        try:
            deadline = time.monotonic() + timeout
            while True:
                alive = {
                    name: n["NodeID"]
                    for n in ray.nodes()
                    if n["Alive"]
                    for name in self.nodes
                    if name in n["Resources"]
                }
                if len(alive) == len(self.nodes):
                    break
                dead = [n for n in self.nodes.values() if n.process.poll() is not None]
                if dead or time.monotonic() > deadline:
                    log = (dead or list(self.nodes.values()))[0].log
                    raise RuntimeError(f"Ray nodes did not come up: {_tail(log)}")
                time.sleep(0.2)
        finally:
            ray.shutdown()
        for name, node_id in alive.items():
            self.nodes[name].node_id = node_id
        return alive

    def kill_node(self, name: str) -> list[int]:
        """Kill every process of one node at once (SIGKILL: a machine lost, nothing said)."""
        node = self.nodes[name]
        pids = node.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.process.wait(timeout=30)
        return pids

    def stop(self) -> None:
        """Kill every node's processes by pid (a graceful ``ray start`` shutdown takes 10 s
        per node; nothing of a test cluster is worth keeping) and remove the temp dir."""
        for name in self.nodes:
            self.kill_node(name)
        shutil.rmtree(self.root, ignore_errors=True)

    def _spawn(self, name: str, args: list[str], cpus: int) -> Node:
        ports = [
            "--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port",
        ]  # fmt: skip
        command = [
            RAY_CLI, "start", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
            "--num-cpus", str(cpus), "--resources", json.dumps({name: 1}),
            "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", str(self.root / name),
            *(x for flag in ports for x in (flag, str(free_port()))), *args,
        ]  # fmt: skip
        # Ray's `ray start` turns token authentication on when ~/.ray/auth_token exists
        # (any private ray.init() writes one): say which, with this cluster's own token file
        env: dict[str, Any] = {**os.environ, "RAY_AUTH_MODE": "disabled", **FAST_HEALTH_CHECKS}
        env.pop("RAY_AUTH_TOKEN", None)
        if self.token is not None:
            self.token_path.write_text(self.token, encoding="utf-8")
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_path))
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.nodes[name] = node = Node(name, process, log)
        return node


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {log})"
