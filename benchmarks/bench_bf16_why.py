"""Why a bf16 gate column fails (issue 34): the same texts scored by float32 and by bf16 variants
that differ in one place each, so each source of error is measured on its own.

Variants (each against float32 per token and per text):

- ``bf16``: the default CPU bf16 path (bf16 body, bf16 head, compiled reduction in float32 of
  the bf16-rounded logits);
- ``bf16+f32head``: the same bf16 body with a float32 head (no rounding of the logits);
- ``bf16 body, f32 target``: ``bf16``'s moments (E_p[log p], Var_p[log p]) with the target's
  log-prob of ``bf16+f32head`` (what an fp32 target logit alone would give);
- ``f32 on bf16 weights``: float32 arithmetic on bf16-rounded weights (the floor any path that
  stores bf16 weights has).

Per set: the per-token error (RMS of log p, E_p[log p], sd_p[log p] differences), then per column
(loss, zlib, min_k, min_k_pp) the Spearman of the per-text scores against float32 and the
smallest float32 gap between neighbouring texts next to the typical bf16 change of a score (a
set whose scores sit closer together than bf16's noise reorders whatever the path).

Run: python benchmarks/bench_bf16_why.py [--model smollm2-135m] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from bf16_texts import CHINESE, RUSSIAN, long_texts
from common import load_rows


def per_text(stats: list[Any], texts: list[str]) -> dict[str, np.ndarray]:
    """The battery's columns from per-token statistics, with the attacks' own functions."""
    from imprint.attacks.base import lowest_fraction_mean, mean_logp
    from imprint.attacks.min_k_pp import standardised_logp
    from imprint.attacks.zlib import zlib_bytes

    sizes = np.array([zlib_bytes(t) for t in texts], float)
    loss = np.array([mean_logp(s.logp) for s in stats])
    return {
        "loss": loss,
        "zlib": loss / sizes,
        "zlib_char": np.array([float(np.sum(s.logp)) for s in stats]) / sizes,
        "min_k": np.array([lowest_fraction_mean(s.logp, 0.2) for s in stats]),
        "min_k_pp": np.array([lowest_fraction_mean(standardised_logp(s), 0.2) for s in stats]),
    }


def hybrid(moments: list[Any], target: list[Any]) -> list[Any]:
    """``moments``' E_p/Var_p with ``target``'s log p(target) (same tokens, same order)."""
    from dataclasses import replace

    return [replace(m, logp=t.logp) for m, t in zip(moments, target, strict=True)]


def token_errors(ref: list[Any], ours: list[Any]) -> dict[str, float]:
    def rms(key: str, f: Any = lambda x: x) -> float:
        a = np.concatenate([f(getattr(s, key).astype(np.float64)) for s in ref])
        b = np.concatenate([f(getattr(s, key).astype(np.float64)) for s in ours])
        return float(np.sqrt(np.mean((a - b) ** 2)))

    return {
        "logp": rms("logp"),
        "mean_logp": rms("mean_logp"),
        "sd_logp": rms("var_logp", lambda v: np.sqrt(np.maximum(v, 0))),
    }


def main() -> None:
    import torch

    from imprint.backends.base import ScoreRequest
    from imprint.backends.bf16_gates import spearman
    from imprint.backends.hf import HFLogprobBackend

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--gate-offset", type=int, default=420)
    parser.add_argument("--gate-n", type=int, default=120)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    start, load = time.time(), os.getloadavg()

    fp32 = HFLogprobBackend(args.model, device="cpu", dtype="float32")
    rows = load_rows(64)[args.gate_offset : args.gate_offset + args.gate_n]
    sets = {
        "wikimia-64": [r["input"] for r in rows],
        "chinese": CHINESE,
        "russian": RUSSIAN,
        "long 2000+ tokens": long_texts(fp32.count_tokens),
    }
    texts = [t for ts in sets.values() for t in ts]

    def score(backend: Any) -> list[Any]:
        return backend.score([ScoreRequest(t) for t in texts])

    runs: dict[str, list[Any]] = {"f32": score(fp32)}
    fp32.model.to(torch.bfloat16).to(torch.float32)  # the same model on bf16-rounded weights
    fp32._fingerprints.clear()
    runs["f32 on bf16 weights"] = score(fp32)
    del fp32
    bf16 = HFLogprobBackend(args.model, device="cpu", dtype="bfloat16")
    runs["bf16"] = score(bf16)
    bf16.float32_head = True
    runs["bf16+f32head"] = score(bf16)
    runs["bf16 body, f32 target"] = hybrid(runs["bf16"], runs["bf16+f32head"])

    out: dict[str, Any] = {"model": args.model, "load_start": load, "sets": {}}
    at = 0
    for name, ts in sets.items():
        part = {k: v[at : at + len(ts)] for k, v in runs.items()}
        at += len(ts)
        ref_scores = per_text(part["f32"], ts)
        entry: dict[str, Any] = {"texts": len(ts), "variants": {}}
        for variant, stats in part.items():
            if variant == "f32":
                continue
            ours = per_text(stats, ts)
            entry["variants"][variant] = {
                "token_rms": token_errors(part["f32"], stats),
                "spearman": {c: round(spearman(ref_scores[c], ours[c]), 6) for c in ours},
                "score_rms": {
                    c: float(np.sqrt(np.mean((ref_scores[c] - ours[c]) ** 2))) for c in ours
                },
            }
        entry["min_gap_f32"] = {
            c: float(np.min(np.diff(np.sort(v)))) for c, v in ref_scores.items()
        }
        out["sets"][name] = entry
    out["seconds"], out["load_end"] = round(time.time() - start, 1), os.getloadavg()
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


def report(out: dict[str, Any]) -> str:
    lines = [f"{out['model']}: load {out['load_start'][0]:.1f} -> {out['load_end'][0]:.1f}, "
             f"{out['seconds']} s"]  # fmt: skip
    for name, e in out["sets"].items():
        lines.append(f"{name} ({e['texts']} texts); smallest float32 gap between neighbours: "
                     + ", ".join(f"{c} {g:.2e}" for c, g in e["min_gap_f32"].items()))  # fmt: skip
        for variant, v in e["variants"].items():
            tok = ", ".join(f"{k} {x:.4f}" for k, x in v["token_rms"].items())
            cols = ", ".join(
                f"{c} {r:.5f} (rms {v['score_rms'][c]:.1e})" for c, r in v["spearman"].items()
            )
            lines.append(f"  {variant:24} token rms: {tok}")
            lines.append(f"  {'':24} Spearman: {cols}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
