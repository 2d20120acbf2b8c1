"""SURP (Zhang & Wu 2024): log-probabilities of *surprising* tokens.

A token is surprising when the model was confident about the next token (entropy of the
next-token distribution below ``max_entropy`` nats) and yet gave the actual token a low
probability (its log p is among the ``max(1, floor(k * T))`` lowest of the text). A member's
surprising tokens are less surprising: score = mean log p(x_t) over the surprising tokens, higher =
member.

Empty set: when no low-probability token has low entropy, the score falls back to the mean log p of
the ``k`` lowest tokens (Min-K% Prob with the same k), so every text gets a finite score on the same
scale. The reference implementation returned NaN there and mapped it to -100, which ranks such
texts as certain non-members; the fallback ranks them by the evidence they do have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import Attack, check_fraction, register
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


def surp_score(
    logp: np.ndarray, entropy: np.ndarray, *, k: float = 0.4, max_entropy: float = 2.0
) -> float:
    """SURP score of one text.

    ``logp`` and ``entropy`` have shape (T,): log p(x_t | x_<t) and the entropy (nats) of the
    next-token distribution at t. Selects the ``max(1, floor(k * T))`` lowest log p (ties: earlier
    token first), keeps those with entropy < ``max_entropy`` and returns their mean log p; with none
    kept, the mean over the whole lowest-k selection.
    """
    logp = np.asarray(logp, dtype=np.float64)
    entropy = np.asarray(entropy, dtype=np.float64)
    if logp.shape != entropy.shape or logp.ndim != 1 or logp.size == 0:
        raise ValueError(
            f"logp and entropy must be equal, non-empty (T,) arrays; got "
            f"{logp.shape} and {entropy.shape}"
        )
    n = max(1, int(logp.size * k))
    lowest = np.argsort(logp, kind="stable")[:n]
    surprising = lowest[entropy[lowest] < max_entropy]
    chosen = surprising if surprising.size else lowest
    return float(np.mean(logp[chosen]))


@register("surp")
@dataclass(frozen=True)
class Surp(Attack):
    k: float = 0.4
    max_entropy: float = 2.0

    summary = "mean log-prob of low-probability tokens the model was confident about (k=0.4, H<2)"
    paper = (
        "Zhang & Wu 2024, Adaptive Pre-training Data Detection for Large Language Models via "
        "Surprising Tokens"
    )

    def __post_init__(self) -> None:
        check_fraction("surp k", self.k)
        if not self.max_entropy > 0:
            raise ConfigError(f"surp max_entropy must be > 0 nats, got {self.max_entropy}")

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {
            self.name: np.array(
                [
                    surp_score(s.logp, s.entropy, k=self.k, max_entropy=self.max_entropy)
                    for s in signals.get()
                ]
            )
        }
