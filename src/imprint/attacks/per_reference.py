"""The base of attacks that compare the target with each ``--ref`` model (ref, ez_mia, wbc).

Not an attack itself (nothing registered here): it holds the parts those attacks share, the
``refs`` field taken from the run, the one log-prob pass per model, and the reason ``all`` skips
them when the run has no reference model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imprint.attacks.base import Attack, RunContext
from imprint.signals.needs import Need


@dataclass(frozen=True)
class PerReferenceAttack(Attack):
    """An attack with a score column per reference model in ``refs``."""

    refs: tuple[str, ...] = ()

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return None if run.refs else "no reference model (--ref NAME=SPEC)"

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> Attack:
        params.setdefault("refs", run.refs)
        return cls(**params)

    def needs(self) -> tuple[Need, ...]:
        """The target's plain pass and each reference model's, on the same texts."""
        return (Need(), *(Need(model=r) for r in self.refs))
