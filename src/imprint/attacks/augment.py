"""Text variants made by augmentation (scored by the planner like any other text).

:class:`SwapAugment`: PAC's adjacent samples, EDA random swap (Wei & Zou 2019): split x on single
spaces, swap two distinct word positions ``max(1, floor(fraction * words))`` times, join with
spaces; ``n`` such augmentations per text. The draw is seeded by (seed, SHA-256 of x, augmentation
index), so the same text always gets the same augmentations, in any run, order or process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.data.sample import text_seed
from imprint.signals.needs import TextVariant


def swap_count(n_words: int, fraction: float) -> int:
    """Swaps per augmentation: ``max(1, floor(fraction * n_words))`` (PAC/EDA)."""
    return max(1, int(fraction * n_words))


def swap_pairs(n_words: int, n_swaps: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``n_swaps`` pairs of distinct positions in [0, n_words); none when n_words < 2."""
    if n_words < 2:
        return []
    pairs = []
    for _ in range(n_swaps):
        i, j = rng.choice(n_words, size=2, replace=False)
        pairs.append((int(i), int(j)))
    return pairs


def random_swap(words: list[str], pairs: list[tuple[int, int]]) -> list[str]:
    out = list(words)
    for i, j in pairs:
        out[i], out[j] = out[j], out[i]
    return out


@dataclass(frozen=True)
class SwapAugment(TextVariant):
    """``n`` random-swap augmentations of a text (see the module docstring)."""

    name: str = "swap"
    n: int = 10
    fraction: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SwapAugment n must be >= 1, got {self.n}")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"SwapAugment fraction must be in (0, 1], got {self.fraction}")

    def apply(self, text: str) -> tuple[str, ...]:
        words = text.split(" ")
        k = swap_count(len(words), self.fraction)
        out = []
        for j in range(self.n):
            rng = np.random.default_rng([self.seed, text_seed(text), j])
            out.append(" ".join(random_swap(words, swap_pairs(len(words), k, rng))))
        return tuple(out)
