"""A quick measured answer to "is bf16 faster than float32 on this machine, for this model?".

The probe times one layer's matrix products (attention projections, MLP) and a 16,384-row slice
of the output head, 64 token rows, in float32 and in bf16, weighted as a forward is (layers x one
layer + head slices); a median of three after a warm-up. About a second on a quiet machine, once
per machine and model: the result is kept in ``<cache dir>/dtype-probe/`` keyed by
the host, the CPU model, torch's version and thread count, and the weights' fingerprint, so a
shared cache folder on other hardware measures its own.
"""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROWS = 64
HEAD_SLICE = 16384  # vocabulary rows timed; the head's time is scaled from them
REPS = 3


def machine_key() -> str:
    """Host, CPU model, torch version and threads: what the probe's answer depends on."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}|{model}|torch {torch.__version__}|{torch.get_num_threads()} threads"


def measure(dims: Mapping[str, int], *, rows: int = ROWS, reps: int = REPS) -> dict[str, float]:
    """Seconds for one forward's matrix products of ``rows`` tokens in each dtype, and the ratio.

    ``dims``: hidden, kv (key/value width), intermediate, vocab, layers."""
    import torch

    h, kv, inter = dims["hidden"], dims["kv"], dims["intermediate"]
    layer_shapes = [(h, h), (kv, h), (kv, h), (h, h), (inter, h), (inter, h), (h, inter)]
    out: dict[str, float] = {}
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        layer = [torch.randn(*s, generator=gen).to(dtype) for s in layer_shapes]
        head = torch.randn(min(HEAD_SLICE, dims["vocab"]), h, generator=gen).to(dtype)
        x = torch.randn(rows, h, generator=gen).to(dtype)
        xi = torch.randn(rows, inter, generator=gen).to(dtype)

        def layer_pass(x: torch.Tensor = x, xi: torch.Tensor = xi, ws: list[Any] = layer) -> None:
            for w in ws:
                torch.nn.functional.linear(xi if w.shape[1] == inter else x, w)

        def head_pass(x: torch.Tensor = x, w: torch.Tensor = head) -> None:
            torch.nn.functional.linear(x, w)

        seconds = {}
        for name, fn in (("layer", layer_pass), ("head", head_pass)):
            fn()  # warm-up: kernel selection, first-touch of the output
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            seconds[name] = statistics.median(times)
        key = "bfloat16" if dtype == torch.bfloat16 else "float32"
        slices = dims["vocab"] / head.shape[0]
        out[key] = dims["layers"] * seconds["layer"] + slices * seconds["head"]
    out["speedup"] = out["float32"] / out["bfloat16"]
    return out


def probe_path(fingerprint: str, dims: Mapping[str, int], root: Path) -> Path:
    raw = f"{machine_key()}|{fingerprint}|{sorted(dims.items())}"
    return root / "dtype-probe" / f"{hashlib.sha256(raw.encode()).hexdigest()[:20]}.json"


def cached_speedup(fingerprint: str, dims: Mapping[str, int], *, root: Path) -> float:
    """bf16's speed-up over float32 for this model here: measured once, then read back from
    ``root`` (imprint's cache folder). An unwritable folder only means measuring again."""
    path = probe_path(fingerprint, dims, root)
    try:
        return float(json.loads(path.read_text())["speedup"])
    except (OSError, ValueError, KeyError):
        pass
    result = measure(dims)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"machine": machine_key(), "dims": dict(dims), **result}))
    except OSError:
        pass
    return result["speedup"]
