"""Canary membership is a seeded draw, independent of the order the canaries were generated in."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from imprint.game import GameConfig
from imprint.game import records as records_mod

REPS = (1, 3, 8)
PER_REP = 2
N = 2 * PER_REP * len(REPS)  # canary texts generated: members and non-members


@pytest.fixture
def numbered_canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """generate_texts stand-in: the i-th generated text says it was generated i-th (non-Latin
    text, to show nothing depends on the words)."""

    def fake(model: Any, tokenizer: Any, n: int, **kw: Any) -> list[str]:
        return [f"生成された {i} 番目のカナリア" for i in range(n)]

    monkeypatch.setattr(records_mod, "generate_texts", fake)


def canaries(seed: int) -> list[dict[str, Any]]:
    config = GameConfig(
        model="unused",
        pool_size=100,
        words=8,
        seed=seed,
        canary_repetitions=REPS,
        canaries_per_repetition=PER_REP,
    )
    return records_mod._canary_records(config, None, None, set(), console=None, progress=False)


def position(row: dict[str, Any]) -> int:
    return int(row["text"].split()[1])


def test_canary_groups_stay_balanced(numbered_canaries):
    rows = canaries(seed=5)
    assert sorted(position(r) for r in rows) == list(range(N))
    cells = Counter((r["meta"]["group"], r["meta"]["split"]) for r in rows)
    assert cells == {(f"canary x{r}", s): PER_REP for r in REPS for s in ("member", "nonmember")}
    for r in rows:  # a member's repetitions are its group's; a non-member was never trained
        reps = int(r["meta"]["group"].removeprefix("canary x"))
        assert r["meta"]["repetitions"] == (reps if r["label"] == 1 else 0)


def test_canary_roles_do_not_follow_generation_order(numbered_canaries):
    """Over 200 seeds every generation position is a member about half the time and in each
    repetition group about a third of the time. Before the fix the first half generated were
    always the members (and position 0 always in group x1), so texts generated in a later,
    longer-budget round were always non-members."""
    seeds = range(200)
    member = Counter()
    group = Counter()
    splits = set()
    for seed in seeds:
        rows = canaries(seed)
        splits.add(frozenset(position(r) for r in rows if r["label"] == 1))
        for r in rows:
            member[position(r)] += r["label"]
            group[position(r), r["meta"]["group"]] += 1
    assert len(splits) > 150  # the member set changes with the seed
    for p in range(N):
        assert 0.3 < member[p] / len(seeds) < 0.7, (p, member[p])
        for reps in REPS:
            share = group[p, f"canary x{reps}"] / len(seeds)
            assert 0.2 < share < 0.47, (p, reps, share)
    late = [p for p in range(N) if p >= 3 * N // 4]  # the last quarter generated
    late_members = sum(member[p] for p in late) / (len(late) * len(seeds))
    assert 0.4 < late_members < 0.6
