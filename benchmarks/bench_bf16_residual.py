"""Experiment (issue 34): does a float32 residual stream bring bf16 scoring near the bf16-weight
floor? The bf16 model, eager (``IMPRINT_NO_COMPILE=1``), scored as is and again with its
embedding output cast to float32 under ``torch.autocast("cpu", bfloat16)``: the residual stream
and the norms then run in float32 while every matrix product still takes bf16 inputs. Sets: the
gate's 30 Chinese and 30 Russian passages and WikiMIA-64 rows 420-459; each variant against
float32 per token (rms of log p, E_p[log p], sd_p[log p]) and per column (Spearman).

Run: cd benchmarks && python bench_bf16_residual.py [smollm2-135m]
"""

from __future__ import annotations

import os
import sys
import time

os.environ["IMPRINT_NO_COMPILE"] = "1"  # both variants eager: the comparison is the residual only

import torch
from bench_bf16_why import per_text, token_errors
from bf16_texts import CHINESE, RUSSIAN
from common import load_rows

from imprint.backends.base import ScoreRequest
from imprint.backends.bf16_gates import spearman
from imprint.backends.hf import HFLogprobBackend


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m"
    sets = {
        "chinese": CHINESE,
        "russian": RUSSIAN,
        "wikimia40": [r["input"] for r in load_rows(64)[420:460]],
    }
    texts = [t for ts in sets.values() for t in ts]
    t0 = time.time()
    f32 = HFLogprobBackend(model, device="cpu", dtype="float32")
    ref = f32.score([ScoreRequest(t) for t in texts])
    del f32
    b = HFLogprobBackend(model, device="cpu", dtype="bfloat16")
    runs = {"bf16 eager": b.score([ScoreRequest(t) for t in texts])}
    hook = b.model.get_input_embeddings().register_forward_hook(lambda m, i, o: o.float())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        runs["bf16 eager fp32-residual"] = b.score([ScoreRequest(t) for t in texts])
    hook.remove()
    at = 0
    for name, ts in sets.items():
        r = ref[at : at + len(ts)]
        rs = per_text(r, ts)
        for v, st in runs.items():
            s = st[at : at + len(ts)]
            sc = per_text(s, ts)
            tok = {k: round(x, 4) for k, x in token_errors(r, s).items()}
            print(name, v, tok, {c: round(spearman(rs[c], sc[c]), 5) for c in sc})
        at += len(ts)
    print("seconds", round(time.time() - t0), "load", os.getloadavg())


if __name__ == "__main__":
    main()
