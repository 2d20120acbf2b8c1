"""Joining or starting Ray, sizing the pool, and checking each replica before it gets work.

Below :mod:`imprint.executors.base` (which imports :func:`check_address` and
:func:`mask_address` from here): the executor's options are read through :class:`RayOptions`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import urlsplit

from imprint.errors import ConfigError

__all__ = [
    "actor_options",
    "check_address",
    "check_replica",
    "check_resources",
    "cluster_name",
    "connect",
    "default_workers",
    "mask_address",
    "replica_place",
]


class RayOptions(Protocol):
    """What Ray's set-up reads of an :class:`~imprint.executors.base.ExecutorConfig`."""

    @property
    def address(self) -> str | None: ...

    @property
    def worker_cpus(self) -> int: ...


#: environment passed on to the actors (offline switches, imprint's converted-model cache)
ENV_KEYS = ("IMPRINT_CACHE_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME")
#: the port each address form reaches when it names none: Ray client, GCS
DEFAULT_PORTS = {"ray": 10001, "": 6379}
#: the environment variable for the deadline of a quick answer (see imprint.executors.ray_waits)
REPLY_ENV = "IMPRINT_RAY_REPLY_S"
#: seconds the address check waits for a TCP connection, then for Ray's protocol to answer (a
#: live head does both in milliseconds)
CONNECT_TIMEOUT_S = 3.0
#: Ray's own knobs for joining a cluster, bounded while imprint joins one (a value set in the
#: environment wins): one attempt (Ray's default is 20), each waiting at most 20 s for the GCS
#: (the second is read when Ray is first imported, so it bounds only a join in a fresh process)
JOIN_LIMITS = {"RAY_gcs_server_port_wait_time_s": "1", "RAY_py_gcs_connect_timeout_s": "20"}
# an HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS and its client
# server) answers with a SETTINGS frame of its own (frame type 4 in the 9-byte frame header)
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


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


def cluster_name(address: str | None = None) -> str:
    """How errors name the cluster: the address the user gave (password masked), else the GCS
    address Ray joined."""
    if address and address.strip() not in ("auto", "local"):
        return f"the Ray cluster at {mask_address(address)!r}"
    try:
        import ray

        gcs = ray.get_runtime_context().gcs_address
    except Exception:  # a Ray client, or Ray gone: no GCS address to read
        gcs = None
    return f"the Ray cluster at {gcs!r}" if gcs else "the Ray cluster"


def _masked(text: str, address: str) -> str:
    """``text`` with the address's password (if any) replaced, wherever Ray repeated it."""
    userinfo = address.rpartition("@")[0].rpartition("//")[2]
    password = userinfo.split(":", 1)[1] if ":" in userinfo else userinfo
    return text.replace(password, "***") if password else text


def check_address(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse, before any work, a Ray address where nothing answers: one TCP connection to its
    host and port, at most ``timeout`` seconds (``ray.init`` itself retries an unreachable GCS
    for minutes). ``None`` (a private Ray) and ``auto`` (found by Ray on this machine) pass."""
    if address is None or address.strip() in ("auto", "local"):
        return
    shown = mask_address(address) or ""
    if address.partition("://")[0].strip().lower() in ("http", "https"):  # a dashboard's URL
        raise ConfigError(
            f"--address {shown!r} is a web address (the Ray dashboard's, for job submission), "
            "not one to join: pass the head's GCS address HOST:PORT (e.g. 127.0.0.1:6379, "
            "which `ray start --head` prints), or ray://HOST:10001 for a Ray client"
        )
    host: str | None = None
    port: int | None = None
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is no number, or out of range
        pass
    if not host or port is None:
        raise ConfigError(
            f"--address {shown!r} is not a Ray address; pass HOST:PORT (the head's GCS, e.g. "
            "10.0.0.5:6379), ray://HOST:10001, or auto on the head machine"
        )
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise ConfigError(
            f"--address {shown!r}: nothing answers at {host}:{port} ({reason}, within "
            f"{timeout:g} s). Start the cluster with `ray start --head` on that machine (GCS port "
            "6379, client port 10001) and check the address, or drop --address to start a "
            "private Ray here"
        ) from None
    with conn:
        said = _not_grpc(conn, timeout)
    if said is not None:  # e.g. a web server: ray.init would wait for it for minutes
        raise ConfigError(
            f"--address {shown!r}: something answers at {host}:{port}, but not Ray's protocol "
            f"({said}): it is not a Ray head (a web server, the dashboard, another service?). "
            "Pass the address `ray start --head` prints (HEAD:6379, or ray://HEAD:10001), or "
            "auto on the head machine"
        )


def _not_grpc(conn: socket.socket, timeout: float) -> str | None:
    """None when the service on ``conn`` answers an HTTP/2 preface as gRPC does (a SETTINGS
    frame), else what it did instead; None too under ``RAY_USE_TLS`` (the handshake is TLS)."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    head = b""
    try:
        conn.settimeout(timeout)
        conn.sendall(_H2_HELLO)
        while len(head) < 9 and (chunk := conn.recv(64)):
            head += chunk
    except TimeoutError:
        pass
    except OSError as err:
        return f"the connection failed: {err.strerror or err}"
    if len(head) >= 9 and head[3] == 4:
        return None
    if not head:
        return f"no answer to a gRPC handshake within {timeout:g} s"
    first = head.decode("utf-8", "replace").splitlines()[0][:60]
    return f"it answered {first!r}"


def connect(config: RayOptions) -> None:
    """``ray.init``: a private Ray on this machine (no address), or the cluster at ``address``."""
    import ray

    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if config.address is None:
            ray.init(include_dashboard=False, **quiet)  # type: ignore[arg-type]
        else:
            with _join_limits():
                ray.init(address=config.address, **quiet)  # type: ignore[arg-type]
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ConfigError(_join_failed(config.address, err)) from err


@contextmanager
def _join_limits() -> Iterator[None]:
    """:data:`JOIN_LIMITS` in the environment while Ray joins a cluster (values already set
    are kept), as before afterwards."""
    added = [k for k in JOIN_LIMITS if k not in os.environ]
    os.environ.update({k: JOIN_LIMITS[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _join_failed(address: str | None, err: Exception) -> str:
    """One line saying why Ray could not be started or joined, and what to do."""
    where = mask_address(address) or "a local Ray"
    if address and _token_refused(err):
        return (
            f"--address {where!r}: the Ray cluster there uses token authentication and refused "
            "this process (`ray start` turns it on when the head machine has a token, e.g. "
            "~/.ray/auth_token, which any earlier private Ray writes). Set RAY_AUTH_MODE=token "
            "and the cluster's token in this shell (RAY_AUTH_TOKEN=..., or "
            "RAY_AUTH_TOKEN_PATH=FILE; `ray get-auth-token` on the head prints it), or start "
            "the cluster with RAY_AUTH_MODE=disabled on a trusted network"
        )
    said = _last_line(err)  # Ray's message can be a whole traceback
    said = _masked(said, address) if address else said
    return (
        f"--executor ray could not start or join {where!r}: {said}. For a cluster, run "
        "`ray start --head` on the head machine and pass --address auto there, or the "
        "HEAD:6379 address it prints from another machine of the cluster (ray://HEAD:10001 "
        "needs `pip install 'ray[client]'`); without --address a private Ray is started here"
    )


def _token_refused(err: BaseException | None) -> bool:
    """Whether Ray's error (or one it was raised from) is a refused authentication token."""
    while err is not None:
        if "InvalidAuthToken" in str(err) or type(err).__name__ == "AuthenticationError":
            return True
        err = err.__cause__ or err.__context__
    return False


def default_workers(config: RayOptions, gpus: int) -> int:
    """One replica per GPU of the cluster, else one per ``worker_cpus`` cores."""
    import ray

    if gpus:
        return gpus
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // config.worker_cpus)


def check_resources(config: RayOptions, workers: int, gpus: int) -> None:
    """Refuse a pool the cluster cannot place (its actors would wait for ever)."""
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 0))
    if gpus and workers > gpus:
        raise ConfigError(
            f"--workers {workers} asks for one GPU each but the Ray cluster has {gpus}; pass "
            f"--workers {gpus} or fewer, or add GPU machines (ray start --address HEAD:6379)"
        )
    need = workers * config.worker_cpus
    if need > cpus:
        raise ConfigError(
            f"--workers {workers} x {config.worker_cpus} cores each needs {need} CPUs but the "
            f"Ray cluster has {cpus}; pass --workers {max(1, cpus // config.worker_cpus)} or "
            "fewer, or add machines (ray start --address HEAD:6379 on each)"
        )


def actor_options(config: RayOptions, gpus: int) -> dict[str, Any]:
    """Resources of one replica: its cores (and one GPU when the cluster has GPUs); Ray does
    not restart it (the executor re-queues its work and starts a replacement itself)."""
    env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return {
        "num_cpus": config.worker_cpus,
        "num_gpus": 1 if gpus else 0,
        "max_restarts": 0,
        "runtime_env": {"env_vars": env},
    }


def replica_place() -> dict[str, Any]:
    """Where the calling Ray worker runs: its host, process, Ray node id (two nodes on one
    machine share a host name) and imprint version (for :func:`check_replica`)."""
    import ray

    from imprint import __version__

    node = ray.get_runtime_context().get_node_id()
    return {"host": socket.gethostname(), "pid": os.getpid(), "node": node, "imprint": __version__}


def check_replica(
    role: str,
    worker: str,
    ref: Any,
    fingerprint: str,
    *,
    address: str | None = None,
    reply_s: float = 60.0,
) -> dict[str, Any]:
    """Wait at most ``reply_s`` for a replica's ``info()`` (a quick answer: callers wait for the
    replica to be built first, see :mod:`imprint.executors.ray_waits`); its model must have the
    driver's fingerprint, and its imprint (when it says) the driver's version."""
    import ray

    from imprint import __version__

    try:
        info: dict[str, Any] = ray.get(ref, timeout=reply_s)
    except ray.exceptions.GetTimeoutError:
        raise ConfigError(
            f"Ray worker {worker} on {cluster_name(address)} did not answer within {reply_s:g} s "
            f"(model {role!r}): its process or node is stuck or cut off; check `ray status` and "
            f"the worker's log, or allow longer with {REPLY_ENV}"
        ) from None
    except ray.exceptions.RayActorError as err:
        raise ConfigError(
            f"Ray worker {worker} could not build model {role!r}: {_last_line(err)}. Every "
            "machine needs imprint and the model files at the same path (or the hub)"
        ) from err
    if fingerprint and info["fingerprint"] != fingerprint:
        raise ConfigError(
            f"Ray worker {worker} on {info['host']} built model {role!r} with fingerprint "
            f"{info['fingerprint']}, the driver has {fingerprint}: the model files or imprint "
            "versions differ on that machine (install the same ones everywhere), or the two "
            "load it differently (a GPU worker picks bfloat16 where a CPU driver picks float32: "
            "pass the dtype explicitly, e.g. --dtype bfloat16, or run the driver on a GPU machine)"
        )
    if info.get("imprint", __version__) != __version__:
        raise ConfigError(
            f"Ray worker {worker} on {info['host']} runs imprint {info['imprint']}, the driver "
            f"{__version__}: install the same imprint version on every machine of the cluster"
        )
    return info


def _last_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln and not ln.startswith("File ")]
    return (errors or lines or [type(err).__name__])[-1][:400]
