"""Process-wide settings that imprint needs for a moment, set for one block and then restored.

Loading a backend or reading a file must not change the process around it: another library in
the same interpreter (or the user's notebook) would see a different environment or random state.
So an environment switch is set only around the forward passes that read it, and a seed only
around the sampling or initialisation it makes reproducible. torch is imported lazily.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: transformers reads this at every SDPA call: "1" lets grouped-query attention share K/V heads
#: instead of copying them to every query head (torch's CPU kernel supports it, mask or not)
SDPA_GQA_ENV = "TRANSFORMERS_SDPA_FORCE_GQA"


@contextmanager
def scoped_env(name: str, value: str, *, respect_user: bool = True) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block; the previous value (or its absence) after.

    With ``respect_user`` a variable the user already set is left as it is: their choice wins.
    """
    previous = os.environ.get(name)
    if respect_user and previous is not None:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


@contextmanager
def sdpa_gqa(enabled: bool) -> Iterator[None]:
    """Shared K/V heads in transformers' SDPA attention for the block, when ``enabled`` (CPU
    models: measured ~20 % off a pass after a 1,000-token prefix); a no-op otherwise."""
    if not enabled:
        yield
        return
    with scoped_env(SDPA_GQA_ENV, "1"):
        yield


@contextmanager
def seeded_torch(seed: int, device: Any = None) -> Iterator[None]:
    """torch's global random generators seeded with ``seed`` inside the block and restored after
    it, so a seeded ``generate`` or initialisation leaves the caller's random state untouched.

    ``device`` (a torch device or its name) says whether CUDA generators take part too.
    """
    import torch

    on_cuda = device is not None and torch.device(device).type == "cuda"
    devices = list(range(torch.cuda.device_count())) if on_cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
