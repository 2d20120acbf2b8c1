"""ReCaLL (Xie et al. 2024): relative conditional log-likelihood under a non-member prefix.

score = LL(x | P) / LL(x), with LL the mean token log-likelihood (negative) and P the concatenation
of ``n_shots`` non-member texts (default 10), each followed by ``separator``. Conditioning on
non-member text lowers a member's log-likelihood more than a non-member's, so LL(x | P) is more
negative relative to LL(x) and the ratio is larger for members: higher = member, as in the
official code (``ll_nonmember / ll`` ranked directly).

Shots come from the run's ``nonmembers`` pool (:mod:`imprint.data.pools`: one class, labelled or
not), else (seeded) from the natural evaluation non-members (never rows made from other texts,
such as perturbed members); they and every row sharing their text or source leave the evaluation
of every attack (``Preparation.removed_ids``). P is scored once: the backend reuses its KV cache
and scores only the tokens of x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, mean_logp, register
from imprint.attacks.shots import nonmember_shots
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet

PREFIX = "recall"
_MAX_LL = -1e-12  # LL(x) is <= 0; keep the ratio finite when a text is predicted with certainty


def recall_score(ll_prefixed: np.ndarray, ll: np.ndarray) -> np.ndarray:
    """LL(x | P) / LL(x) per sample; inputs are mean log-likelihoods, shape (n,)."""
    return np.asarray(ll_prefixed, np.float64) / np.minimum(np.asarray(ll, np.float64), _MAX_LL)


def check_shots(attack: str, n_shots: int, separator: str) -> None:
    if n_shots < 1:
        raise ConfigError(f"{attack} n_shots must be >= 1, got {n_shots}")
    if not separator:
        raise ConfigError(f"{attack} separator must be non-empty (it ends every shot)")


@register("recall")
@dataclass(frozen=True)
class Recall(Attack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    n_shots: int = 10
    separator: str = "\n\n"

    summary = "LL(x | non-member prefix) / LL(x) (10 shots, removed from the evaluation)"
    paper = "Xie et al. 2024, ReCaLL: Membership Inference via Relative Conditional Log-Likelihoods"

    def __post_init__(self) -> None:
        check_shots("recall", self.n_shots, self.separator)

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
