"""Few-shot prefixes for ReCaLL-style attacks: which texts become shots, and which samples leave.

Shots are drawn with a seeded permutation of the candidates sorted by id, so the draw does not
depend on the order samples arrive in, and a smaller draw is a prefix of a larger one (ReCaLL and
CON-ReCall with the same seed share their non-member shots and remove the same samples).

Non-member shots drawn from the evaluation come from *natural* non-members only: a row made from
another text (``imprint perturb`` labels edited members 0) is member text in disguise. Every
evaluation row that shares a shot's text or source leaves the evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import RunContext
from imprint.data.pools import MEMBER_POOL, NONMEMBER_POOL, check_pool, is_natural, source_of
from imprint.data.sample import NON_MEMBER, Sample, text_hash
from imprint.errors import ConfigError

__all__ = ["MEMBER_POOL", "NONMEMBER_POOL", "Shots", "draw", "member_shots", "nonmember_shots"]


@dataclass(frozen=True)
class Shots:
    """Chosen shot samples, the evaluation ids they take out, and where they came from."""

    samples: tuple[Sample, ...]
    removed_ids: frozenset[str]
    source: str

    def prefix(self, separator: str) -> str:
        return separator.join(s.text for s in self.samples) + separator


def normalise(text: str) -> str:
    """Whitespace-insensitive form used to recognise the same text twice."""
    return " ".join(text.split())


def draw(candidates: Sequence[Sample], n: int, seed: int) -> tuple[Sample, ...]:
    """``n`` candidates by a seeded permutation of the candidates sorted by (id, text hash)."""
    ordered = sorted(candidates, key=lambda s: (s.id, text_hash(s.text)))
    order = np.random.default_rng(seed).permutation(len(ordered))
    return tuple(ordered[i] for i in order[:n])


def _same_text(samples: Sequence[Sample], shots: Sequence[Sample]) -> frozenset[str]:
    texts = {normalise(s.text) for s in shots}
    return frozenset(s.id for s in samples if normalise(s.text) in texts)


def _same_source(samples: Sequence[Sample], shots: Sequence[Sample]) -> frozenset[str]:
    """Evaluation rows made from a shot's text (or that a shot was made from)."""
    sources = {source_of(s) for s in shots}
    return frozenset(s.id for s in samples if source_of(s) in sources)


def nonmember_shots(samples: Sequence[Sample], run: RunContext, n: int, *, attack: str) -> Shots:
    """Non-member shots from the run's ``nonmembers`` pool, else from the evaluation non-members.

    Evaluation samples used as shots (or with a shot's text) are removed from the evaluation: a
    text cannot be judged fairly with itself in the prefix.
    """
    pool = run.pools.get(NONMEMBER_POOL)
    if pool:
        check_pool(NONMEMBER_POOL, pool)
        if len(pool) < n:
            raise ConfigError(
                f"{attack}: the {NONMEMBER_POOL!r} pool has {len(pool)} texts but "
                f"{n} shots were asked for; lower n_shots or add texts"
            )
        chosen = draw(pool, n, run.seed)
        return Shots(chosen, _same_text(samples, chosen), f"pool {NONMEMBER_POOL!r}")
    candidates = [s for s in samples if s.label == NON_MEMBER and is_natural(s)]
    if len(candidates) <= n:
        raise ConfigError(
            f"{attack}: {n} non-member shots would use all {len(candidates)} natural evaluation "
            f"non-members (rows made from other texts, e.g. perturbed members, never serve as "
            f"shots); lower n_shots or declare a pool of known non-members "
            f"(--pool {NONMEMBER_POOL}=FILE)"
        )
    chosen = draw(candidates, n, run.seed)
    removed = _same_text(samples, chosen) | _same_source(samples, chosen)
    return Shots(chosen, removed, "natural evaluation non-members")


def member_shots(samples: Sequence[Sample], run: RunContext, n: int, *, attack: str) -> Shots:
    """Member shots, only from a declared pool of known members disjoint from the evaluation."""
    pool = run.pools.get(MEMBER_POOL)
    if not pool:
        raise ConfigError(
            f"{attack} needs member shots from a pool of texts known to be members "
            f"(--pool {MEMBER_POOL}=FILE); evaluation members are never used as shots, "
            "since that would use the labels being evaluated"
        )
    check_pool(MEMBER_POOL, pool)
    leaked = sorted(_same_text(pool, samples))
    if leaked:
        raise ConfigError(
            f"{attack}: {len(leaked)} text(s) of the {MEMBER_POOL!r} pool are also in the "
            f"evaluation set (pool ids {', '.join(leaked[:5])}{', ...' if len(leaked) > 5 else ''})"
            "; member shots must be disjoint from the evaluated samples — remove them from "
            "the pool or from the evaluation data"
        )
    if len(pool) < n:
        raise ConfigError(
            f"{attack}: the {MEMBER_POOL!r} pool has {len(pool)} texts but {n} "
            "shots were asked for; lower n_shots or add texts"
        )
    return Shots(draw(pool, n, run.seed), frozenset(), f"pool {MEMBER_POOL!r}")
