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

The compiled forwards are installed only for the duration of :meth:`CompiledBlocks.run`, around
the plain scoring passes: a pass after a prefix's KV cache runs eagerly, because dynamo guards on
each block's ``layer_idx`` and cache layer there, so it traced every block on its own and, past
its recompile limit (8), silently left the rest eager (found by the hostile test). Generation
and the next-word tree call the same modules eagerly, so their draws are unchanged.

Compiled and eager bf16 blocks give different scores (fused kernels round less), so the mode is
part of the backend's fingerprint (``IMPRINT_NO_COMPILE=1`` keeps every block eager, under its
own fingerprint), and a first call that fails to compile (no C++ toolchain) is an error naming
that switch rather than a silent change of mode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from imprint.backends.layers import find_layers
from imprint.backends.reduce import NO_COMPILE_ENV
from imprint.errors import ConfigError

__all__ = ["CompiledBlocks"]

# graphs per block code object; plain passes need 4-5 (batch of one or many, padded or not)
RECOMPILE_LIMIT = 64


class CompiledBlocks:
    """The blocks of ``model``, compiled when ``enabled`` (CPU, reduced-precision weights)."""

    def __init__(self, model: Any, *, enabled: bool) -> None:
        self.blocks = find_layers(model) if enabled else None
        self._forwards: list[Callable[..., Any]] | None = None

    @property
    def on(self) -> bool:
        return self.blocks is not None and os.environ.get(NO_COMPILE_ENV) != "1"

    def describe(self) -> str:
        """For the manifest: compiled, eager, or why eager."""
        if self.blocks is not None and not self.on:
            return f"eager ({NO_COMPILE_ENV}=1)"
        return "compiled" if self.on else "eager"

    def run(self, forward: Callable[[], Any]) -> Any:
        """``forward()`` with compiled blocks. A first call that fails to compile raises a
        :class:`ConfigError` naming ``IMPRINT_NO_COMPILE=1``; any other error propagates."""
        if not self.on:
            return forward()
        import torch._dynamo.exc

        first = self._forwards is None
        try:
            with self._installed():
                return forward()
        except torch._dynamo.exc.FailOnRecompileLimitHit as exc:
            raise ConfigError(
                f"the model's compiled blocks met more input variants than torch.compile's "
                f"recompile limit allows ({exc}); set {NO_COMPILE_ENV}=1 to score them eagerly"
            ) from exc
        except torch._dynamo.exc.TorchDynamoException as exc:  # inductor's errors included
            if not first:
                raise
            raise ConfigError(
                f"torch.compile could not compile the model's blocks for the CPU bf16 path "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); set "
                f"{NO_COMPILE_ENV}=1 to score them eagerly (their scores differ from compiled "
                "ones and are stored under their own fingerprint), or use --dtype float32"
            ) from exc

    @contextmanager
    def _installed(self) -> Iterator[None]:
        import torch

        assert self.blocks is not None
        if self._forwards is None:
            self._forwards = [torch.compile(block.forward, dynamic=True) for block in self.blocks]
        # an instance attribute shadows the class's forward for this block only; one already
        # there (accelerate's hooks put theirs there) is put back after the pass
        before = [block.__dict__.get("forward") for block in self.blocks]
        for block, forward in zip(self.blocks, self._forwards, strict=True):
            block.forward = forward
        try:
            # past the recompile limit dynamo would run the remaining shapes eagerly without a
            # word (scores that depend on what was compiled before): a high limit, then an error
            limits = {"recompile_limit": RECOMPILE_LIMIT, "fail_on_recompile_limit_hit": True}
            with torch._dynamo.config.patch(limits):
                yield
        finally:
            for block, old in zip(self.blocks, before, strict=True):
                if old is None:
                    block.__dict__.pop("forward", None)
                else:
                    block.forward = old
