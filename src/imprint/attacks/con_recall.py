"""CON-ReCall (Wang et al. 2024): contrast a non-member prefix with a member prefix.

score = (LL(x | P_non) - gamma * LL(x | P_mem)) / LL(x), LL the mean token log-likelihood; higher =
member, as in the official code (ranked directly). gamma defaults to 0.5; ``sweep`` adds a column
``con_recall@g`` per extra gamma, all from the same three passes.

Member shots come only from a pool the user declares as known members
(``RunContext.pools["members"]``); the attack refuses to run when any text of that pool is also
being evaluated, and refuses a non-member (label 0) in it. Non-member shots are ReCaLL's (pool
``nonmembers``, else natural evaluation non-members, removed from the evaluation); with the same
seed and shot count both attacks share them (in a run, the run's held-out shots: see
:func:`imprint.attacks.shots.hold_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, mean_logp, register
from imprint.attacks.recall import check_shots, no_held_out_shots
from imprint.attacks.shots import member_shots, nonmember_shots
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet

NONMEMBER_PREFIX = "con_recall.nonmember"
MEMBER_PREFIX = "con_recall.member"
_MAX_LL = -1e-12


def con_recall_score(
    ll_nonmember: np.ndarray, ll_member: np.ndarray, ll: np.ndarray, *, gamma: float = 0.5
) -> np.ndarray:
    """(LL(x|P_non) - gamma * LL(x|P_mem)) / LL(x) per sample; mean log-likelihoods, shape (n,)."""
    num = np.asarray(ll_nonmember, np.float64) - gamma * np.asarray(ll_member, np.float64)
    return num / np.minimum(np.asarray(ll, np.float64), _MAX_LL)


@register("con_recall")
@dataclass(frozen=True)
class ConRecall(Attack):
    takes_held_out: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    n_shots: int = 10
    gamma: float = 0.5
    sweep: tuple[float, ...] = ()
    separator: str = "\n\n"

    summary = "(LL(x|non-member prefix) - gamma LL(x|member prefix)) / LL(x) (gamma=0.5)"
    paper = (
        "Wang et al. 2024, CON-ReCall: Detecting Pre-training Data in LLMs via Contrastive Decoding"
    )

    def __post_init__(self) -> None:
        check_shots("con_recall", self.n_shots, self.separator)
        object.__setattr__(self, "sweep", tuple(float(g) for g in self.sweep))
        for g in (self.gamma, *self.sweep):
            if not np.isfinite(g) or g < 0:
                raise ConfigError(f"con_recall gamma must be finite and >= 0, got {g}")

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        if not run.pools.get("members"):
            return "no known-member pool (--pool members=DATA)"
        return no_held_out_shots(run)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        members = member_shots(samples, run, self.n_shots, attack="con_recall")
        nonmembers = nonmember_shots(samples, run, self.n_shots, attack="con_recall")
        return Preparation(
            prefixes={
                NONMEMBER_PREFIX: nonmembers.prefix(self.separator),
                MEMBER_PREFIX: members.prefix(self.separator),
            },
            removed_ids=nonmembers.removed_ids,
            reason=(
                f"con_recall: {len(nonmembers.samples)} non-member shots from "
                f"{nonmembers.source}, {len(members.samples)} member shots from "
                f"{members.source}"
            ),
        )

    def columns(self) -> tuple[str, ...]:
        return (self.name, *(f"{self.name}@{g:g}" for g in self.sweep))

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(prefix=NONMEMBER_PREFIX), Need(prefix=MEMBER_PREFIX))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        def ll(need: Need) -> np.ndarray:
            return np.array([mean_logp(s.logp) for s in signals.get(need)])

        base = ll(Need())
        non, mem = ll(Need(prefix=NONMEMBER_PREFIX)), ll(Need(prefix=MEMBER_PREFIX))
        out = {self.name: con_recall_score(non, mem, base, gamma=self.gamma)}
        for g in self.sweep:
            out[f"{self.name}@{g:g}"] = con_recall_score(non, mem, base, gamma=g)
        return out
