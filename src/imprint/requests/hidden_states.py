"""The ``hidden_states`` request kind: a local model's activations at the last token of a text.

:class:`HiddenStatesRequest` puts ``text`` into ``template`` (its ``[TEXT]`` slot), reads it after
the model's start token and returns the output of every decoder layer at the last position, shape
(layers, hidden size), float32 (the probe attack's features; Liu et al. 2024 read the same outputs
with forward hooks). A text too long for the model's context is cut to its first tokens that
fit between the template's two parts (:func:`context_ids`), so the last position is still the
template's end. :func:`hidden_states` is the client function asking for them, so every
activation is stored under the model's content fingerprint and counted like any model call.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.errors import CapabilityError, DataError
from imprint.requests.kinds import Request, require_local

__all__ = ["HiddenStatesRequest", "context_ids", "hidden_states"]

SLOT = "[TEXT]"


def context_ids(local: Any, template: str, text: str) -> list[int]:
    """The ids a local model reads for ``text`` in ``template``: start token + the templated
    text, encoded whole when it fits ``local.max_length``; else start token + the template's
    part before the slot + the text's first tokens that fit + the part after (each encoded on
    its own). A template too long to leave room for one token of text is refused."""
    ids = [*local.start_ids, *local.encode(template.replace(SLOT, text))]
    limit = int(local.max_length)
    if len(ids) <= limit:
        return ids
    before, _, after = template.partition(SLOT)
    head = [*local.start_ids, *(local.encode(before) if before else [])]
    tail = local.encode(after) if after else []
    room = limit - len(head) - len(tail)
    if room < 1:
        raise DataError(
            f"the template {template!r} alone takes {len(head) + len(tail)} of the model's "
            f"{limit} context tokens, leaving none for the text {text[:40]!r}...; pass a "
            "shorter template"
        )
    return [*head, *local.encode(text)[:room], *tail]


@dataclass(frozen=True)
class HiddenStatesRequest(Request):
    """Last-token outputs of every decoder layer for ``template`` with ``text`` in its slot."""

    kind: ClassVar[str] = "hidden_states"
    text: str
    template: str = SLOT
    batch_size: ClassVar[int] = 8

    def size(self) -> int:
        return len(self.text)

    @staticmethod
    def encode(result: Any) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(result, dtype="<f4"), allow_pickle=False)
        return buffer.getvalue()

    @staticmethod
    def decode(blob: bytes) -> Any:
        return np.load(io.BytesIO(blob), allow_pickle=False)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        import torch

        from imprint.backends.layers import find_layers

        local = require_local(backend, "hidden-state activations")
        model = local.model
        layers = find_layers(model)
        if layers is None:
            raise CapabilityError(
                f"hidden_states: no list of {getattr(model.config, 'num_hidden_layers', '?')} "
                f"decoder blocks found in {type(model).__name__}; the probe reads the output "
                "of each block and supports models with one torch ModuleList of them"
            )
        outputs: list[Any] = []
        hooks = [
            layer.register_forward_hook(
                lambda _m, _i, out: outputs.append(out[0] if isinstance(out, tuple) else out)
            )
            for layer in layers
        ]
        results = []
        try:
            with torch.no_grad():
                for r in batch:
                    ids = context_ids(local, r.template, r.text)
                    outputs.clear()
                    model(torch.tensor([ids], device=local.device))
                    last = [o.reshape(-1, o.shape[-1])[-1].float().cpu().numpy() for o in outputs]
                    results.append(np.stack(last).astype(np.float32))
        finally:
            for hook in hooks:
                hook.remove()
        return results


def hidden_states(requests: Any, role: str, texts: Sequence[str], template: str) -> np.ndarray:
    """Activations of ``role`` for each text, shape (len(texts), layers, hidden size)."""
    reqs = [HiddenStatesRequest(text=t, template=template) for t in texts]
    out = requests.runner.run(role, requests.fingerprint(role), reqs, requests.backend(role))
    return np.stack([np.asarray(a) for a in out])
