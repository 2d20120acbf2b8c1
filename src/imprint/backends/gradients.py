"""White-box signals: norms of the parameter gradient of a text's loss.

The loss is the mean token negative log-likelihood under the backend's BOS policy and sliding
windows (every token counted once, as when scoring), so a gradient norm and the LOSS attack see the
same tokens. Gradients go through ``torch.autograd.grad`` and never touch ``param.grad``; the
model's parameters keep their ``requires_grad`` flags and the model stays in eval mode (no
dropout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.backends.base import GRADIENTS, Backend
from imprint.backends.windows import sliding_windows
from imprint.errors import CapabilityError, ConfigError

NORMS = {"l1": 1.0, "l2": 2.0, "linf": float("inf")}
# How the gradient's parameter tensors are combined into one number:
# "global": the p-norm of the whole gradient as one vector (Wang et al. 2024's theta gradient norm);
# "tensor_mean": the mean over parameter tensors of each tensor's p-norm (MIMIR's GradNorm, which
# weighs a small bias vector as much as the embedding matrix).
AGGREGATES = ("global", "tensor_mean")


def check_gradients(backend: Backend) -> None:
    """Raise :class:`CapabilityError` unless ``backend`` serves parameter gradients."""
    backend.require(GRADIENTS, "a gradient attack such as gradnorm")


def check_norm(norm: str, aggregate: str) -> None:
    """Raise :class:`ConfigError` for an unknown norm or aggregation."""
    if norm not in NORMS:
        raise ConfigError(f"unknown gradient norm {norm!r}; use one of {sorted(NORMS)}")
    if aggregate not in AGGREGATES:
        raise ConfigError(
            f"unknown gradient aggregation {aggregate!r}; use one of {list(AGGREGATES)} "
            "(global: one norm of the whole gradient; tensor_mean: MIMIR's mean of per-tensor "
            "norms)"
        )


def gradient_norms(
    backend: Backend, texts: Sequence[str], *, norm: str = "l2", aggregate: str = "global"
) -> np.ndarray:
    """Norm of d loss(x) / d theta, one per text, shape (n,).

    ``norm``: ``l2`` (default), ``l1`` or ``linf``. ``aggregate``: ``global`` (default; the norm
    of the whole gradient as one vector) or ``tensor_mean`` (the mean of each parameter tensor's
    norm, as MIMIR); see :func:`combine_norms`. ``backend`` is an
    :class:`~imprint.backends.hf.HFLogprobBackend`; any other backend raises
    :class:`CapabilityError` (its :meth:`~imprint.backends.base.Backend.local_model` is None).
    """
    import torch

    check_gradients(backend)
    check_norm(norm, aggregate)
    local = backend.local_model()
    if local is None:  # declares gradients but keeps its weights out of reach
        raise CapabilityError(
            f"backend {backend.name!r} ({type(backend).__name__}) has no local model to "
            "differentiate; use a local Hugging Face model (the hf backend) for gradient attacks"
        )
    model = local.model
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    out = np.zeros(len(texts), dtype=np.float64)
    try:
        for p in params:
            p.requires_grad_(True)
        for i, text in enumerate(texts):
            ids = [local.bos_id, *local.encode(text)]
            if len(ids) < 2:
                raise ConfigError(f"text {i}: cannot take the gradient of an empty text")
            windows = sliding_windows(ids, local.max_length, local.stride)
            total: list[Any] = [None] * len(params)
            for window, first in windows:
                with torch.enable_grad():
                    logits = model(input_ids=torch.tensor([window], device=local.device)).logits
                    logp = torch.log_softmax(logits[0, first - 1 : -1].float(), dim=-1)
                    target = torch.tensor(window[first:], device=logp.device)
                    nll = -logp.gather(1, target[:, None]).sum() / (len(ids) - 1)
                    grads = torch.autograd.grad(nll, params, allow_unused=True)
                total = [
                    g if t is None else t if g is None else t + g
                    for t, g in zip(total, grads, strict=True)
                ]
            out[i] = combine_norms([t for t in total if t is not None], norm, aggregate)
    finally:
        for p, flag in zip(params, flags, strict=True):
            p.requires_grad_(flag)
    return out


def combine_norms(tensors: Sequence[Any], norm: str, aggregate: str) -> float:
    """One number from the gradient tensors of the parameters that received one.

    ``global``: ||concat(g_1..g_m)||_p, e.g. sqrt(sum_i ||g_i||_2^2) for l2. ``tensor_mean``:
    (1/m) sum_i ||g_i||_p over the m tensors (tensors without a gradient are not counted).
    """
    check_norm(norm, aggregate)
    p = NORMS[norm]
    per_tensor = [_tensor_norm(t, p) for t in tensors]
    if not per_tensor:
        raise ConfigError("no parameter received a gradient; is the model frozen or empty?")
    if aggregate == "tensor_mean":
        return float(np.mean(per_tensor))
    if p == float("inf"):
        return max(per_tensor)
    # the p-norm of the concatenation is the p-norm of the per-tensor p-norms
    return float(np.sum(np.asarray(per_tensor, dtype=np.float64) ** p) ** (1.0 / p))


def _tensor_norm(tensor: Any, p: float) -> float:
    import torch

    return float(torch.linalg.vector_norm(tensor.detach(), ord=p, dtype=torch.float64))
