"""Gray-box battery costs, measured side by side in one run (smollm2-135m, WikiMIA-64 texts).

1. ReCaLL with a 10-shot prefix against the LOSS attack alone on the same texts. ReCaLL needs
   LL(x) (shared with LOSS: one cached pass serves both) and LL(x | P); P's KV cache is computed
   once and reused, so only the tokens of x are run per sample, attending to P. Target: ReCaLL's
   own pass <= 1.5x loss. Also shown: the whole of ReCaLL from a cold cache (both passes, so
   never under ~2x) and the naive cost (P re-encoded for every sample).
2. The full gray-box battery (every gray-box attack, neighbours excluded) against the bare model
   forward, in forward tokens actually needed (x, lower(x), P+x counted as x, PAC's augmentations).
   Target: >= 0.7x bare throughput.

Run: python benchmarks/bench_attacks.py [--n 200] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from common import bare_forward, load_rows


def median_times(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):  # interleaved so machine noise hits every variant alike
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:

    from imprint.attacks import RunContext, build_attacks
    from imprint.backends.hf import HFLogprobBackend
    from imprint.data import Sample
    from imprint.signals.cache import SignalCache
    from imprint.signals.needs import Need
    from imprint.signals.plan import DEFAULT_TOKEN_BUDGET, run_plan

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--recall-only", action="store_true", help="skip the battery and naive")
    args = parser.parse_args()

    rows = load_rows(64)
    samples = [Sample(f"w{i}", r["input"], int(r["label"])) for i, r in enumerate(rows)]
    pool = tuple(s for s in samples[args.n :] if s.label == 0)
    samples = samples[: args.n]
    texts = [s.text for s in samples]
    backend = HFLogprobBackend("smollm2-135m", device="cpu")
    run = RunContext(
        seed=0,
        tokenize=backend.encode,
        target_fingerprint=backend.fingerprint,
        vocab_size=backend.vocab_size,
        pools={"nonmembers": pool},
    )
    names = ["loss", "zlib", "lowercase", "min_k", "min_k_pp", "surp", "dc_pdd", "recall", "pac"]
    attacks = build_attacks(names, run)
    prefixes: dict[str, str] = {}
    for attack in attacks:
        prefixes.update(attack.prepare(samples, run).prefixes)
    prefix = prefixes["recall"]
    battery_needs = [n for a in attacks for n in a.needs()]

    def plan(needs: list[Need], these: list[str] | None = None) -> dict[str, int]:
        cache = SignalCache(None)
        signals, report = run_plan(
            these or texts, needs, {"target": backend}, cache, prefixes=prefixes
        )
        if needs is battery_needs:
            for attack in attacks:
                attack.score(signals)
        return report.to_dict()["target"]

    def bare() -> None:
        bare_forward(backend, texts, DEFAULT_TOKEN_BUDGET)

    naive_texts = [prefix + t for t in texts]  # P re-run for every sample
    bare_tokens = sum(backend.count_tokens(texts))
    bare()  # warm-up
    variants: dict[str, Callable[[], object]] = {
        "bare": bare,
        "loss": lambda: plan([Need()]),
        "recall": lambda: plan([Need(), Need(prefix="recall")]),
        "prefixed": lambda: plan([Need(prefix="recall")]),
    }
    if not args.recall_only:
        variants["recall_naive"] = lambda: plan([Need(), Need()], naive_texts + texts)
        variants["battery"] = lambda: plan(battery_needs)
    med = median_times(variants, args.reps)
    prefix_tokens = len(backend.encode(prefix))
    print(
        f"{args.n} WikiMIA-64 texts, {bare_tokens} tokens; 10-shot prefix {prefix_tokens} "
        f"tokens; median of {args.reps}"
    )
    print(
        f"loss {med['loss']:.2f}s; ReCaLL's own pass LL(x|P) {med['prefixed']:.2f}s -> "
        f"{med['prefixed'] / med['loss']:.2f}x loss (target <= 1.5x); whole recall from a cold "
        f"cache, LL(x) + LL(x|P), {med['recall']:.2f}s -> {med['recall'] / med['loss']:.2f}x "
        f"(two full passes over x: floor ~2x)"
    )
    if args.recall_only:
        return
    print(f"naive recall (P re-run per sample) {med['recall_naive'] / med['loss']:.2f}x loss")
    battery_tokens = plan(battery_needs)["tokens"]
    bare_tps = bare_tokens / med["bare"]
    battery_tps = battery_tokens / med["battery"]
    print(
        f"battery ({', '.join(names)}): {battery_tokens} forward tokens needed in "
        f"{med['battery']:.2f}s = {battery_tps:.0f} tok/s; bare forward {bare_tps:.0f} tok/s "
        f"-> {battery_tps / bare_tps:.2f}x (target >= 0.7x)"
    )


if __name__ == "__main__":
    main()
