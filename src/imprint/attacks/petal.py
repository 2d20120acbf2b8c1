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
surrogate's tokenization. The surrogate must differ from the target: ``surrogate`` names a model
spec; the default ``auto`` takes the first installed offline model of :data:`AUTO_SURROGATES`
that is not the target (``gemma3-270m`` for the default target ``smollm2-135m``), records it and
why in the manifest (``attacks.petal.surrogate``, ``surrogate_choice``), and stops before any
model is loaded when there is none. A surrogate given explicitly that is the target is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from imprint.attacks.base import Attack, RunContext, prepared_field, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, Access, Backend, TokenStats
from imprint.backends.models import alias_installed
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.embed import Embedder
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls

log = logging.getLogger(__name__)

AUTO = "auto"
#: the offline models ``surrogate="auto"`` picks from, in this order
AUTO_SURROGATES: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")


def _available(spec: str) -> bool:
    return alias_installed(spec) or Path(spec).expanduser().is_dir()


def choose_surrogate(target_spec: str) -> tuple[str, str]:
    """(surrogate spec, why) for ``surrogate="auto"``: the first of :data:`AUTO_SURROGATES`
    that is installed and is not ``target_spec``; ConfigError when there is none."""
    skipped = []
    for spec in AUTO_SURROGATES:
        if spec == target_spec:
            skipped.append(f"{spec!r} is the target")
        elif not _available(spec):
            skipped.append(f"{spec!r} is not installed")
        else:
            why = "; ".join(skipped) or "the first offline model that is not the target"
            return spec, f"chosen automatically ({why})"
    raise ConfigError(
        f"petal needs a surrogate model other than the target ({target_spec!r}), and no "
        f"offline model fits ({'; '.join(skipped)}); pass one with "
        "--param petal.surrogate=SPEC (an alias, a model folder or gguf:PATH)"
    )


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
    surrogate: str = AUTO  # a model spec, or "auto" (see the module docstring)
    # how the surrogate was chosen, recorded in the manifest
    surrogate_choice: str | None = prepared_field(record=True)

    summary = "greedy-token similarity calibrated to log-probability by a surrogate model"
    paper = (
        "He et al. 2024, Towards Label-Only Membership Inference Attack against Pre-trained "
        "Large Language Models (PETAL)"
    )
    access = Access.BLACK_BOX

    def __post_init__(self) -> None:
        if not self.surrogate:
            raise ConfigError("petal needs a surrogate model spec (surrogate=...)")

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> Attack:
        """Resolve ``surrogate="auto"`` against the run's target, before any model loads."""
        attack = cls(**params)
        if attack.surrogate != AUTO:
            return replace(attack, surrogate_choice="given (petal.surrogate)")
        return attack.resolved(run.target_spec) if run.target_spec else attack

    def resolved(self, target_spec: str) -> PETAL:
        """This attack with ``surrogate="auto"`` replaced by the model it picks for the target."""
        if self.surrogate != AUTO:
            return self
        spec, why = choose_surrogate(target_spec)
        return replace(self, surrogate=spec, surrogate_choice=why)

    def check_backend(self, backend: Backend) -> None:
        """Refuse a target that is the surrogate itself, or that cannot give greedy tokens."""
        target_spec = (backend.local_model() or backend).spec
        if self.surrogate == AUTO:
            self.resolved(str(target_spec or ""))  # raises when no offline model fits
        elif target_spec == self.surrogate:
            raise ConfigError(
                f"petal: the surrogate ({self.surrogate!r}) is the target itself; PETAL calibrates "
                "on a different model — pass --param petal.surrogate=<another model spec>, or "
                "leave it 'auto' to take an installed offline model that is not the target"
            )
        if backend.local_model() is None:
            if not backend.supports(SAMPLING):
                raise CapabilityError(f"petal needs greedy next tokens; {backend!r} cannot sample")
            backend.text_backend()

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

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """The surrogate's pass per text, and the target's when it is local; the embeddings of
        the predicted tokens, and an API target's greedy tokens (one per surrogate token,
        estimated at 1.3 tokens a word), are known only once the models answer."""
        out = [("surrogate", LogprobRequest(t)) for t in texts]
        kinds = ["embed (of the tokens the models predict)"]
        estimated = {}
        if target_local:  # the target's greedy tokens come from its own pass
            out += [("target", LogprobRequest(t)) for t in texts]
        else:
            kinds.append("greedy (one per surrogate token of each text)")
            estimated["target"] = sum(max(round(1.3 * len(t.split())) - 1, 0) for t in texts)
        return AttackCalls.of(out, uncounted=tuple(kinds), estimated=estimated)

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Column ``petal``, shape (len(texts),), higher = member."""
        attack = self.resolved(requests.backend("target").spec)
        if (attack.surrogate_choice or "").startswith("chosen automatically"):
            log.warning(
                "petal: surrogate %r %s; set --param petal.surrogate=SPEC to choose another",
                attack.surrogate,
                attack.surrogate_choice,
            )
        surrogate = requests.load("surrogate", attack.surrogate)
        if requests.fingerprint("surrogate") == requests.fingerprint("target"):
            raise ConfigError(
                f"petal: the surrogate ({attack.surrogate!r}) has the target's weights; PETAL "
                "calibrates on a different model — pass --param petal.surrogate=<another model>"
            )
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
