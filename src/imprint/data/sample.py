"""The unit of data: one candidate text with its membership label."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

MEMBER = 1
NON_MEMBER = 0


@dataclass(frozen=True)
class Sample:
    """One candidate text. ``label`` is 1 for member, 0 for non-member."""

    id: str
    text: str
    label: int
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def text_seed(text: str) -> int:
    """A 64-bit integer derived from the text's SHA-256 (stable across processes): seeds the
    per-text randomness of augmentations and neighbour generators."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little")


def text_hash(text: str) -> str:
    """Stable content hash of a text (used as cache key and for dedupe)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
