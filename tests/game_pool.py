"""The word pool the game tests build their tiny games from (one copy for test_game and
test_game_demo)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "ran",
    "sat",
    "on",
    "mat",
    "house",
    "tree",
    "river",
    "blue",
    "red",
    "green",
    "small",
    "big",
    "quick",
    "slow",
    "sun",
    "moon",
    "star",
    "day",
    "night",
]


def write_pool(
    path: Path, n: int = 60, words: int = 10, seed: int = 0, vocabulary: Sequence[str] = WORDS
) -> Path:
    """``n`` lines of ``words`` seeded random words from ``vocabulary``, one text a line."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(vocabulary) for _ in range(words)) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
