"""The base of attacks that compare the target with each ``--ref`` model (ref, ez_mia, wbc).

Not an attack itself (nothing registered here): it holds the parts those attacks share, the
``refs`` field taken from the run, the one log-prob pass per model, and the reason ``all`` skips
them when the run has no reference model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from imprint.attacks.base import Attack, RunContext
from imprint.attacks.contract import Preparation
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need


@dataclass(frozen=True)
class PerReferenceAttack(Attack):
    """An attack with a score column per reference model in ``refs``."""

    refs: tuple[str, ...] = ()
    # compares the target and each reference token by token (ez_mia, wbc): their tokenizers
    # are checked on the run's texts before any model pass, not after all of them
    token_aligned: ClassVar[bool] = False

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        if self.token_aligned and run.requests is not None:
            for ref in self.refs:
                _check_same_tokens(self.name, ref, samples, run.requests)
        return Preparation()

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


def _check_same_tokens(attack: str, ref: str, samples: Sequence[Sample], requests: Any) -> None:
    """Refuse, before any model pass, a reference whose tokenizer splits a text differently
    from the target's (the comparison is per token; tokenizing is milliseconds, the passes it
    would waste are minutes). A backend that cannot tokenize (an API) is left to the check on
    the scored tokens (:func:`imprint.attacks.ez_mia.aligned_pairs`)."""
    from imprint.backends.base import TOKENS

    target, reference = requests.backend("target"), requests.backend(ref)
    if not (target.supports(TOKENS) and reference.supports(TOKENS)):
        return
    for i, sample in enumerate(samples):
        mine, theirs = target.encode(sample.text), reference.encode(sample.text)
        if mine != theirs:
            raise ConfigError(
                f"attack {attack!r} compares the target and reference {ref!r} token by token, "
                f"but their tokenizers split sample {i} differently ({len(mine)} vs "
                f"{len(theirs)} tokens, text starts {sample.text[:40]!r}); use a reference with "
                "the target's tokenizer (e.g. the base model it was fine-tuned from)"
            )
