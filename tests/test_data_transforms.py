"""Transforms: drop counts add up, conflicts are reported, sampling is seeded."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imprint.data import (
    Sample,
    apply_transforms,
    dedupe,
    find_label_conflicts,
    min_words,
    sample_per_label,
    truncate_words,
)
from imprint.data.transforms import LabelConflictWarning
from imprint.errors import ConfigError, DataError


def S(i: str, text: str, label: int) -> Sample:
    return Sample(id=i, text=text, label=label, meta={"k": i})


def test_truncate_words() -> None:
    xs = [S("a", "one two  three\nfour five", 1), S("b", "  short text ", 0)]
    out, dropped = truncate_words(xs, 3)
    assert [s.text for s in out] == ["one two three", "  short text "]  # short ones untouched
    assert dropped == {}
    assert out[0].id == "a" and out[0].meta == {"k": "a"} and out[0].label == 1
    assert xs[0].text == "one two  three\nfour five"  # inputs not mutated


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_n_rejected(bad) -> None:
    with pytest.raises(ConfigError):
        truncate_words([], bad)
    with pytest.raises(ConfigError):
        min_words([], bad)


def test_min_words_counts_drops() -> None:
    xs = [S("a", "w " * 5, 1), S("b", "w w", 0), S("c", "w w w", 0), S("d", "", 1)]
    out, dropped = min_words(xs, 3)
    assert [s.id for s in out] == ["a", "c"]
    assert dropped == {"shorter than 3 words": 2}
    assert min_words(xs[:1], 3)[1] == {}


def test_dedupe_same_label_keeps_first() -> None:
    xs = [S("a", "t1", 1), S("b", "t2", 0), S("c", "t1", 1), S("d", "t1", 1), S("e", "t3", 0)]
    out, dropped = dedupe(xs)
    assert [s.id for s in out] == ["a", "b", "e"]
    assert dropped == {"duplicate text": 2}


def test_dedupe_conflict_drops_all_copies_and_reports_ids() -> None:
    xs = [
        S("a", "shared", 1),
        S("b", "ok0", 0),
        S("c", "shared", 0),
        S("d", "shared", 1),
        S("e", "ok1", 1),
        S("f", "ok1", 1),
    ]
    assert find_label_conflicts(xs) == [("a", "c", "d")]
    with pytest.warns(LabelConflictWarning, match=r"1 text\(s\).*a, c, d"):
        out, dropped = dedupe(xs)
    assert [s.id for s in out] == ["b", "e"]
    assert dropped == {"text under both labels": 3, "duplicate text": 1}
    assert len(out) + sum(dropped.values()) == len(xs)


def test_dedupe_no_warning_without_conflict() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, dropped = dedupe([S("a", "x", 1), S("b", "y", 0)])
    assert len(out) == 2 and dropped == {}


def _pool(n_mem: int, n_non: int) -> list[Sample]:
    return [S(f"m{i}", f"member {i}", 1) for i in range(n_mem)] + [
        S(f"n{i}", f"non {i}", 0) for i in range(n_non)
    ]


def test_sample_per_label_balanced_and_seeded() -> None:
    xs = _pool(30, 50)
    out, dropped = sample_per_label(xs, 10, seed=7)
    assert sum(s.label for s in out) == 10 and len(out) == 20
    assert dropped == {"not sampled (n_per_label=10)": 60}
    again, _ = sample_per_label(xs, 10, seed=7)
    assert [s.id for s in again] == [s.id for s in out]
    other, _ = sample_per_label(xs, 10, seed=8)
    assert [s.id for s in other] != [s.id for s in out]
    order = {s.id: i for i, s in enumerate(xs)}
    assert [order[s.id] for s in out] == sorted(order[s.id] for s in out)  # original order kept


def test_sample_per_label_too_few_says_how_many() -> None:
    with pytest.raises(DataError, match="only 4 non-members exist"):
        sample_per_label(_pool(30, 4), 5, seed=0)
    with pytest.raises(DataError, match="only 2 members exist"):
        sample_per_label(_pool(2, 30), 5, seed=0)


def test_sample_per_label_exact_size_keeps_all() -> None:
    xs = _pool(3, 3)
    out, dropped = sample_per_label(xs, 3, seed=0)
    assert list(out) == xs and dropped == {}


def test_apply_transforms_order_and_counts() -> None:
    xs = [
        S("a", "alpha beta gamma delta", 1),
        S("b", "alpha beta gamma epsilon", 1),  # same first 3 words as a -> duplicate after cut
        S("c", "alpha beta", 0),  # too short
        S("d", "one two three four", 0),
        S("e", "one two three five", 1),  # conflicts with d after truncation
        S("f", "x y z w", 0),
        S("g", "p q r s", 1),
        S("h", "k l m n", 0),
    ]
    with pytest.warns(LabelConflictWarning):
        out, dropped = apply_transforms(xs, truncate=3, min_words=3, dedupe=True)
    assert [s.id for s in out] == ["a", "f", "g", "h"]
    assert [s.text for s in out] == ["alpha beta gamma", "x y z", "p q r", "k l m"]
    assert dropped == {
        "shorter than 3 words": 1,
        "duplicate text": 1,
        "text under both labels": 2,
    }
    assert len(out) + sum(dropped.values()) == len(xs)


def test_apply_transforms_defaults_and_sampling() -> None:
    xs = _pool(20, 20) + [S("dup", "member 0", 1)]
    out, dropped = apply_transforms(xs)
    assert len(out) == 40 and dropped == {"duplicate text": 1}
    a, da = apply_transforms(xs, n_per_label=5, seed=3)
    b, _ = apply_transforms(xs, n_per_label=5, seed=3)
    assert [s.id for s in a] == [s.id for s in b] and len(a) == 10
    assert da == {"duplicate text": 1, "not sampled (n_per_label=5)": 30}
    nodedupe, d2 = apply_transforms(xs, dedupe=False)
    assert len(nodedupe) == 41 and d2 == {}


def test_apply_transforms_everything_dropped_raises() -> None:
    with pytest.raises(DataError, match="every sample was dropped"):
        apply_transforms(_pool(2, 2), min_words=50)


words = st.lists(st.sampled_from(["a", "b", "c", "dd", "e"]), min_size=0, max_size=8)
samples_st = st.lists(
    st.tuples(words, st.integers(0, 1)).map(lambda t: (" ".join(t[0]), t[1])),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(samples_st, st.integers(1, 6), st.integers(1, 6))
def test_nothing_silently_dropped(rows, trunc: int, minw: int) -> None:
    xs = [S(f"s{i}", t, lab) for i, (t, lab) in enumerate(rows)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabelConflictWarning)
        try:
            out, dropped = apply_transforms(xs, truncate=trunc, min_words=minw)
        except DataError:
            return  # everything dropped: raised, not silent
    assert len(out) + sum(dropped.values()) == len(xs)
    assert all(len(s.text.split()) <= trunc for s in out)
    assert len({s.text for s in out}) == len(out)
