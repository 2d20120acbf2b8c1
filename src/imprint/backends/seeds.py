"""Per-prompt seeds for sampled continuations, kept free of torch so the request kinds (and
``imprint attacks``) can import them without loading it."""

from __future__ import annotations

import hashlib

__all__ = ["prompt_seed"]


def prompt_seed(seed: int, prompt: str) -> int:
    """A 31-bit seed from a request seed and its prompt (batch-independent draws)."""
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
