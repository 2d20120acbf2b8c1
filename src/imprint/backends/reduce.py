"""Chunked reduction of next-token distributions to per-token statistics.

The full (tokens x vocabulary) logit matrix is never built: hidden states go through the output
head a chunk of positions at a time and each chunk is reduced to six numbers per position at once,
so peak memory is bounded by ``chunk x vocab`` whatever the batch, the length or the vocabulary
(Gemma's 262k vocabulary included).

On CUDA the reduction of a chunk is one compiled function (``torch.compile``): the eager version
reads and writes the (chunk x vocab) matrix about sixteen times, which on a GPU costs more than the
output head itself; fused, it reads the logits about twice. On CPU the same compiled function
(inductor's C++ kernels) is used for reduced-precision models (bf16 / fp16), whose matrix work is
fast enough that the eager passes over the vocabulary dominate; float32 models keep the eager
reduction, so their scores stay bit-for-bit what they were. Results stay on the device until the
whole forward is reduced (see :func:`to_host`): no per-token host round-trips.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

# Chunks of about 32 MiB of float32 logits: small enough for glibc to reuse freed heap blocks
# instead of mapping (and page-faulting) fresh memory for every chunk.
_CHUNK_ELEMENTS = 8 * 1024 * 1024
# On CUDA, chunks of up to ~1 GiB of float32 logits: fewer, larger kernels, and still a small part
# of a modern GPU's memory (capped by free memory in chunk_rows).
_CUDA_CHUNK_ELEMENTS = 256 * 1024 * 1024
# The compiled CPU reduction reads each chunk about twice and allocates no full-size buffer.
# Its chunks were ~8 MiB of float32 logits (to stay in cache); with a bf16 head that left the
# head a 42-row GEMM that re-reads its 56 MB of weights per chunk: on an AMX Xeon, head +
# reduction of 4,096 SmolLM2 positions took 0.75 s in 42-row chunks, 0.64 s in 256-row ones.
_FUSED_CPU_CHUNK_ELEMENTS = 12 * 1024 * 1024
NO_COMPILE_ENV = "IMPRINT_NO_COMPILE"  # set to 1 to reduce eagerly on CUDA too


def chunk_rows(vocab_size: int, device: torch.device | None = None, *, fused: bool = False) -> int:
    """Positions per chunk: ~32 MiB of float32 logits on CPU (~48 MiB for the ``fused``,
    compiled reduction); on CUDA up to ~1 GiB, never more than a tenth of the device's free
    memory (in case other work shares the GPU)."""
    elements = _FUSED_CPU_CHUNK_ELEMENTS if fused else _CHUNK_ELEMENTS
    if device is not None and device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        elements = max(_CHUNK_ELEMENTS, min(_CUDA_CHUNK_ELEMENTS, free // 40))  # ~10 % in fp32
    return max(1, elements // max(1, vocab_size))


@torch.no_grad()
def reduce_logits(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Reduce logits (N, V) and target ids (N,) to per-position statistics, each shaped (N,).

    Returns log p(target), E_p[log p], Var_p[log p], the target's rank (1 = top), the argmax
    and its log-probability (one max over the vocabulary gives both).
    Two (N, V) buffers are allocated; everything else is done in place or as dot products,
    since on CPU each extra full-size pass costs about as much as the output head itself.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    # p underflows to 0 far above -1e4; the clamp keeps p * log p^2 finite for -inf logits
    logp.clamp_(min=-1e4)
    p = logp.exp()
    mean = torch.linalg.vecdot(p, logp)
    p.mul_(logp)  # p is now p * log p
    second = torch.linalg.vecdot(p, logp)
    chosen = logp.gather(1, targets[:, None])
    top = logp.max(-1)
    return {
        "logp": chosen[:, 0],
        "mean_logp": mean,
        "var_logp": (second - mean * mean).clamp_(min=0.0),
        "rank": (logp > chosen).sum(-1) + 1,
        "argmax": top.indices,
        "top1_logp": top.values,
    }


def _fused_stats(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same statistics as :func:`reduce_logits`, written out-of-place for the compiler to
    fuse into a few passes over the logits (in-place updates and ``vecdot`` block fusion)."""
    x = logits.float()
    logp = (x - torch.logsumexp(x, dim=-1, keepdim=True)).clamp(min=-1e4)
    plogp = logp.exp() * logp
    mean = plogp.sum(-1)
    second = (plogp * logp).sum(-1)
    chosen = logp.gather(1, targets[:, None])
    top = logp.max(-1)
    return {
        "logp": chosen[:, 0],
        "mean_logp": mean,
        "var_logp": (second - mean * mean).clamp(min=0.0),
        "rank": (logp > chosen).sum(-1) + 1,
        "argmax": top.indices,
        "top1_logp": top.values,
    }


_compiled: dict[str, Any] = {}


def uses_fused(device: torch.device, model_dtype: torch.dtype = torch.float32) -> bool:
    """Whether chunks on ``device`` are reduced by the compiled function: always on CUDA; on CPU
    for reduced-precision models only (float32 keeps the eager, exact-as-before reduction);
    never when ``IMPRINT_NO_COMPILE=1``."""
    if os.environ.get(NO_COMPILE_ENV) == "1":
        return False
    return device.type == "cuda" or (device.type == "cpu" and model_dtype != torch.float32)


def chunk_reducer(
    device: torch.device, model_dtype: torch.dtype = torch.float32
) -> Callable[[torch.Tensor, torch.Tensor], Any]:
    """The reduction to use on ``device`` for a model of ``model_dtype``: the compiled fused
    version where :func:`uses_fused` says so, else (and when compiling fails) the eager one.
    Compiled once per process, with dynamic shapes so the last, shorter chunk does not trigger
    a recompile."""
    if not uses_fused(device, model_dtype):
        return reduce_logits
    if "fused" not in _compiled:
        try:
            _compiled["fused"] = _checked(torch.compile(_fused_stats, dynamic=True))
        except Exception as exc:  # no compiler for this platform: eager still gives the result
            warnings.warn(f"torch.compile unavailable ({exc}); reducing eagerly", stacklevel=2)
            _compiled["fused"] = reduce_logits
    return _compiled["fused"]  # type: ignore[no-any-return]


def _checked(
    compiled: Callable[[torch.Tensor, torch.Tensor], Any],
) -> Callable[[torch.Tensor, torch.Tensor], Any]:
    """``compiled``, falling back to the eager reduction for good when its first call fails
    (torch.compile only compiles on first use: a missing C++ compiler shows up there)."""
    state = {"ok": False, "failed": False}

    def reduce(logits: torch.Tensor, targets: torch.Tensor) -> Any:
        if state["ok"]:
            return compiled(logits, targets)
        if state["failed"]:
            return reduce_logits(logits, targets)
        try:
            out = compiled(logits, targets)
        except Exception as exc:  # inductor needs a working C++ toolchain on CPU
            warnings.warn(f"torch.compile failed ({exc}); reducing eagerly", stacklevel=2)
            state["failed"] = True
            _compiled["fused"] = reduce_logits
            return reduce_logits(logits, targets)
        state["ok"] = True
        return out

    return reduce


_FLOAT_STATS = ("logp", "mean_logp", "var_logp", "top1_logp")
_INT_STATS = ("rank", "argmax")


@torch.no_grad()
def reduce_hidden(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    *,
    vocab_size: int,
) -> dict[str, torch.Tensor]:
    """Apply the output ``head`` to hidden states (N, H) in chunks and reduce each chunk.

    ``head`` maps (n, H) hidden states to (n, V) logits (softcapping included where the model
    has it). Returns the same statistics as :func:`reduce_logits`, each shaped (N,), on the
    device of ``hidden``.
    """
    # the hidden states carry the model's dtype (a float32 head upcasts them per chunk)
    fused = uses_fused(hidden.device, hidden.dtype)
    step = chunk_rows(vocab_size, hidden.device, fused=fused)
    reduce = chunk_reducer(hidden.device, hidden.dtype)
    n = hidden.shape[0]
    # Results go straight into tensors allocated before the first chunk. Keeping each chunk's
    # small results alive instead (a list of parts, joined at the end) lets the allocator carve
    # them out of the freed ~32 MiB logit buffers, so the next chunk cannot reuse those and maps
    # fresh memory: measured +1.5 GB resident for 4,096 positions of SmolLM2, growing with N.
    floats = {k: hidden.new_empty(n, dtype=torch.float32) for k in _FLOAT_STATS}
    ints = {k: torch.empty(n, dtype=torch.long, device=hidden.device) for k in _INT_STATS}
    out = {**floats, **ints}
    for start in range(0, n, step):
        stop = min(start + step, n)
        part = reduce(head(hidden[start:stop]), targets[start:stop])
        for key, values in part.items():
            out[key][start:stop] = values
        del part
    return out


def to_host(stats: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Per-token results as numpy arrays. On CUDA the float and the integer statistics are each
    stacked and copied in one transfer into pinned host memory, so a forward costs two small
    device-to-host copies whatever the number of statistics."""
    first = next(iter(stats.values()))
    if first.device.type != "cuda":
        return {k: (v.float() if v.is_floating_point() else v).numpy() for k, v in stats.items()}
    names_f = [k for k, v in stats.items() if v.is_floating_point()]
    names_i = [k for k, v in stats.items() if not v.is_floating_point()]
    out: dict[str, np.ndarray] = {}
    for names, dtype in ((names_f, torch.float32), (names_i, torch.long)):
        if not names:
            continue
        stacked = torch.stack([stats[k].to(dtype) for k in names])
        host = torch.empty(stacked.shape, dtype=dtype, pin_memory=True)
        host.copy_(stacked, non_blocking=True)
        torch.cuda.current_stream(first.device).synchronize()
        out.update({k: host[i].numpy() for i, k in enumerate(names)})
    return out


# -- the fused head (CPU bf16): output head and statistics one vocabulary slice at a time -------

#: positions per block of the fused head, and vocabulary rows per slice: a slice's bf16 logits
#: (256 x 4,096 x 2 bytes = 2 MiB) are written by the head's GEMM and read back by the update
#: while still in cache, instead of a 256 x 49,152 block (25 MB) going through memory twice
FUSED_HEAD_ROWS = 256
FUSED_HEAD_SLICE = 4096


def _slice_update(
    x: torch.Tensor,
    xt: torch.Tensor,
    tcol: torch.Tensor,
    m: torch.Tensor,
    s0: torch.Tensor,
    s1: torch.Tensor,
    s2: torch.Tensor,
    above: torch.Tensor,
    top: torch.Tensor,
    arg: torch.Tensor,
    v0: int,
) -> tuple[torch.Tensor, ...]:
    """Fold one vocabulary slice's logits ``x`` (n, v) into the running statistics.

    Online softmax moments about the running maximum ``m``: ``s_k = sum exp(x - m) (x - m)^k``
    for k = 0, 1, 2; a larger maximum rescales them exactly (y -> y + d, weights x exp(d)).
    ``above`` counts logits strictly above the target's ``xt`` (the target's own column,
    ``tcol`` in this slice or outside it, excluded); ``top``/``arg`` track the argmax."""
    x = x.float()
    cmax, carg = x.max(-1)
    m_new = torch.maximum(m, cmax)
    d = m - m_new  # <= 0
    c = d.exp()
    y = x - m_new[:, None]
    e = y.exp()
    ey = e * y
    s2 = c * (s2 + 2 * d * s1 + d * d * s0) + (ey * y).sum(-1)
    s1 = c * (s1 + d * s0) + ey.sum(-1)
    s0 = c * s0 + e.sum(-1)
    cols = torch.arange(x.shape[1], device=x.device)
    over = (x > xt[:, None]) & (cols[None, :] != tcol[:, None])
    above = above + over.sum(-1)
    better = cmax > top
    top = torch.where(better, cmax, top)
    arg = torch.where(better, carg + v0, arg)
    return m_new, s0, s1, s2, above, top, arg


@torch.no_grad()
def fused_head_stats(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    softcap: float | None = None,
    compiled: bool = True,
    slice_rows: int = FUSED_HEAD_SLICE,
) -> dict[str, torch.Tensor]:
    """The statistics of :func:`reduce_logits` for hidden states (N, H) under the output head
    ``weight`` (V, H) (+ ``bias``, Gemma-style ``softcap``), without ever holding a position's
    full row of logits: the head runs one vocabulary slice at a time (in the weights' dtype)
    and :func:`_slice_update` folds each slice into online softmax moments (log-sum-exp, E[x],
    E[x^2] under p), the count of logits above the target's, and the argmax.

    The target's logit is a float32 dot product of the hidden state with its head row, not the
    bf16 GEMM's rounded output (bf16 keeps 8 significant bits: +-0.06 at a logit of 16), so
    log p(target), which every gray-box score is built on, carries only the hidden state's
    rounding. E_p[log p] = E[x] - logsumexp and Var_p[log p] = Var_p[x] (a shift by the constant
    logsumexp), the quantities Min-K%++ needs (Zhang et al. 2024, Eq. 2).
    """
    n, vocab = hidden.shape[0], weight.shape[0]
    update = _slice_updater() if compiled else _slice_update
    out = {k: hidden.new_empty(n, dtype=torch.float32) for k in _FLOAT_STATS}
    out |= {k: torch.empty(n, dtype=torch.long, device=hidden.device) for k in _INT_STATS}
    for start in range(0, n, FUSED_HEAD_ROWS):
        stop = min(start + FUSED_HEAD_ROWS, n)
        h, t = hidden[start:stop], targets[start:stop]
        xt = torch.linalg.vecdot(h.float(), weight.index_select(0, t).float())
        if bias is not None:
            xt = xt + bias.index_select(0, t).float()
        if softcap:
            xt = torch.tanh(xt / softcap) * softcap
        rows = stop - start
        m, top = xt.clone(), torch.full_like(xt, -torch.inf)
        s0, s1, s2 = (torch.zeros_like(xt) for _ in range(3))
        above = torch.zeros(rows, dtype=torch.long, device=h.device)
        arg = torch.zeros(rows, dtype=torch.long, device=h.device)
        for v0 in range(0, vocab, slice_rows):
            v1 = min(v0 + slice_rows, vocab)
            x = torch.nn.functional.linear(h, weight[v0:v1], None if bias is None else bias[v0:v1])
            if softcap:
                x = torch.tanh(x / softcap) * softcap
            m, s0, s1, s2, above, top, arg = update(
                x, xt, t - v0, m, s0, s1, s2, above, top, arg, v0
            )
        log_z = m + s0.log()
        mean_y = s1 / s0
        out["logp"][start:stop] = xt - log_z
        out["mean_logp"][start:stop] = mean_y - s0.log()
        out["var_logp"][start:stop] = (s2 / s0 - mean_y * mean_y).clamp(min=0.0)
        out["top1_logp"][start:stop] = top - log_z
        out["rank"][start:stop] = above + 1
        out["argmax"][start:stop] = arg
    return out


def _slice_updater() -> Callable[..., tuple[torch.Tensor, ...]]:
    """:func:`_slice_update` compiled once per process (dynamic shapes: the last, narrower slice
    and block do not recompile). A compiler that fails is an error, not a silent eager run:
    eager and compiled updates differ in the last bits, and the bf16 path's fingerprint says
    compiled (``IMPRINT_NO_COMPILE=1`` selects the eager one under its own fingerprint)."""
    if "slice" not in _compiled:
        _compiled["slice"] = torch.compile(_slice_update, dynamic=True)
    return _compiled["slice"]  # type: ignore[no-any-return]
