"""bf16 on CPU against float32: the accuracy gate ``--dtype auto`` reads, and the speed, measured
side by side in one run (issues 26 and 34).

**Gate** (``--gate``, per model family in ``--models``): each model loaded in float32 and in bf16
(the default CPU bf16 path: compiled blocks, bf16 head over position blocks, compiled reduction;
the record names the path it was measured on), the gray-box battery (loss, zlib, min_k,
min_k_pp) scored once per dtype on held-out texts the bf16 path was not developed on:

- WikiMIA-64 rows ``--gate-offset`` .. + ``--gate-n`` (labelled; development used rows < 110 and
  the earlier benchmarks rows 300-419);
- 30 Chinese and 30 Russian passages written for the gate (``bf16_texts.py``);
- long texts: consecutive WikiMIA-256 rows joined to 2,000+ tokens each.

Per score column: |AUC(bf16) - AUC(fp32)| <= 0.005 and TPR at the lowest measurable FPR within one
member text (labelled set), Spearman >= 0.998 on every set (``imprint.backends.bf16_gates``).
``--record-gate`` writes the result, keyed by family and this CPU's bf16 unit, to
``src/imprint/backends/bf16_gate_results.json``.

**Speed** (``--speed``, smollm2-135m; model load excluded; rows ``--offset`` .. + ``--n``):

- **GEMM roofline**: 2048^3 ``torch.mm`` in bf16 and in float32 (GFLOP/s, median), turned into a
  tokens/s ceiling with the model's GFLOP per token *computed from its config*; each figure is
  also shown as a share of its dtype's ceiling;
- **bare**: the bare transformers forward per dtype (batches of 16 sorted by length, full logits,
  fp32 log-softmax: what a plain script does);
- **battery**: imprint's gray-box battery per dtype, one planned pass into a fresh store, then
  the scores; ``battery bf16`` is the default bf16 path (bf16 head over 256-position blocks,
  then the compiled reduction), ``battery bf16 fused-head`` the option that folds the head's
  vocabulary slices into running statistics (``HFLogprobBackend.fused_head``).

Repeats are interleaved (every variant once per round), medians quoted; the first call of each
variant (compilation, allocator warm-up) is timed separately as ``warm-up``.

``--json F`` also keeps every text's score per dtype (for ``bench_bf16_why.py``-style looks at a
failing column). Run: python benchmarks/bench_bf16.py [--gate] [--speed] [--record-gate] [--json F]
(neither --gate nor --speed: both). Check: --quick (16 texts, one round, small gate sets).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bf16_texts import CHINESE, RUSSIAN, long_texts
from common import load_rows

ATTACKS = ["loss", "zlib", "min_k", "min_k_pp"]
MODEL = "smollm2-135m"
FAMILIES = ["smollm2-135m", "gemma3-270m"]


def gemm_gflops(dtype: Any, size: int, reps: int) -> float:
    """Median GFLOP/s of a size^3 matrix product in ``dtype`` (after one warm-up product)."""
    import torch

    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.mm(a, b)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def model_dims(config: Any) -> dict[str, int]:
    """The shapes the dtype probe times (imprint.backends.dtype_probe)."""
    h = config.hidden_size
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    return {
        "hidden": h,
        "kv": head_dim * config.num_key_value_heads,
        "intermediate": config.intermediate_size,
        "vocab": config.vocab_size,
        "layers": config.num_hidden_layers,
    }


def gflop_per_token(config: Any, mean_context: float) -> float:
    """2 x the weights of every matrix multiply (q, k, v, o, the MLP's three, the output head)
    plus attention's scores and weighted sum (4 x layers x hidden x mean context)."""
    d = model_dims(config)
    h, layers = d["hidden"], d["layers"]
    per_layer = 2 * h * h + 2 * h * d["kv"] + 3 * h * d["intermediate"]
    weights = layers * per_layer + h * d["vocab"]
    return (2 * weights + 4 * layers * h * mean_context) / 1e9


def bare_forward(backend: Any, texts: list[str]) -> None:
    """Batches of 16 sorted by length; full logits, then an fp32 log-softmax."""
    import torch

    rows = sorted(([*backend.start_ids, *backend.encode(t)] for t in texts), key=len)
    with torch.no_grad():
        for i in range(0, len(rows), 16):
            batch = rows[i : i + 16]
            width = max(map(len, batch))
            ids = torch.full((len(batch), width), backend.pad_id)
            mask = torch.zeros_like(ids)
            for r, row in enumerate(batch):
                ids[r, : len(row)] = torch.tensor(row)
                mask[r, : len(row)] = 1
            backend.model(input_ids=ids, attention_mask=mask).logits.float().log_softmax(-1)


def battery(backend: Any, texts: list[str]) -> dict[str, Any]:
    """The four attacks' scores from one planned pass into a fresh store."""
    from imprint.attacks import build_attacks
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import run_plan

    attacks = build_attacks(ATTACKS)
    needs = [need for attack in attacks for need in attack.needs()]
    with tempfile.TemporaryDirectory() as tmp:
        cache = SignalCache(Path(tmp) / "store.sqlite")
        signals, _ = run_plan(texts, needs, {"target": backend}, cache)
        scores = {col: v for attack in attacks for col, v in attack.score(signals).items()}
        cache.close()
    return scores


# -- the gate -------------------------------------------------------------------------------


def gate_sets(backend: Any, args: argparse.Namespace) -> dict[str, tuple[list[str], Any]]:
    """Name -> (texts, labels or None)."""
    rows = load_rows(64)[args.gate_offset : args.gate_offset + args.gate_n]
    wikimia = f"wikimia-64 rows {args.gate_offset}-{args.gate_offset + len(rows) - 1}"
    longs = long_texts(backend.count_tokens)[: args.long_n]
    return {
        wikimia: ([r["input"] for r in rows], [int(r["label"]) for r in rows]),
        "chinese": (CHINESE[: args.lang_n], None),
        "russian": (RUSSIAN[: args.lang_n], None),
        "long 2000+ tokens": (longs, None),
    }


def measure_gate(family: str, args: argparse.Namespace) -> dict[str, Any]:
    """Both dtypes' scores on every gate set (one battery per dtype over all sets), compared."""
    from imprint.backends.bf16_gates import evaluate
    from imprint.backends.hf import HFLogprobBackend

    fp32 = HFLogprobBackend(family, device="cpu", dtype="float32")
    sets = gate_sets(fp32, args)
    texts = [t for ts, _ in sets.values() for t in ts]
    start = time.perf_counter()
    scores32 = battery(fp32, texts)
    seconds32 = time.perf_counter() - start
    dims = model_dims(fp32.model.config)
    del fp32
    bf16 = HFLogprobBackend(family, device="cpu", dtype="bfloat16")
    start = time.perf_counter()
    scores16 = battery(bf16, texts)
    seconds16 = time.perf_counter() - start
    split32, split16, at = {}, {}, 0
    for name, (ts, _) in sets.items():
        split32[name] = {c: v[at : at + len(ts)] for c, v in scores32.items()}
        split16[name] = {c: v[at : at + len(ts)] for c, v in scores16.items()}
        at += len(ts)
    labels = {name: y for name, (_, y) in sets.items() if y is not None}
    result = evaluate(split32, split16, labels)
    tokens = bf16.count_tokens(texts)
    described = {
        name: f"{len(ts)} texts, {sum(bf16.count_tokens(ts))} tokens"
        + (f", {sum(y)} members" if y is not None else "")
        for name, (ts, y) in sets.items()
    }
    return {
        **result,
        "family": family,
        "dims": dims,
        "sets": described,
        "texts": "; ".join(f"{k}: {v}" for k, v in described.items()),
        "tokens": sum(tokens),
        "seconds": {"fp32": round(seconds32, 1), "bf16": round(seconds16, 1)},
        "bf16_reduction": bf16.describe()["reduction"],
        "bf16_path": bf16._scoring_variant(),
        # per-text scores, for looking into a failing column (--json only; not recorded)
        "scores": {
            d: {s: {c: [float(x) for x in v] for c, v in cols.items()} for s, cols in split.items()}
            for d, split in (("fp32", split32), ("bf16", split16))
        },
    }


def gate_report(g: dict[str, Any]) -> list[str]:
    from imprint.backends.bf16_gates import GATE_AUC, GATE_SPEARMAN, GATE_TPR_TEXTS, summary

    lines = [
        f"gate {g['family']} ({g['bf16_reduction']}): {g['texts']}; battery fp32 "
        f"{g['seconds']['fp32']} s, bf16 {g['seconds']['bf16']} s (first calls, compilation in)",
        f"  {'column':10}{'set':28}{'Spearman':>10}{'|dAUC|':>9}{'dTPR texts':>12}",
    ]
    for col, e in g["columns"].items():
        for s, r in e["spearman"].items():
            auc = e["auc_diff"].get(s)
            tpr = e["tpr_diff_texts"].get(s)
            lines.append(
                f"  {col:10}{s:28}{r:10.5f}{'' if auc is None else f'{auc:.4f}':>9}"
                f"{'' if tpr is None else tpr:>12}"
            )
    verdict = "PASS" if g["passed"] else "FAIL"
    lines.append(
        f"  gate (Spearman >= {GATE_SPEARMAN}, |dAUC| <= {GATE_AUC}, dTPR <= {GATE_TPR_TEXTS} "
        f"text): {verdict}; {summary(g)}"
    )
    return lines


def record_gate(g: dict[str, Any]) -> str:
    from imprint.backends.bf16_gates import record
    from imprint.backends.dtype_choice import cpu_flags, native_bf16
    from imprint.backends.models import fingerprint_source, resolve_model

    unit = native_bf16(cpu_flags())
    if unit is None:
        raise SystemExit("--record-gate: this CPU has no native bf16 unit; nothing to gate")
    fingerprint = fingerprint_source(resolve_model(g["family"]))
    keep = ("passed", "columns", "worst", "sets", "texts")
    entry = {k: g[k] for k in keep}
    entry |= {
        "cpu": cpu_name(),
        "measured": time.strftime("%Y-%m-%d"),
        "command": "benchmarks/bench_bf16.py --gate --record-gate",
    }
    record(g["family"], fingerprint, g["dims"], unit, entry, bf16_path=g["bf16_path"])
    return (
        f"gate recorded for {g['family']} on {unit} ({fingerprint}, path {g['bf16_path']}): "
        f"passed={g['passed']}"
    )


# -- the speed ------------------------------------------------------------------------------


def variants(fp32: Any, bf16: Any, texts: list[str]) -> dict[str, Callable[[], Any]]:
    def fused() -> Any:
        bf16.fused_head = True
        try:
            return battery(bf16, texts)
        finally:
            bf16.fused_head = False

    return {
        "bare fp32": lambda: bare_forward(fp32, texts),
        "bare bf16": lambda: bare_forward(bf16, texts),
        "battery fp32": lambda: battery(fp32, texts),
        "battery bf16": lambda: battery(bf16, texts),
        "battery bf16 fused-head": fused,
    }


def measure_speed(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from imprint.backends.bf16_gates import spearman
    from imprint.backends.hf import HFLogprobBackend

    threads = torch.get_num_threads()
    load_before = os.getloadavg()
    texts = [r["input"] for r in load_rows(64)[args.offset : args.offset + args.n]]
    fp32 = HFLogprobBackend(MODEL, device="cpu", dtype="float32")
    bf16 = HFLogprobBackend(MODEL, device="cpu", dtype="bfloat16")
    lengths = fp32.count_tokens(texts)
    tokens = sum(lengths) - len(texts)  # scored tokens (the start token is context only)
    gflop = gflop_per_token(fp32.model.config, statistics.mean(lengths) / 2)
    runs = variants(fp32, bf16, texts)
    warm, times = {}, {name: [] for name in runs}
    scores: dict[str, Any] = {}
    for name, fn in runs.items():  # first call: compilation and allocator warm-up
        start = time.perf_counter()
        fn()
        warm[name] = time.perf_counter() - start
    roof: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(args.reps):  # interleaved: machine noise hits every variant alike
        roof["fp32"].append(gemm_gflops(torch.float32, args.gemm, args.gemm_reps))
        roof["bf16"].append(gemm_gflops(torch.bfloat16, args.gemm, args.gemm_reps))
        for name, fn in runs.items():
            start = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - start)
            if out is not None:
                scores[name] = out
    ref = scores["battery fp32"]
    accuracy = {
        name: {col: spearman(ref[col], s[col]) for col in ref}
        for name, s in scores.items()
        if name != "battery fp32"
    }
    return {
        "model": MODEL,
        "texts": len(texts),
        "rows": [args.offset, args.offset + len(texts)],
        "tokens": tokens,
        "threads": threads,
        "reps": args.reps,
        "gflop_per_token": gflop,
        "gemm_size": args.gemm,
        "gemm_gflops": {k: statistics.median(v) for k, v in roof.items()},
        "seconds": {k: statistics.median(v) for k, v in times.items()},
        "all_seconds": times,
        "warm_up_seconds": warm,
        "spearman": accuracy,
        "cpu": cpu_name(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def cpu_name() -> str:
    from imprint.backends.dtype_choice import cpu_flags, native_bf16

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} (native bf16: {native_bf16(cpu_flags()) or 'none'})"


def speed_report(r: dict[str, Any]) -> list[str]:
    sec, tok = r["seconds"], r["tokens"]
    rate = {k: tok / v for k, v in sec.items()}
    gemm = r["gemm_gflops"]
    ceiling = {d: r["gemm_gflops"][d] / r["gflop_per_token"] for d in ("fp32", "bf16")}
    lines = [
        f"{r['model']}, {r['texts']} held-out WikiMIA-64 texts (rows {r['rows'][0]}-"
        f"{r['rows'][1] - 1}), {tok} scored tokens, {r['threads']} threads, median of "
        f"{r['reps']} interleaved rounds; {r['cpu']}",
        f"load average before {r['load_before'][0]:.2f}, after {r['load_after'][0]:.2f} "
        "(figures are only comparable on a quiet machine)",
        f"GEMM {r['gemm_size']}^3: fp32 {r['gemm_gflops']['fp32']:.0f} GFLOP/s, bf16 "
        f"{gemm['bf16']:.0f} GFLOP/s ({gemm['bf16'] / gemm['fp32']:.2f}x); "
        f"{r['gflop_per_token']:.3f} GFLOP/token (from the config) -> ceilings fp32 "
        f"{ceiling['fp32']:.0f} tok/s, bf16 {ceiling['bf16']:.0f} tok/s",
        f"{'':28}{'seconds':>9}{'tok/s':>8}{'% roofline':>12}{'warm-up s':>11}",
    ]
    for name in sec:
        share = rate[name] / ceiling["bf16" if "bf16" in name else "fp32"]
        lines.append(
            f"{name:28}{sec[name]:9.2f}{rate[name]:8.0f}{share:11.0%} "
            f"{r['warm_up_seconds'][name]:10.2f}"
        )
    lines += [
        f"battery bf16 / battery fp32: {sec['battery fp32'] / sec['battery bf16']:.2f}x "
        "(target >= 3x)",
        f"battery bf16 / bare bf16:    {sec['bare bf16'] / sec['battery bf16']:.2f}x "
        "(target >= 1.0x)",
        f"fused head / default head:   {sec['battery bf16'] / sec['battery bf16 fused-head']:.2f}x",
        f"battery fp32 / bare fp32:    {sec['bare fp32'] / sec['battery fp32']:.2f}x",
        "Spearman vs battery fp32 per column (these texts; the gate's sets are above):",
    ]
    for name, cols in r["spearman"].items():
        cells = ", ".join(f"{c} {v:.5f}" for c, v in cols.items())
        lines.append(f"  {name}: {cells}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gate", action="store_true", help="measure the accuracy gate")
    parser.add_argument("--speed", action="store_true", help="measure the speed")
    parser.add_argument("--models", nargs="+", default=FAMILIES, help="families to gate")
    parser.add_argument("--n", type=int, default=120)
    parser.add_argument("--offset", type=int, default=420, help="first WikiMIA-64 row (speed)")
    parser.add_argument("--gate-n", type=int, default=120)
    parser.add_argument("--gate-offset", type=int, default=420, help="first WikiMIA-64 row")
    parser.add_argument("--lang-n", type=int, default=30, help="Chinese and Russian texts each")
    parser.add_argument("--long-n", type=int, default=8, help="long texts")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--gemm", type=int, default=2048)
    parser.add_argument("--gemm-reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="16 texts, 1 round, small sets")
    parser.add_argument("--record-gate", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if args.quick:
        args.n, args.reps, args.gemm, args.gemm_reps = 16, 1, 1024, 3
        args.gate_n, args.lang_n, args.long_n = 64, 8, 2
    if args.record_gate and args.quick:
        raise SystemExit("--record-gate needs the full gate (not --quick)")
    both = not (args.gate or args.speed)
    out: dict[str, Any] = {"cpu": cpu_name(), "load_start": os.getloadavg()}
    if args.gate or both:
        out["gate"] = {}
        for family in args.models:
            g = measure_gate(family, args)
            out["gate"][family] = g
            print("\n".join(gate_report(g)), flush=True)
            if args.record_gate:
                print(record_gate(g), flush=True)
    if args.speed or both:
        out["speed"] = measure_speed(args)
        print("\n".join(speed_report(out["speed"])))
    out["load_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
