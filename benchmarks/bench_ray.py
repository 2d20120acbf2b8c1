"""The Ray executor against the local one, side by side in one run (smollm2-135m, WikiMIA-64).

The same job (n texts; loss, zlib, min_k, min_k_pp: one shared log-prob pass) is scored
1. by the local executor (this process, one torch thread),
2. by Ray with 1 worker (1 core), 3. by Ray with 2 workers (1 core each),
each from an empty cache. Printed: scores' max abs difference to the local run (target 0 up to
float noise), wall times, Ray's start-up overhead (``ray.init`` plus the workers' model loads),
the 2-vs-1 worker speed-up on the scoring itself (target >= 1.6x) and one-core GEMM throughput
measured in the same run with 1 and 2 torch threads: on a machine whose two vCPUs give about one
core of GEMM, no executor can reach 1.6x, and the GEMM line says so. Last, the cost per 1,000
texts by model size, scaled from the measured tokens/s (see --help for the assumption).

With ``--cluster`` the same comparison runs on a real 2-node Ray cluster started on this machine
(``ray start --head`` and a second ``ray start --address`` node, separate raylets with one CPU
each, as in tests/ray_cluster.py), joined with ``--address``: 1 worker, 2 workers (one per node),
then 2 workers with the second node killed (every process of it) at the first stored result.

Run: python benchmarks/bench_ray.py [--n 200] [--quick] [--cluster]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
from common import load_rows

ATTACKS = ("loss", "zlib", "min_k", "min_k_pp")
# MIMIR's Pythia sizes (parameters); the forward costs ~2 x params FLOPs per token
SIZES = {"160m": 0.16e9, "1.4b": 1.4e9, "2.8b": 2.8e9, "6.9b": 6.9e9, "12b": 12e9}
SMOLLM2_PARAMS = 0.135e9


def gemm_gflops(threads: int, size: int = 1024, seconds: float = 1.5) -> float:
    """float32 GEMM throughput with ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2 * size**3 * n / (time.perf_counter() - start) / 1e9


def score(texts: list[str], backend: Any, executor: Any, budget: int) -> tuple[dict, float, int]:
    """Attack scores, wall seconds and scored tokens of one run from an empty cache."""
    from imprint.attacks import RunContext, build_attacks
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import run_plan

    run = RunContext(tokenize=backend.encode, target_fingerprint=backend.fingerprint)
    attacks = build_attacks(list(ATTACKS), run)
    needs = [n for a in attacks for n in a.needs()]
    start = time.perf_counter()
    signals, report = run_plan(
        texts, needs, {"target": backend}, SignalCache(None), token_budget=budget,
        executor=executor,
    )  # fmt: skip
    wall = time.perf_counter() - start
    scores: dict[str, np.ndarray] = {}
    for attack in attacks:
        scores.update(attack.score(signals))
    return scores, wall, report.per_model["target"].tokens or 0


def ray_run(
    texts: list[str], backend: Any, factory: Any, workers: int, budget: int, address: Any = None
) -> dict:
    from imprint.executors import ExecutorConfig, make_executor

    config = ExecutorConfig(kind="ray", workers=workers, address=address)
    executor = make_executor(config, {"target": factory})
    try:
        scores, wall, tokens = score(texts, backend, executor, budget)
    finally:
        executor.close()
    start = executor.stats.start_s  # the workers' start and model load, inside ``wall``
    return {
        "scores": scores, "wall": wall, "start": start, "work": wall - start, "tokens": tokens,
        "stats": executor.stats,
    }  # fmt: skip


def cluster_runs(texts: list[str], backend: Any, factory: Any, budget: int) -> tuple[float, dict]:
    """Start the 2-node cluster (seconds until both nodes are alive), run 1 and 2 workers on
    it, then 2 workers losing node b at the first stored result (key ``"killed"``)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from ray_cluster import RayCluster

    from imprint.executors.base import ExecutorStats

    cluster = RayCluster()
    started = time.perf_counter()
    try:
        cluster.start(cpus=1)
        cluster.add_node("b", cpus=1)
        cluster.wait_alive()
        up_s = time.perf_counter() - started
        runs: dict[Any, dict] = {
            w: ray_run(texts, backend, factory, w, budget, cluster.address) for w in (1, 2)
        }
        add = ExecutorStats.add

        def add_then_kill(self: ExecutorStats, *args: Any, **kwargs: Any) -> None:
            add(self, *args, **kwargs)
            if cluster.nodes["b"].process.poll() is None:
                cluster.kill_node("b")  # a machine lost mid-run: its raylet and worker die

        ExecutorStats.add = add_then_kill  # type: ignore[method-assign]
        try:
            runs["killed"] = ray_run(texts, backend, factory, 2, budget, cluster.address)
        finally:
            ExecutorStats.add = add  # type: ignore[method-assign]
    finally:
        cluster.stop()
    return up_s, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="WikiMIA-64 texts")
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--quick", action="store_true", help="40 texts: checks it works")
    parser.add_argument(
        "--cluster", action="store_true", help="Ray = a 2-node cluster started here (see above)"
    )
    args = parser.parse_args()
    n = 40 if args.quick else args.n
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import ray
    import torch

    from imprint.backends.registry import LoadContext, choose_backend
    from imprint.executors import BackendFactory

    texts = [r["input"] for r in load_rows(64)][:n]
    choice = choose_backend("smollm2-135m", settings={"device": "cpu"})
    context = LoadContext(token_budget=args.token_budget)
    backend = choice.load(context)
    factory = BackendFactory(choice, context)
    gemm = {t: gemm_gflops(t) for t in (1, 2)}
    torch.set_num_threads(1)
    local, local_wall, tokens = score(texts, backend, None, args.token_budget)
    if args.cluster:
        up_s, runs = cluster_runs(texts, backend, factory, args.token_budget)
        report(n, tokens, gemm, local, local_wall, up_s, runs, where="2-node cluster")
        return
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - started
    try:
        runs = {w: ray_run(texts, backend, factory, w, args.token_budget) for w in (1, 2)}
    finally:
        ray.shutdown()
    report(n, tokens, gemm, local, local_wall, init_s, runs)


def report(
    n: int,
    tokens: int,
    gemm: dict[int, float],
    local: dict,
    local_wall: float,
    init_s: float,
    runs: dict[Any, dict],
    *,
    where: str = "private Ray",
) -> None:
    print(f"{n} WikiMIA-64 texts, {tokens} scored tokens, attacks {', '.join(ATTACKS)}")
    print(
        f"GEMM fp32 1024^3: 1 thread {gemm[1]:.1f} GFLOP/s, 2 threads {gemm[2]:.1f} GFLOP/s "
        f"-> the machine gives {gemm[2] / gemm[1]:.2f} cores of GEMM (the 2-worker ceiling)"
    )
    print(f"local executor (1 thread): {local_wall:.1f}s, {tokens / local_wall:.0f} tok/s")
    for w, r in runs.items():
        diff = max(float(np.nanmax(np.abs(r["scores"][c] - local[c]))) for c in local)
        name = "2 workers, node b killed at the first result" if w == "killed" else f"{w} worker(s)"
        print(
            f"{where}, {name}: wall {r['wall']:.1f}s = workers' start {r['start']:.1f}s + "
            f"scoring {r['work']:.1f}s ({r['tokens'] / r['work']:.0f} tok/s); max |score - "
            f"local| {diff:.2e}"
        )
        if w == "killed":
            stats = r["stats"]
            print(
                f"  lost workers {stats.lost_workers}, retried shards {stats.retried_shards}, "
                f"requests executed {sum(stats.executed.values())} of {n} texts' passes"
            )
    one, two = runs[1], runs[2]
    print(
        f"2 vs 1 workers: scoring {one['work'] / two['work']:.2f}x (target >= 1.6x), wall "
        f"{one['wall'] / two['wall']:.2f}x; Ray start-up overhead: "
        f"{'the cluster' if where != 'private Ray' else 'ray.init'} {init_s:.1f}s + "
        f"workers {two['start']:.1f}s (2 workers)"
    )
    tps = tokens / local_wall
    per_text = tokens / n
    print(
        f"cost per 1,000 texts of {per_text:.0f} tokens, one core at the measured {tps:.0f} "
        "tok/s scaled by parameters (forward ~ 2 x params FLOPs/token):"
    )
    for name, params in SIZES.items():
        seconds = 1000 * per_text / (tps * SMOLLM2_PARAMS / params)
        print(f"  {name:>5}: {seconds / 60:8.1f} core-minutes")


if __name__ == "__main__":
    main()
