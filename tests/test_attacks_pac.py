"""PAC: random-swap augmentations are deterministic, swap the right number of words, and are
scored by the planner as a text variant."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from imprint.attacks.augment import SwapAugment, random_swap, swap_count, swap_pairs, text_seed
from imprint.attacks.pac import Pac, pac_score
from imprint.backends.hf import HFLogprobBackend
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

TEXT = " ".join(f"w{i}" for i in range(20))  # 20 distinct words


#: tiny models run faster on one thread than on oversubscribed cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_swap_count_is_thirty_percent_of_words_at_least_one():
    assert swap_count(20, 0.3) == 6
    assert swap_count(10, 0.3) == 3
    assert swap_count(3, 0.3) == 1
    rng = np.random.default_rng(0)
    pairs = swap_pairs(20, 6, rng)
    assert len(pairs) == 6 and all(i != j and 0 <= i < 20 and 0 <= j < 20 for i, j in pairs)
    assert swap_pairs(1, 3, rng) == []


def test_augmentations_apply_exactly_the_seeded_swaps():
    out = SwapAugment(n=10).apply(TEXT)
    assert len(out) == 10
    words = TEXT.split(" ")
    for j, aug in enumerate(out):
        rng = np.random.default_rng([0, text_seed(TEXT), j])
        assert aug == " ".join(random_swap(words, swap_pairs(20, 6, rng)))
        assert Counter(aug.split(" ")) == Counter(words)  # a permutation of the same words
        moved = sum(a != b for a, b in zip(aug.split(" "), words, strict=True))
        assert moved <= 2 * 6


def test_augmentations_are_deterministic_and_text_seeded():
    a = SwapAugment(n=5).apply(TEXT)
    assert SwapAugment(n=5).apply(TEXT) == a
    assert SwapAugment(n=3).apply(TEXT) == a[:3]  # augmentation j does not depend on n
    assert SwapAugment(n=5, seed=1).apply(TEXT) != a
    other = TEXT.replace("w0", "v0")
    assert [t.replace("v0", "w0") for t in SwapAugment(n=5).apply(other)] != list(a)
    assert len(set(a)) > 1
    assert SwapAugment(n=2).apply("single") == ("single", "single")
    with pytest.raises(ValueError):
        SwapAugment(n=0)


def test_pac_is_scored_through_the_planner(tiny_model_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    attack = Pac(n_aug=4)
    texts = ["The quick brown fox jumps over the lazy dog.", "In 2023 the council met in Seoul."]
    signals, report = run_plan(texts, attack.needs(), {"target": backend}, SignalCache(None))
    augmented = signals.variants(Need(variant=attack.variant))
    assert [len(a) for a in augmented] == [4, 4]
    scores = attack.score(signals)["pac"]
    expected = [
        pac_score(s.logp, [a.logp for a in aug])
        for s, aug in zip(signals.get(), augmented, strict=True)
    ]
    assert scores == pytest.approx(expected)
    assert np.isfinite(scores).all()
