"""How many padded tokens one forward may hold: fixed on CPU, sized from free memory on CUDA.

On CPU a forward of ~4,096 tokens already keeps the cores busy and bounds resident memory. On a GPU
that is far too small a batch to fill the device, so ``token_budget=None`` ("auto") sizes it from
the memory left after the model is loaded: half of it for the activations of one layer's forward
(the only layer alive at a time without a KV cache) plus one row of the attention mask per token,
the rest left for the output-head chunks (see :func:`imprint.backends.reduce.chunk_rows`) and for
whatever else shares the device.
"""

from __future__ import annotations

from typing import Any

import torch

CPU_TOKEN_BUDGET = 4096
MAX_AUTO_BUDGET = 1 << 16  # 65k tokens: ~0.3 s of an H200 for a 1B model; more delays progress


def activation_bytes_per_token(config: Any, *, dtype_bytes: int, max_length: int) -> int:
    """Peak bytes a token costs inside one decoder layer's forward (no gradients, no cache).

    Counted: the residual stream and its normalised copy, queries/keys/values and the attention
    output (~6 x hidden), the MLP's gate, up and activated projections (~3 x intermediate), plus
    one row of a boolean/additive attention mask (``max_length`` entries, worst case 4 bytes).
    """
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    inter = int(getattr(config, "intermediate_size", 0) or 4 * hidden)
    return dtype_bytes * (8 * hidden + 4 * inter) + 4 * max_length


def auto_token_budget(model: Any, device: torch.device, *, max_length: int) -> int:
    """Tokens per forward: :data:`CPU_TOKEN_BUDGET` off CUDA; on CUDA half the free memory over
    :func:`activation_bytes_per_token`, never below the CPU budget nor one full window."""
    if device.type != "cuda":
        return CPU_TOKEN_BUDGET
    free, _total = torch.cuda.mem_get_info(device)
    per_token = activation_bytes_per_token(
        model.config, dtype_bytes=model.dtype.itemsize, max_length=max_length
    )
    budget = int(0.5 * free // max(1, per_token))
    return max(CPU_TOKEN_BUDGET, max_length, min(budget, MAX_AUTO_BUDGET))
