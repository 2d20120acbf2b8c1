"""ReCaLL (Xie et al. 2024): relative conditional log-likelihood under a non-member prefix.

score = LL(x | P) / LL(x), with LL the mean token log-likelihood (negative) and P the concatenation
of ``n_shots`` non-member texts (default 10), each followed by ``separator``. Conditioning on
non-member text lowers a member's log-likelihood more than a non-member's, so LL(x | P) is more
negative relative to LL(x) and the ratio is larger for members: higher = member, as in the
official code (``ll_nonmember / ll`` ranked directly).

In a run the shots are the first ``n_shots`` of the run's held-out draw
(:func:`imprint.attacks.shots.hold_out`, ``--shot-holdout``): from the ``nonmembers`` pool
(:mod:`imprint.data.pools`: one class, labelled or not), else (seeded) from the natural
evaluation non-members (never rows made from other texts, such as perturbed members), held out
of every attack's evaluation whether ReCaLL runs or not, so the columns share one evaluation set.
Called without a run, the shots are drawn from the given samples and leave the evaluation
(``Preparation.removed_ids``). P is scored once: the backend reuses its KV cache and scores
only the tokens of x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, mean_logp, register
from imprint.attacks.shots import HELDOUT_KEY, nonmember_shots
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet

PREFIX = "recall"
_MAX_LL = -1e-12  # LL(x) is <= 0; keep the ratio finite when a text is predicted with certainty


def recall_score(ll_prefixed: np.ndarray, ll: np.ndarray) -> np.ndarray:
    """LL(x | P) / LL(x) per sample; inputs are mean log-likelihoods, shape (n,)."""
    return np.asarray(ll_prefixed, np.float64) / np.minimum(np.asarray(ll, np.float64), _MAX_LL)


def no_held_out_shots(run: RunContext) -> str | None:
    """Why ``all`` skips a shot-drawing attack: the run held no shots out (too few natural
    non-members, or ``--shot-holdout 0``), else None."""
    held = run.pools.get(HELDOUT_KEY)
    if held is not None and not held:
        return "no held-out non-member shots (--pool nonmembers=FILE or --shot-holdout N)"
    return None


def check_shots(attack: str, n_shots: int, separator: str) -> None:
    if n_shots < 1:
        raise ConfigError(f"{attack} n_shots must be >= 1, got {n_shots}")
    if not separator:
        raise ConfigError(f"{attack} separator must be non-empty (it ends every shot)")


@register("recall")
@dataclass(frozen=True)
class Recall(Attack):
    takes_held_out: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    n_shots: int = 10
    separator: str = "\n\n"

    summary = "LL(x | non-member prefix) / LL(x) (10 shots, held out of every attack's evaluation)"
    paper = "Xie et al. 2024, ReCaLL: Membership Inference via Relative Conditional Log-Likelihoods"

    def __post_init__(self) -> None:
        check_shots("recall", self.n_shots, self.separator)

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return no_held_out_shots(run)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        shots = nonmember_shots(samples, run, self.n_shots, attack="recall")
        return Preparation(
            prefixes={PREFIX: shots.prefix(self.separator)},
            removed_ids=shots.removed_ids,
            reason=f"recall: {len(shots.samples)} non-member shots from {shots.source}",
        )

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(prefix=PREFIX))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        ll = np.array([mean_logp(s.logp) for s in signals.get()])
        ll_p = np.array([mean_logp(s.logp) for s in signals.get(Need(prefix=PREFIX))])
        return {self.name: recall_score(ll_p, ll)}
