"""GPU throughput: imprint's gray-box battery against a bare bf16 forward of the same model.

    python benchmarks/bench_gpu.py [--layers 16 --hidden 2048 ...] [--texts 2000] [--json OUT]

The model is a Llama of realistic size (default: Llama-3.2-1B's shape, 1.24 B parameters,
128,256-token vocabulary) built from a config with random weights, in bf16 with SDPA attention:
no hub is needed. Texts are random words of a word-level tokenizer whose ids span the whole
vocabulary, 64-1,024 tokens each. Every phase runs the same texts in the same batches (the
planner's token-budget batches, budget from the memory planner unless ``--token-budget``):

- ``bare``: ``model(input_ids, attention_mask).logits``, what a user's own loop would run;
- ``bare_body``: the decoder without the output head (a floor no scorer can beat);
- ``battery_eager`` / ``battery``: imprint's planner scoring every text once for loss, zlib,
  min_k, min_k_pp and surp (per-token log p, mean/variance of log p over the vocabulary, rank,
  argmax) with the reduction eager or compiled, results written to a real SQLite cache.

Printed: tokens/s, the battery/bare ratio (target >= 0.9), peak device memory per phase, the token
budget and reduction chunk the planner chose, and the largest difference between the compiled and
the eager statistics. Needs a CUDA device; without one it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import pad_rows

ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "surp")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--texts", type=int, default=2000)
    p.add_argument("--min-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--token-budget", type=int, default=None, help="default: the memory planner")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per phase (median kept)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--allow-cpu", action="store_true", help="smoke-test the script on CPU")
    p.add_argument(
        "--profile", action="store_true", help="also profile one battery pass (cProfile, top 30)"
    )
    return p.parse_args(argv)


def build_model(args: argparse.Namespace) -> tuple[Any, Any]:
    """A random-weight Llama in bf16 on the device, and a word-level tokenizer over its vocab."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.context,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=1,
    )
    torch.manual_seed(0)
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16, attn_implementation="sdpa"
        )
    model.eval()
    words = {"<s>": 0, "</s>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, args.vocab)}}
    tok = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    return model, fast


def make_texts(args: argparse.Namespace) -> list[str]:
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.min_tokens, args.max_tokens + 1, size=args.texts)
    return [" ".join(f"w{i}" for i in rng.integers(3, args.vocab, size=n)) for n in lengths]


def batches(backend: Any, texts: list[str]) -> list[tuple[Any, Any, int]]:
    """The planner's batches as padded (ids, mask, real tokens), built once on the host."""
    from imprint.signals.plan import batches_by_budget

    out = []
    for idx in batches_by_budget(backend.count_tokens(texts), backend.token_budget):
        rows = [[*backend.start_ids, *backend.encode(texts[i])] for i in idx]
        ids, mask = pad_rows(backend, rows)
        out.append((ids, mask, sum(map(len, rows)) - len(rows)))
    return out


def timed(fn: Any, repeats: int) -> tuple[float, float]:
    """Median seconds of ``repeats`` runs after one warm-up, and the peak device memory (GiB;
    0 off CUDA, where ``--allow-cpu`` runs the same code as a smoke test)."""
    import torch

    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fn()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
    return float(np.median(times)), peak


def phases(backend: Any, texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from imprint.attacks import get_attack_class
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import run_plan

    model, device = backend.model, backend.device
    prepared = batches(backend, texts)
    n_tokens = sum(n for _, _, n in prepared)
    base = getattr(model, model.base_model_prefix)

    @torch.no_grad()
    def bare(body_only: bool = False) -> None:
        for ids, mask, _ in prepared:
            ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
            if body_only:
                base(input_ids=ids, attention_mask=mask).last_hidden_state.sum()
            else:
                model(input_ids=ids, attention_mask=mask).logits.sum()

    needs = [n for name in ATTACKS for n in get_attack_class(name)().needs()]
    folder = Path(tempfile.mkdtemp(prefix="bench-gpu-"))

    def battery() -> None:  # a fresh cache each time: every text is scored, then stored
        path = folder / f"cache-{time.monotonic_ns()}.sqlite"
        run_plan(texts, needs, {"target": backend}, SignalCache(path), token_budget=None)

    out: dict[str, Any] = {"tokens": n_tokens, "batches": len(prepared)}
    for name, fn in (
        ("bare", bare),
        ("bare_body", lambda: bare(body_only=True)),
        ("battery_eager", battery),
        ("battery", battery),
    ):
        os.environ["IMPRINT_NO_COMPILE"] = "1" if name == "battery_eager" else "0"
        seconds, peak = timed(fn, args.repeats)
        out[name] = {"seconds": seconds, "tokens_per_s": n_tokens / seconds, "peak_gib": peak}
        print(f"{name:>14}: {n_tokens / seconds:12,.0f} tokens/s  peak {peak:6.1f} GiB", flush=True)
    return out


def compiled_vs_eager(backend: Any, texts: list[str]) -> dict[str, float]:
    """Largest differences between the statistics of the compiled and the eager reduction."""
    from imprint.backends.base import ScoreRequest

    requests = [ScoreRequest(t, None) for t in texts[:64]]
    os.environ["IMPRINT_NO_COMPILE"] = "1"
    eager = backend.score(requests)
    os.environ["IMPRINT_NO_COMPILE"] = "0"
    fused = backend.score(requests)
    diffs: dict[str, float] = {}
    for field in ("logp", "mean_logp", "var_logp"):
        diffs[field] = max(
            float(np.max(np.abs(getattr(a, field) - getattr(b, field))))
            for a, b in zip(eager, fused, strict=True)
        )
    for field in ("rank", "argmax"):
        pairs = zip(eager, fused, strict=True)
        differ = np.concatenate([getattr(a, field) != getattr(b, field) for a, b in pairs])
        diffs[field + "_mismatch"] = float(np.mean(differ))
    return diffs


def profile_battery(backend: Any, texts: list[str]) -> None:
    """Where a battery pass spends its time on the host (waits for the device included)."""
    import cProfile
    import pstats

    from imprint.attacks import get_attack_class
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import run_plan

    needs = [n for name in ATTACKS for n in get_attack_class(name)().needs()]
    cache = SignalCache(Path(tempfile.mkdtemp(prefix="bench-gpu-prof-")) / "c.sqlite")
    profiler = cProfile.Profile()
    profiler.runcall(run_plan, texts, needs, {"target": backend}, cache, token_budget=None)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if args.allow_cpu:
        args.device = "cpu"
    elif not torch.cuda.is_available():
        print("bench_gpu: no CUDA device here; run it on a machine with a GPU", file=sys.stderr)
        return 2
    from imprint.backends.hf import HFLogprobBackend
    from imprint.backends.reduce import chunk_rows

    t0 = time.perf_counter()
    model, tokenizer = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    backend = HFLogprobBackend(
        "bench-gpu-random-llama", model=model, tokenizer=tokenizer, token_budget=args.token_budget
    )
    texts = make_texts(args)
    print(
        f"{device_name(backend.device)}; random Llama {params / 1e9:.2f} B params, vocab "
        f"{args.vocab}, bf16 SDPA; built in {time.perf_counter() - t0:.1f} s; {len(texts)} texts; "
        f"token budget {backend.token_budget} (planner), reduction chunk "
        f"{chunk_rows(args.vocab, backend.device)} positions",
        flush=True,
    )
    results: dict[str, Any] = {
        "device": device_name(backend.device),
        "params": params,
        "token_budget": backend.token_budget,
        "chunk_rows": chunk_rows(args.vocab, backend.device),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    results["compiled_vs_eager"] = compiled_vs_eager(backend, texts)
    print("compiled vs eager statistics:", results["compiled_vs_eager"], flush=True)
    results.update(phases(backend, texts, args))
    bare = results["bare"]["tokens_per_s"]
    for name in ("battery", "battery_eager", "bare_body"):
        results[f"{name}_over_bare"] = results[name]["tokens_per_s"] / bare
    print(
        f"battery / bare forward: {results['battery_over_bare']:.3f}x (target >= 0.9); eager "
        f"reduction {results['battery_eager_over_bare']:.3f}x; decoder without head "
        f"{results['bare_body_over_bare']:.3f}x",
        flush=True,
    )
    if args.profile:
        profile_battery(backend, texts)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
