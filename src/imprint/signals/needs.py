"""What an attack asks of the signal stage: which model, on which text variant, after which prefix.

A :class:`Need` is hashable, so the planner deduplicates across attacks: LOSS, Zlib, Min-K% and
Min-K%++ all ask for ``Need()`` and share one forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from imprint.backends.base import TokenStats

TARGET = "target"


@dataclass(frozen=True)
class TextVariant:
    """Maps a text to the texts to score for it. Subclass for augmentations (PAC, neighbours)."""

    name: str = "identity"

    def apply(self, text: str) -> tuple[str, ...]:
        if self.name == "identity":
            return (text,)
        if self.name == "lower":
            return (text.lower(),)
        raise ValueError(f"unknown text variant {self.name!r}")


IDENTITY = TextVariant("identity")
LOWER = TextVariant("lower")


@dataclass(frozen=True)
class Need:
    """Score ``variant(x)`` with the backend in role ``model`` after prefix ``prefix``.

    ``model`` is ``"target"`` or the name of a reference model; ``prefix`` names an entry of the
    run's prefixes (e.g. ReCaLL's non-member shots), resolved by the planner.
    """

    model: str = TARGET
    variant: TextVariant = field(default=IDENTITY)
    prefix: str | None = None


class SignalSet:
    """Cached statistics for every need, aligned with the samples.

    ``variants(need)[i]`` holds one ``TokenStats`` per text the variant made from sample i.
    """

    def __init__(
        self, texts: Sequence[str], data: dict[Need, list[tuple[TokenStats, ...]]]
    ) -> None:
        self.texts = list(texts)
        self._data = data

    def __len__(self) -> int:
        return len(self.texts)

    def variants(self, need: Need) -> list[tuple[TokenStats, ...]]:
        if need not in self._data:
            raise KeyError(f"no signals for {need}; did the attack declare it in needs()?")
        return self._data[need]

    def get(self, need: Need = Need()) -> list[TokenStats]:
        """One ``TokenStats`` per sample (for variants that make one text per sample)."""
        return [v[0] for v in self.variants(need)]
