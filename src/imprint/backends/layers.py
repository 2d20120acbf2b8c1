"""Finding a Hugging Face model's transformer blocks (for per-layer hooks and layer freezing)."""

from __future__ import annotations

from typing import Any

__all__ = ["find_layers"]


def find_layers(model: Any) -> Any:
    """The model's list of transformer blocks (the ModuleList with ``num_hidden_layers`` items)."""
    import torch

    n = getattr(model.config, "num_hidden_layers", None)
    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and (n is None or len(module) == n):
            return module
    return None
