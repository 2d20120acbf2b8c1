"""Throughput of the ``pair_tokens`` request kind (token-level InfoRMIA), one text at a time (the
implementation before batching, kept below as the baseline) against batched, in one run, on a
real target and its reference models, with the largest difference between the two.

    IMPRINT_CACHE_DIR=... nice -n 15 .venv/bin/python benchmarks/bench_pair_tokens.py \
        --game DIR --k 4 --n 48

``DIR``: a game folder (``model/``, ``references/ref-*/model``, ``data.jsonl``), e.g. the demo's.
Tokens/s counts scored tokens of all texts (each through K + 1 models). The same inputs, the
same process, the two paths alternating per repeat; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np


def one_at_a_time(group: Any, text: str, temperature: float) -> dict[str, list[Any]]:
    """The per-text path before batching: a full-logits forward of each model on one text."""
    import torch

    from imprint.requests.pair_tokens import _checked_ids, pair_token_stats

    ids = _checked_ids(group, text)
    target = group.target.local_model()
    refs = [r.local_model() for r in group.refs]
    with torch.no_grad():
        tensor = torch.tensor([ids], device=target.device)
        logits_p = target.model(input_ids=tensor).logits[0, :-1].float()
        logits_q = [r.model(input_ids=tensor.to(r.device)).logits[0, :-1].float() for r in refs]
        stats = pair_token_stats(logits_p, logits_q, torch.tensor(ids[1:]), temperature)
    scored = ids[1:]
    pieces = [target.tokenizer.decode([i]) for i in scored]
    return {"ids": scored, "pieces": pieces, **{k: v.tolist() for k, v in stats.items()}}


def gemm_gflops() -> float:
    """fp32 2048^2 GEMM GFLOP/s on this machine now (the roofline next to the figures)."""
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    start = time.perf_counter()
    for _ in range(3):
        a @ b
    return 3 * 2 * 2048**3 / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", type=Path, required=True)
    parser.add_argument("--k", type=int, default=4, help="reference models")
    parser.add_argument("--n", type=int, default=48, help="texts")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)  # a crowded machine: 2 threads spin on each other

    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.pair_tokens import ModelGroup, PairTokensRequest

    rows = [json.loads(line) for line in (args.game / "data.jsonl").open()]
    texts = [r["text"] for r in rows[: args.n]]
    target = HFLogprobBackend(str(args.game / "model"))
    refs = [
        HFLogprobBackend(str(args.game / "references" / f"ref-{i}" / "model"), name=f"ref-{i}")
        for i in range(args.k)
    ]
    group = ModelGroup(target, refs, [f"ref-{i}" for i in range(args.k)])
    requests = sorted(
        (PairTokensRequest(text=t) for t in texts), key=lambda r: -r.size()
    )  # the runner's order: longest first, batch_size per batch
    n_tokens = sum(len(target.encode(t)) + len(target.start_ids) - 1 for t in texts)
    print(
        f"{len(texts)} texts, {n_tokens} scored tokens, K={args.k}, torch threads "
        f"{torch.get_num_threads()}, dtype {next(target.model.parameters()).dtype}, "
        f"fp32 GEMM {gemm_gflops():.0f} GFLOP/s, load {os.getloadavg()}"
    )
    times: dict[str, list[float]] = {"one at a time": [], "batched": []}
    results: dict[str, list[Any]] = {}
    for _ in range(args.repeats):
        start = time.perf_counter()
        results["one at a time"] = [one_at_a_time(group, r.text, 1.0) for r in requests]
        times["one at a time"].append(time.perf_counter() - start)
        print(f"one at a time: {times['one at a time'][-1]:.1f} s", flush=True)
        start = time.perf_counter()
        size = PairTokensRequest.batch_size
        results["batched"] = [
            res
            for i in range(0, len(requests), size)
            for res in PairTokensRequest.execute(group, requests[i : i + size])
        ]
        times["batched"].append(time.perf_counter() - start)
    for name, ts in times.items():
        best = min(ts)
        print(f"{name:>14}: {best:7.1f} s  {n_tokens / best:7.1f} scored tokens/s")
    print(f"speed-up: {min(times['one at a time']) / min(times['batched']):.2f}x")
    a, b = results["one at a time"], results["batched"]
    assert all(x["ids"] == y["ids"] for x, y in zip(a, b, strict=True))
    for field in ("target_logp", "mix_logp", "kl"):
        diff = max(
            float(np.max(np.abs(np.subtract(x[field], y[field]))))
            for x, y in zip(a, b, strict=True)
        )
        print(f"max |one at a time - batched| {field}: {diff:.2e} nats")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
