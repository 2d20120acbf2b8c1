"""Core performance figures, measured side by side in one run.

1. Throughput: the single-pass battery (loss, zlib, min_k, min_k_pp: one planned pass, chunked
   vocabulary reduction, SQLite cache writes, attack scoring) against the bare model forward
   (``model(...).logits``) on the same batches of 200 WikiMIA-64 texts with smollm2-135m.
   Target: battery throughput >= 0.8x bare.
2. Memory: peak RSS of scoring 16 texts of 128 tokens in one batch with gemma3-270m (262k
   vocabulary), next to the bare forward's peak RSS on the same batch, each in a fresh process.
   Target: scoring < 4 GiB.

Run: python benchmarks/bench_core.py [--reps 3] [--n 200] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import bare_forward, load_rows


def load_texts(n: int, length: int = 64) -> list[str]:
    return [r["input"] for r in load_rows(length)[:n]]


def throughput(n: int, reps: int) -> dict[str, float]:
    import torch

    from imprint.attacks import build_attacks
    from imprint.backends.hf import HFLogprobBackend
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import DEFAULT_TOKEN_BUDGET, run_plan

    torch.set_num_threads(max(1, torch.get_num_threads()))
    backend = HFLogprobBackend("smollm2-135m", device="cpu")
    texts = load_texts(n)
    attacks = build_attacks(["loss", "zlib", "min_k", "min_k_pp"])
    needs = [nd for a in attacks for nd in a.needs()]
    lengths = backend.count_tokens(texts)
    n_tokens = sum(lengths)

    def bare() -> None:
        bare_forward(backend, texts, DEFAULT_TOKEN_BUDGET)

    def battery() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            cache = SignalCache(Path(tmp) / "cache.sqlite")
            signals, _ = run_plan(texts, needs, {"target": backend}, cache)
            for attack in attacks:
                attack.score(signals)
            cache.close()

    bare()  # warm-up
    times: dict[str, list[float]] = {"bare": [], "battery": []}
    for _ in range(reps):  # alternate so machine noise hits both alike
        for name, fn in (("bare", bare), ("battery", battery)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "texts": n,
        "tokens": n_tokens,
        "reps": reps,
        "bare_s": med["bare"],
        "battery_s": med["battery"],
        "bare_tok_per_s": n_tokens / med["bare"],
        "battery_tok_per_s": n_tokens / med["battery"],
        "ratio": med["bare"] / med["battery"],
    }


def _memory_child(mode: str) -> None:
    """Run in a fresh process: score (or bare-forward) one batch, print peak RSS in GiB."""
    import torch

    from imprint.backends.base import ScoreRequest
    from imprint.backends.hf import HFLogprobBackend

    backend = HFLogprobBackend("gemma3-270m", device="cpu")
    words = " ".join(load_texts(400, 256)).split()
    texts, i = [], 0
    while len(texts) < 16:  # 16 texts of exactly 128 tokens
        ids = backend.encode(" ".join(words[i : i + 200]))[:128]
        texts.append(backend.tokenizer.decode(ids))
        i += 200
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if mode == "score":
        backend.score([ScoreRequest(t) for t in texts])
    else:
        with torch.no_grad():
            enc = backend.tokenizer(texts, return_tensors="pt", padding=True)
            backend.model(**enc).logits.float().log_softmax(-1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mode": mode, "peak_gib": peak / 2**20, "model_loaded_gib": before / 2**20}))


def memory() -> dict[str, dict[str, float]]:
    out = {}
    for mode in ("score", "bare"):
        proc = subprocess.run(
            [sys.executable, __file__, "--memory-child", mode],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        out[mode] = json.loads(lines[-1]) if lines else {"error": proc.stderr[-500:]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--memory-child", choices=["score", "bare"])
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child)
        return
    if not args.skip_throughput:
        t = throughput(args.n, args.reps)
        print(
            f"throughput ({t['texts']} WikiMIA-64 texts, {t['tokens']} tokens, median of "
            f"{t['reps']}): bare {t['bare_tok_per_s']:.0f} tok/s, battery "
            f"{t['battery_tok_per_s']:.0f} tok/s, ratio {t['ratio']:.2f}x (target >= 0.8x)"
        )
    if not args.skip_memory:
        m = memory()
        for mode, row in m.items():
            print(f"gemma3-270m, 16 x 128 tokens, {mode}: {json.dumps(row)}")
        if "peak_gib" in m["score"]:
            print(f"scoring peak RSS {m['score']['peak_gib']:.2f} GiB (target < 4 GiB)")


if __name__ == "__main__":
    main()
