"""PETAL (He et al. 2024): label-only MIA from per-token semantic similarity.

At every position t the target's greedy next token g_t (its "label") is compared with the true
token x_t by sentence-embedding similarity, sim_t = log(max(cos(E(x_t), E(g_t)), 1e-16))
(E = all-MiniLM-L6-v2, as in the reference code). A *surrogate* model, whose log-probabilities
are visible, calibrates similarity into log-probability: on the same text, a least-squares line
log p_sur(x_t) ~ a * sim_sur_t + b is fitted over the surrogate's own greedy tokens. Applied to
the target's similarities it estimates the target's token log-probabilities:

    petal(x) = (1/T') sum_t (a * sim_target_t + b),   t = 2 .. T (the first token is skipped),

an estimated mean log-likelihood: higher = member (the reference ranks minus this "perplexity").

Local targets give every greedy token from one teacher-forced pass (``TokenStats.argmax``).
Text-only targets are asked for one greedy token (temperature 0) after every prefix of the
surrogate's tokenization. The surrogate must differ from the target (``surrogate`` names a model
spec, default ``smollm2-135m``); a target whose spec equals it is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from imprint.attacks.base import register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, TokenStats
from imprint.backends.text import as_text_backend
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests, local_transformers
from imprint.requests.embed import Embedder


def log_similarity(embedder: Embedder, truth: Sequence[str], guess: Sequence[str]) -> np.ndarray:
    """log(max(cos(E(truth_t), E(guess_t)), 1e-16)) per position, shape (T,)."""
    if not truth:
        return np.zeros(0)
    a, b = embedder.embed(list(truth)), embedder.embed(list(guess))
    return np.log(np.maximum(np.sum(a * b, axis=1).astype(np.float64), 1e-16))


def fit_line(similarity: np.ndarray, logp: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line logp ~ slope * similarity + intercept.

    Constant similarity (e.g. every greedy token right) gives slope 0, intercept mean(logp).
    """
    if len(similarity) == 0:
        return 0.0, 0.0
    if len(similarity) < 2 or np.ptp(similarity) < 1e-12:
        return 0.0, float(np.mean(logp))
    slope, intercept = np.polyfit(similarity, logp, 1)
    return float(slope), float(intercept)


def petal_score(sim_target: np.ndarray, slope: float, intercept: float) -> float:
    """Mean estimated log-probability of the target, shape () — higher = member."""
    if len(sim_target) == 0:
        return float("nan")
    return float(np.mean(slope * np.asarray(sim_target) + intercept))


@register("petal")
@dataclass(frozen=True)
class PETAL(ModelCallAttack):
    surrogate: str = "smollm2-135m"

    summary = "greedy-token similarity calibrated to log-probability by a surrogate model"
    paper = (
        "He et al. 2024, Towards Label-Only Membership Inference Attack against Pre-trained "
        "Large Language Models (PETAL)"
    )
    access = "black-box"

    def __post_init__(self) -> None:
        if not self.surrogate:
            raise ConfigError("petal needs a surrogate model spec (surrogate=...)")

    def check_backend(self, backend: Any) -> None:
        """Refuse a target that is the surrogate itself, or that cannot give greedy tokens."""
        if getattr(local_transformers(backend) or backend, "spec", None) == self.surrogate:
            raise ConfigError(
                f"petal: the surrogate ({self.surrogate!r}) is the target itself; PETAL calibrates "
                "on a different model — pass surrogate=<another model spec>"
            )
        if local_transformers(backend) is None:
            if SAMPLING not in getattr(backend, "capabilities", frozenset()):
                raise CapabilityError(f"petal needs greedy next tokens; {backend!r} cannot sample")
            as_text_backend(backend)

    def score_with_backend(
        self,
        backend: Any,
        texts: Sequence[str],
        *,
        embedder: Any = None,
        roles: dict[str, Any] | None = None,
        surrogate: Any = None,
        **kwargs: Any,
    ) -> dict[str, np.ndarray]:
        """As the base class; ``surrogate`` may hand in an already loaded surrogate backend."""
        roles = {**(roles or {}), **({"surrogate": surrogate} if surrogate else {})}
        return super().score_with_backend(backend, texts, embedder=embedder, roles=roles)

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Column ``petal``, shape (len(texts),), higher = member."""
        surrogate = requests.load("surrogate", self.surrogate)
        sur_stats = requests.token_stats("surrogate", texts)
        local = requests.local("target")
        if local is not None:
            target_pairs = [_token_pairs(local, s) for s in requests.token_stats("target", texts)]
        else:
            target_pairs = [_remote_pairs(requests, surrogate, s) for s in sur_stats]
        scores = np.full(len(texts), np.nan)
        for i, stats in enumerate(sur_stats):
            truth, guess = _token_pairs(surrogate, stats)
            slope, intercept = fit_line(log_similarity(requests, truth, guess), stats.logp[1:])
            scores[i] = petal_score(log_similarity(requests, *target_pairs[i]), slope, intercept)
        return {self.name: scores}


def _token_pairs(backend: Any, stats: TokenStats) -> tuple[list[str], list[str]]:
    """(true token texts, greedy token texts) for positions 2..T of a local model's pass."""
    decode = backend.tokenizer.decode
    truth = [decode([int(t)]) for t in stats.token_ids[1:]]
    guess = [decode([int(g)]) for g in stats.argmax[1:]]
    return truth, guess


def _remote_pairs(
    requests: ModelRequests, surrogate: Any, stats: TokenStats
) -> tuple[list[str], list[str]]:
    """Greedy one-token continuations of a text-only target after every surrogate-token prefix."""
    ids = [int(t) for t in stats.token_ids]
    decode = surrogate.tokenizer.decode
    prompts = [decode(ids[:j]) for j in range(1, len(ids))]
    truth = [decode([t]) for t in ids[1:]]
    if not prompts:
        return [], []
    outs = requests.sample("target", prompts, 1, 1, temperature=0.0, seed=0)
    return truth, [o[0] for o in outs]
