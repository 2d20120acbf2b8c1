"""The typed result of an audit (what :mod:`.audit` computes and :mod:`.report` renders)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imprint.audit.bounds import OneRunBound

__all__ = ["AuditResult"]


@dataclass(frozen=True)
class AuditResult:
    """An audit: every attack's bound per number of guesses (all at ``beta_each``), the best."""

    best: OneRunBound
    attack: str
    curves: dict[str, list[OneRunBound]]
    beta: float
    beta_each: float
    claimed: dict[str, Any] | None
    canaries: int
    members: int
    notes: list[str] = field(default_factory=list)
    #: copies of each canary in training: above 1 the bound is a group-privacy bound for them
    repetitions: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.best.epsilon,
            "confidence": 1 - self.beta,
            "attack": self.attack,
            "guesses": self.best.guesses,
            "correct_guesses": self.best.correct,
            "guesses_in": self.best.k_pos,
            "guesses_out": self.best.k_neg,
            "delta": self.best.delta,
            "canaries": self.canaries,
            "canary_members": self.members,
            "canary_repetitions": self.repetitions,
            "selection": {
                "attacks": sorted(self.curves),
                "guess_grid": [b.guesses for b in next(iter(self.curves.values()))],
                "beta_each": self.beta_each,
                "correction": "Bonferroni over attacks x numbers of guesses",
            },
            "dp_claimed": self.claimed,
            "curves": {a: [b.to_dict() for b in c] for a, c in self.curves.items()},
            "notes": self.notes,
        }
