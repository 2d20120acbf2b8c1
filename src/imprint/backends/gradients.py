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

from imprint.backends.base import GRADIENTS
from imprint.errors import CapabilityError, ConfigError

NORMS = {"l1": 1.0, "l2": 2.0, "linf": float("inf")}


def check_gradients(backend: Any) -> None:
    """Raise :class:`CapabilityError` unless ``backend`` serves parameter gradients."""
    if GRADIENTS not in getattr(backend, "capabilities", frozenset()) or not hasattr(
        backend, "model"
    ):
        raise CapabilityError(
            f"backend {getattr(backend, 'name', type(backend).__name__)!r} cannot compute "
            "parameter gradients (white-box); use a local Hugging Face model "
            "(HFLogprobBackend) for gradient attacks such as gradnorm"
        )


def gradient_norms(backend: Any, texts: Sequence[str], *, norm: str = "l2") -> np.ndarray:
    """Norm of d loss(x) / d theta over all parameters, one per text, shape (n,).

    ``norm``: ``l2`` (default; sqrt of the sum of squares over every parameter), ``l1`` or
    ``linf``. ``backend`` is an :class:`~imprint.backends.hf.HFLogprobBackend` (or any object with
    ``model``, ``encode``, ``bos_id``, ``max_length``, ``stride`` and the GRADIENTS capability).
    """
    import torch

    from imprint.backends.hf import sliding_windows

    check_gradients(backend)
    if norm not in NORMS:
        raise ConfigError(f"unknown gradient norm {norm!r}; use one of {sorted(NORMS)}")
    model = backend.model
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    out = np.zeros(len(texts), dtype=np.float64)
    try:
        for p in params:
            p.requires_grad_(True)
        for i, text in enumerate(texts):
            ids = [backend.bos_id, *backend.encode(text)]
            if len(ids) < 2:
                raise ConfigError(f"text {i}: cannot take the gradient of an empty text")
            windows = sliding_windows(ids, backend.max_length, backend.stride)
            total: list[Any] = [None] * len(params)
            for window, first in windows:
                with torch.enable_grad():
                    logits = model(input_ids=torch.tensor([window], device=backend.device)).logits
                    logp = torch.log_softmax(logits[0, first - 1 : -1].float(), dim=-1)
                    target = torch.tensor(window[first:], device=logp.device)
                    nll = -logp.gather(1, target[:, None]).sum() / (len(ids) - 1)
                    grads = torch.autograd.grad(nll, params, allow_unused=True)
                total = [
                    g if t is None else t if g is None else t + g
                    for t, g in zip(total, grads, strict=True)
                ]
            out[i] = _norm([t for t in total if t is not None], NORMS[norm])
    finally:
        for p, flag in zip(params, flags, strict=True):
            p.requires_grad_(flag)
    return out


def _norm(tensors: list[Any], p: float) -> float:
    if p == float("inf"):
        return max(float(t.abs().max()) for t in tensors)
    return float(sum(float(t.float().abs().pow(p).sum()) for t in tensors) ** (1.0 / p))
