"""Backend contracts: what a model can be asked, per access level.

A backend declares its capabilities; an attack declares what it needs. The planner compares the two
before any work starts, so a mismatch is a clear error and never a crash half-way through a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

LOGPROBS = "logprobs"  # per-token statistics of the next-token distribution (gray-box)
GRADIENTS = "gradients"  # parameter gradients of the loss (white-box)
SAMPLING = "sampling"  # text generation (black-box)
# the prompt's own per-token log p, rank and top-1, without full-vocabulary statistics (what
# serving engines such as vLLM return): serves attacks with ``vocab_stats = False``
TOKEN_LOGPROBS = "token_logprobs"


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``text``'s tokens, optionally after a fixed ``prefix`` whose tokens are not scored.

    The text is tokenised on its own and appended to the prefix tokens, so the scored tokens are
    identical with and without a prefix (ReCaLL-style ratios compare like with like).
    """

    text: str
    prefix: str | None = None


@dataclass(frozen=True, eq=False)
class TokenStats:
    """Per-token statistics of one scored text; every array has shape (T,), T = scored tokens.

    ``logp[t]`` is log p(x_t | x_<t); ``mean_logp[t]`` and ``var_logp[t]`` are the mean and
    variance of log p(v) for v drawn from the model's own next-token distribution at t (Min-K%++);
    ``rank[t]`` is 1 when x_t was the model's top choice; ``argmax[t]`` is that top choice and
    ``top1_logp[t]`` its log-probability, max_v log p(v) (Gap-K%); NaN where not recorded.
    """

    token_ids: np.ndarray  # int32
    logp: np.ndarray  # float32
    mean_logp: np.ndarray  # float32
    var_logp: np.ndarray  # float32
    rank: np.ndarray  # int32
    argmax: np.ndarray  # int32
    top1_logp: np.ndarray | None = None  # float32; None given = not recorded (NaN)

    FIELDS = ("token_ids", "logp", "mean_logp", "var_logp", "rank", "argmax", "top1_logp")

    def __post_init__(self) -> None:
        if self.top1_logp is None:
            object.__setattr__(self, "top1_logp", np.full(self.logp.shape, np.nan, np.float32))

    @property
    def entropy(self) -> np.ndarray:
        """Shannon entropy (nats) of the next-token distribution: -E_p[log p]."""
        return -self.mean_logp

    def __len__(self) -> int:
        return int(self.logp.shape[0])

    @staticmethod
    def concat(parts: Sequence[TokenStats]) -> TokenStats:
        """Join the statistics of consecutive windows of one text."""
        return TokenStats(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in TokenStats.FIELDS)
        )


@runtime_checkable
class LogprobBackend(Protocol):
    """Gray-box access: per-token log-probabilities and distribution statistics."""

    name: str
    capabilities: frozenset[str]

    @property
    def fingerprint(self) -> str:
        """Identifies weights and scoring settings; part of every cache key."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Number of tokens each text has (used to sort and batch by a token budget)."""
        ...

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenStats]:
        """One ``TokenStats`` per request, in order."""
        ...
