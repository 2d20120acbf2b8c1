"""Joining or starting Ray, sizing the pool, and checking each replica before it gets work."""

from __future__ import annotations

import logging
import os
from typing import Any

from imprint.errors import ConfigError
from imprint.executors.base import ExecutorConfig

#: environment passed on to the actors (offline switches, imprint's converted-model cache)
ENV_KEYS = ("IMPRINT_CACHE_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME")


def connect(config: ExecutorConfig) -> None:
    """``ray.init``: a private Ray on this machine (no address), or the cluster at ``address``."""
    import ray

    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if config.address is None:
            ray.init(include_dashboard=False, **quiet)  # type: ignore[arg-type]
        else:
            ray.init(address=config.address, **quiet)  # type: ignore[arg-type]
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = config.address or "a local Ray"
        raise ConfigError(
            f"--executor ray could not start or join {where!r}: {err}. For a cluster, run "
            "`ray start --head` on the head machine and pass --address auto there (or "
            "--address ray://HEAD:10001 from elsewhere); without --address a private Ray is "
            "started on this machine"
        ) from err


def default_workers(config: ExecutorConfig, gpus: int) -> int:
    """One replica per GPU of the cluster, else one per ``worker_cpus`` cores."""
    import ray

    if gpus:
        return gpus
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // config.worker_cpus)


def check_resources(config: ExecutorConfig, workers: int, gpus: int) -> None:
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


def actor_options(config: ExecutorConfig, gpus: int) -> dict[str, Any]:
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


def check_replica(role: str, worker: str, ref: Any, fingerprint: str) -> dict[str, Any]:
    """Wait for a replica's ``info()``; its model must have the driver's fingerprint."""
    import ray

    try:
        info: dict[str, Any] = ray.get(ref)
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
    return info


def _last_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln and not ln.startswith("File ")]
    return (errors or lines or [type(err).__name__])[-1][:400]
