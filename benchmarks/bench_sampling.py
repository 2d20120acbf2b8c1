"""SaMIA's sampling batched vs one prompt per call, side by side in one run (issue 26).

Both paths draw SaMIA's continuations through the engine (``sample`` requests, no store) with
SaMIA's defaults (10 samples, top-k 50, temperature 1, 3 new tokens per suffix word, one call per
token budget seeded ``seed + budget``) from the same prompts (the first half of WikiMIA-32 texts)
on the same model (smollm2-135m):

- ``one prompt per call``: :class:`HFTextBackend` with ``max_rows = n``: every prompt decodes in
  its own loop, as every prompt had its own ``generate`` call before;
- ``batched``: the default backend: the engine's batch of prompts shares one decode loop.
- ``generate`` (``--generate``): the code before this change, ``transformers``' ``generate``
  per prompt after ``torch.manual_seed(prompt_seed(seed, prompt))``; its draws are compared with
  the one-prompt path (are today's cached draws still what the engine draws?).

Reported: seconds, generated tokens per second and the share of the fp32 GEMM roofline measured
in the same run (2048^2 matmul, the torch thread count used for sampling; FLOPs per generated
token = 2 x the parameters of the matrix products, attention over the context left out), the
speed-up (best of ``--repeats`` interleaved runs), and how many of the draws (prompt x sample)
are identical between the paths (a difference is float noise from padding flipping a near-tied
draw; the first three differing draws are printed).

Run: python benchmarks/bench_sampling.py [--quick] [--texts 48] [--generate] [--dtype bfloat16]
[--out r.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from common import load_rows


def gemm_gflops(seconds: float = 2.0) -> float:
    """fp32 2048^2 matmul throughput on this machine now (best of repeated runs)."""
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * 2048**3 / (time.perf_counter() - start) / 1e9)
    return best


def samia_prompts(n_texts: int, max_tokens: int = 0) -> list[tuple[str, str, int]]:
    """(prefix, suffix, token budget) of the first ``n_texts`` WikiMIA-32 texts, as SaMIA
    (``max_tokens`` > 0 replaces SaMIA's budget rule)."""
    from imprint.attacks.samia import SaMIA, split_prefix
    from imprint.data.words import split_units

    attack = SaMIA()
    out = []
    for row in load_rows(32)[:n_texts]:
        prefix, suffix = split_prefix(row["input"], attack.prefix_ratio)
        budget = max_tokens or attack.max_tokens or max(8, 3 * len(split_units(suffix)))
        out.append((prefix, suffix, budget))
    return out


def engine_draws(text: Any, prompts: list[tuple[str, str, int]]) -> tuple[list[list[str]], int]:
    """SaMIA's calls through the engine (no store): one ``sample`` call per budget; the draws
    and the tokens generated."""
    from imprint.attacks.samia import SaMIA
    from imprint.requests import RequestRunner, RequestStore
    from imprint.requests.client import ModelRequests

    attack = SaMIA()
    client = ModelRequests({"target": text}, RequestRunner(RequestStore(None)))
    draws: list[list[str]] = [[] for _ in prompts]
    for budget in sorted({b for _, _, b in prompts}):
        idx = [i for i, (_, _, b) in enumerate(prompts) if b == budget]
        got = client.sample(
            "target",
            [prompts[i][0] for i in idx],
            attack.n_samples,
            budget,
            seed=attack.seed + budget,
            temperature=attack.temperature,
            top_k=attack.top_k,
        )
        for i, texts in zip(idx, got, strict=True):
            draws[i] = texts
    return draws, int(text.usage()["completion_tokens"])


def generate_draws(hf: Any, prompts: list[tuple[str, str, int]]) -> tuple[list[list[str]], int]:
    """The code before batching: one ``generate`` per prompt under its prompt seed."""
    import torch

    from imprint.attacks.samia import SaMIA
    from imprint.backends.sampling import prompt_seed
    from imprint.backends.text import HFTextBackend

    attack, text = SaMIA(), HFTextBackend(hf)
    out = []
    for prefix, _, budget in prompts:
        ids = torch.tensor([text._prompt_ids(prefix, "continue")])
        with torch.random.fork_rng(devices=[]), torch.no_grad(), hf.attention():
            torch.manual_seed(prompt_seed(attack.seed + budget, prefix))
            generated = hf.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=budget,
                num_return_sequences=attack.n_samples,
                pad_token_id=hf.pad_id,
                do_sample=True,
                temperature=attack.temperature,
                top_k=attack.top_k,
                top_p=1.0,
            )
        out.append([text._decode(r) for r in generated[:, ids.shape[1] :].tolist()])
    return out, int(text.usage()["completion_tokens"])


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def compare(a: list[list[str]], b: list[list[str]]) -> dict[str, Any]:
    pairs = [(x, y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    differ = [(x, y) for x, y in pairs if x != y]
    return {
        "draws": len(pairs),
        "identical": len(pairs) - len(differ),
        "prompts_identical": sum(ra == rb for ra, rb in zip(a, b, strict=True)),
        "first_differences": [{"a": x[:80], "b": y[:80]} for x, y in differ[:3]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 3 texts, 16 new tokens, --generate on"
    )
    parser.add_argument("--max-tokens", type=int, default=0, help="0 = SaMIA's budget rule")
    parser.add_argument("--texts", type=int, default=48, help="WikiMIA-32 texts (prompts)")
    parser.add_argument("--generate", action="store_true", help="also the generate() path")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs, best kept")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="auto", help="float32, bfloat16 or auto (fp32 on CPU)")
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args()
    n_texts = 3 if args.quick else args.texts
    max_tokens = 16 if args.quick and not args.max_tokens else args.max_tokens
    with_generate = args.generate or args.quick

    import torch

    from imprint.attacks.samia import SaMIA, samia_scores
    from imprint.backends.hf import HFLogprobBackend
    from imprint.backends.text import HFTextBackend, SamplingSettings

    hf = HFLogprobBackend(args.model, dtype=args.dtype)
    prompts = samia_prompts(n_texts, max_tokens)
    flops = 2 * sum(p.numel() for p in hf.model.parameters()) / 1e9  # tied head: counted once
    roofline = gemm_gflops()
    n = SaMIA().n_samples
    paths: dict[str, Any] = {}
    warm_up = SamplingSettings(2, 4, seed=0)
    HFTextBackend(hf).sample(["Warm up the model"], warm_up)  # first-call costs, untimed
    draws: dict[str, Any] = {}
    for _ in range(args.repeats):  # interleaved; the best time of each path is kept
        runs = {
            "one prompt per call": lambda: engine_draws(HFTextBackend(hf, max_rows=n), prompts),
            "batched": lambda: engine_draws(HFTextBackend(hf), prompts),
        }
        if with_generate:
            runs["generate"] = lambda: generate_draws(hf, prompts)
        for name, run in runs.items():
            (got, tokens), seconds = timed(run)
            best = paths.get(name, {}).get("seconds", float("inf"))
            paths[name] = {"seconds": min(seconds, best), "tokens": tokens}
            if draws.setdefault(name, got) != got:
                raise SystemExit(f"{name}: the draws changed between repeats (not reproducible)")
    for p in paths.values():
        p["tokens_per_s"] = p["tokens"] / p["seconds"]
        p["roofline_share"] = p["tokens_per_s"] * flops / roofline
    report = {
        "model": args.model,
        "dtype": str(hf.model.dtype),
        "texts": n_texts,
        "n_samples": n,
        "budgets": sorted({b for _, _, b in prompts}),
        "torch_threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "load_average": os.getloadavg(),
        "gemm_fp32_gflops": roofline,
        "gflop_per_token": flops,
        "paths": paths,
        "speedup": paths["one prompt per call"]["seconds"] / paths["batched"]["seconds"],
        "batched_vs_one": compare(draws["batched"], draws["one prompt per call"]),
        "samia_equal": [
            samia_scores(a, s) == samia_scores(b, s)
            for a, b, (_, s, _) in zip(
                draws["batched"], draws["one prompt per call"], prompts, strict=True
            )
        ].count(True),
    }
    if with_generate:
        report["one_vs_generate"] = compare(draws["one prompt per call"], draws["generate"])
    print_report(report)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)


def print_report(r: dict[str, Any]) -> None:
    print(
        f"{r['model']} ({r['dtype']}), {r['texts']} WikiMIA-32 prompts x {r['n_samples']} "
        f"samples, budgets {r['budgets']}, {r['torch_threads']} torch threads, "
        f"load {r['load_average'][0]:.1f}; "
        f"fp32 GEMM {r['gemm_fp32_gflops']:.0f} GFLOP/s, {r['gflop_per_token']:.3f} GFLOP/token"
    )
    print(f"{'path':22s} {'seconds':>8s} {'tokens':>7s} {'tok/s':>7s} {'roofline':>8s}")
    for name, p in r["paths"].items():
        print(
            f"{name:22s} {p['seconds']:8.1f} {p['tokens']:7d} {p['tokens_per_s']:7.1f} "
            f"{100 * p['roofline_share']:7.1f}%"
        )
    same = r["batched_vs_one"]
    print(
        f"speed-up batched / one prompt per call: {r['speedup']:.2f}x; identical draws "
        f"{same['identical']}/{same['draws']} (prompts {same['prompts_identical']}/{r['texts']}, "
        f"SaMIA scores equal for {r['samia_equal']}/{r['texts']} texts)"
    )
    for d in same["first_differences"]:
        print(f"  differs: {d['a']!r} vs {d['b']!r}")
    if "one_vs_generate" in r:
        g = r["one_vs_generate"]
        print(f"one prompt per call vs generate(): identical draws {g['identical']}/{g['draws']}")


if __name__ == "__main__":
    main()
