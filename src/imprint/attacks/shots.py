"""Few-shot prefixes for ReCaLL-style attacks: which texts become shots, and which samples leave.

Shots are drawn with a seeded permutation of the candidates sorted by id, so the draw does not
depend on the order samples arrive in, and a smaller draw is a prefix of a larger one (ReCaLL and
CON-ReCall with the same seed share their non-member shots and remove the same samples).

Non-member shots drawn from the evaluation come from *natural* non-members only: a row made from
another text (``imprint perturb`` labels edited members 0) is member text in disguise. Every
evaluation row that shares a shot's text or source leaves the evaluation.

One evaluation set per run: a run holds its shots out *before* any attack is set up
(:func:`hold_out`, ``--shot-holdout N``, default 10), whichever attacks it runs, so every
attack's column is measured on the same texts and LOSS reads the same with or without ReCaLL in
the run. The attacks then take the first ``n_shots`` of that draw (:data:`HELDOUT_KEY` in the
run's pools) and remove nothing themselves. Called without a run (library use), an attack
draws from the samples it is given, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import RunContext
from imprint.data.pools import MEMBER_POOL, NONMEMBER_POOL, check_pool, is_natural, source_of
from imprint.data.sample import NON_MEMBER, Sample, text_hash
from imprint.errors import ConfigError

__all__ = [
    "DEFAULT_HOLDOUT",
    "HELDOUT_KEY",
    "MEMBER_POOL",
    "NONMEMBER_POOL",
    "HeldOut",
    "Shots",
    "draw",
    "hold_out",
    "member_shots",
    "nonmember_shots",
    "too_few_held_out",
]

#: the run's held-out non-member shots, under this key of ``RunContext.pools`` (no pool a user
#: declares can have this name: pool names are ``members`` and ``nonmembers``)
HELDOUT_KEY = "_heldout_shots"
#: shots a run holds out by default: the largest default ``n_shots`` of the attacks that draw
#: them (ReCaLL and CON-ReCall 10, SimMIA 7)
DEFAULT_HOLDOUT = 10


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


@dataclass(frozen=True)
class HeldOut:
    """The run's held-out shots: the texts (in draw order), the evaluation ids they take out,
    where they come from, how many were asked for, and why none were held out (or "")."""

    shots: tuple[Sample, ...]
    removed_ids: frozenset[str]
    source: str
    requested: int
    why_none: str = ""

    def reason(self) -> str:
        """The drop reason the manifest and report count the removed rows under."""
        return (
            f"held out as the few-shot prefix of ReCaLL-family attacks ({len(self.shots)} "
            f"{self.source}), out of every attack's evaluation"
        )

    def to_dict(self) -> dict[str, object]:
        """The manifest's ``shots`` record."""
        return {
            "held_out": len(self.shots),
            "requested": self.requested,
            "source": self.source,
            "ids": [s.id for s in self.shots],
            "removed_from_evaluation": len(self.removed_ids),
            "same_for_every_attack": True,
            "why_none": self.why_none or None,
        }


def hold_out(
    samples: Sequence[Sample], pool: Sequence[Sample] | None, n: int, *, seed: int
) -> HeldOut:
    """The run's shots, drawn before any attack is set up (see the module docstring).

    From a declared ``nonmembers`` pool: ``n`` of its texts, and evaluation rows with their text
    leave the evaluation. Else ``n`` natural evaluation non-members, with every row sharing
    their text or source, when the evaluation has at least ``2 n`` natural non-members (the
    shots are at most half of them); otherwise none, and ``why_none`` says so.
    """
    if n <= 0:
        return HeldOut((), frozenset(), "none", n, "--shot-holdout 0")
    if pool:
        check_pool(NONMEMBER_POOL, pool)
        chosen = draw(pool, min(n, len(pool)), seed)
        return HeldOut(chosen, _same_text(samples, chosen), f"pool {NONMEMBER_POOL!r}", n)
    candidates = [s for s in samples if s.label == NON_MEMBER and is_natural(s)]
    if len(candidates) < 2 * n:
        why = (
            f"only {len(candidates)} natural evaluation non-members, fewer than 2 x {n}; "
            f"ReCaLL-family attacks need --pool {NONMEMBER_POOL}=FILE or a smaller --shot-holdout"
        )
        return HeldOut((), frozenset(), "natural evaluation non-members", n, why)
    chosen = draw(candidates, n, seed)
    removed = _same_text(samples, chosen) | _same_source(samples, chosen)
    return HeldOut(chosen, removed, "natural evaluation non-members", n)


def _from_held_out(held: Sequence[Sample], n: int, attack: str) -> Shots:
    """The first ``n`` of the run's held-out shots (they left the evaluation already)."""
    if n > len(held):
        raise ConfigError(
            f"{attack}: {n} non-member shots asked for, but the run holds out {len(held)} "
            f"(--shot-holdout N holds out N only when the data has at least 2 N natural "
            f"non-members, so too large an N holds out none; the manifest's 'shots' says why); "
            f"pass --shot-holdout {n} or more but at most half the natural non-members, or "
            f"declare a pool of known non-members (--pool {NONMEMBER_POOL}=FILE)"
        )
    return Shots(tuple(held[:n]), frozenset(), "the run's held-out shots (out of every attack)")


def nonmember_shots(samples: Sequence[Sample], run: RunContext, n: int, *, attack: str) -> Shots:
    """Non-member shots: in a run, the first ``n`` of its held-out draw (:func:`hold_out`);
    without one, from the ``nonmembers`` pool, else from the evaluation non-members.

    Evaluation samples used as shots (or with a shot's text) are removed from the evaluation: a
    text cannot be judged fairly with itself in the prefix.
    """
    held = run.pools.get(HELDOUT_KEY)
    if held is not None:
        return _from_held_out(held, n, attack)
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


def too_few_held_out(attack: str, run: RunContext, n: int) -> str | None:
    """Why ``all`` skips an attack that fits on ``n`` held-out non-members (CAMIA's reference,
    QMIA's and the probe's training texts): the run holds out fewer (``--shot-holdout N``, else
    the ``nonmembers`` pool), else None."""
    held = run.pools.get(HELDOUT_KEY)
    have = len(held) if held is not None else len(run.pools.get(NONMEMBER_POOL, ()))
    if have >= n:
        return None
    return (
        f"{attack} fits on {n} held-out non-members and the run holds out {have} "
        f"(--shot-holdout {n}, or --pool {NONMEMBER_POOL}=FILE)"
    )
