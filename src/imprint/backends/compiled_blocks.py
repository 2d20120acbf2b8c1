"""Transformer blocks under ``torch.compile`` while a CPU bf16/fp16 model scores (issue 26).

Profiled on SmolLM2-135M in bf16 (576 wide; torch profiler by op, 120 WikiMIA-64 texts on an
AMX Xeon): outside the matrix products a block's time goes to elementwise kernels, each a full
pass over memory (RMSNorm's float32 round trip, rotary, SiLU x up, residual adds): ``mul``
alone took 13 % of the battery. Inductor fuses them, and a fused kernel keeps its intermediates
in float32 instead of rounding each to bf16, so the scores also move closer to float32's
(``benchmarks/bench_bf16.py`` measures both).

One compiled function per block, all over the same code: dynamo lifts a block's parameters to
graph inputs, so the blocks share one graph (a few seconds of compilation per process, cached on
disk by inductor), with dynamic batch and length.

The compiled forwards are installed only for the duration of :meth:`CompiledBlocks.active`,
around the scoring passes: generation and the next-word tree call the same modules eagerly, so
their draws are unchanged. A first call that fails to compile (no C++ toolchain) warns once and
scores eagerly from then on; ``IMPRINT_NO_COMPILE=1`` keeps every block eager.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from imprint.backends.layers import find_layers
from imprint.backends.reduce import NO_COMPILE_ENV

__all__ = ["CompiledBlocks"]


class CompiledBlocks:
    """The blocks of ``model``, compiled when ``enabled`` (CPU, reduced-precision weights)."""

    def __init__(self, model: Any, *, enabled: bool) -> None:
        self.blocks = find_layers(model) if enabled else None
        self._forwards: list[Callable[..., Any]] | None = None
        self.state = "eager" if self.blocks is None else "compiled"

    @property
    def on(self) -> bool:
        return self.state == "compiled" and os.environ.get(NO_COMPILE_ENV) != "1"

    def describe(self) -> str:
        """For the manifest: compiled, eager, or why eager."""
        if self.state == "compiled" and not self.on:
            return f"eager ({NO_COMPILE_ENV}=1)"
        return self.state

    def run(self, forward: Callable[[], Any]) -> Any:
        """``forward()`` with compiled blocks; on a first call that fails to compile, warn and
        run it eagerly (for good). Later failures are real errors and propagate."""
        if not self.on:
            return forward()
        first = self._forwards is None
        try:
            with self._installed():
                return forward()
        except Exception as exc:
            if not first:
                raise
            warnings.warn(
                f"compiling the model's blocks failed ({exc}); scoring eagerly", stacklevel=2
            )
            self.state = "eager (compilation failed)"
            return forward()

    @contextmanager
    def _installed(self) -> Iterator[None]:
        import torch

        assert self.blocks is not None
        if self._forwards is None:
            self._forwards = [torch.compile(block.forward, dynamic=True) for block in self.blocks]
        # an instance attribute shadows the class's forward for this block only, and is removed
        # again after the pass
        for block, forward in zip(self.blocks, self._forwards, strict=True):
            block.forward = forward
        try:
            yield
        finally:
            for block in self.blocks:
                block.__dict__.pop("forward", None)
