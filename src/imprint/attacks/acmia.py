"""ACMIA (Zade et al. 2025): membership from temperature-calibrated token probabilities.

Scaling the target's logits by 1/tau builds an internal reference model from the target itself.
Maximum-likelihood training leaves members' tokens near the top of a peaked distribution, so they
react to the temperature differently from non-members' tokens. With beta = 1/tau, per token
l_t = log p(x_t) (tau = 1) and l_t(beta) = log p_tau(x_t), mu_t(beta) = E_{p_tau}[log p_tau] and
sigma_t(beta) = Std_{p_tau}[log p_tau], averaged over the *first occurrence of each distinct token*
of the text (as the authors' code does), three scores per temperature (higher = member):

- ``acmia@tau`` (AC): mean(l_t(beta) - l_t) for tau < 1 (sharpening), mean(l_t - l_t(beta)) for
  tau > 1 (flattening); both grow as the text's tokens sit nearer the top;
- ``acmia_deriv@tau`` (DerivAC): mean of d l_t(beta) / d beta = (l_t(beta) - mu_t(beta)) / beta,
  exactly. The authors' code takes a finite difference between neighbouring temperatures of its
  grid, which approximates this derivative times the grid step (the same for every text);
- ``acmia_norm@tau`` (NormAC): mean of (l_t(beta) - mu_t(beta)) / sigma_t(beta), Min-K%++'s
  standardisation at temperature tau (over all first occurrences, not a lowest k%).

The temperature is a tuned hyperparameter in the paper: its code sweeps beta = 2^(i/10), i = -25
.. 25, and reports the best by AUC on the labelled benchmark, so there is no single default.
Here ``temperatures`` defaults to (0.5, 2.0) (beta = 2 and 1/2, points of that grid), every
temperature gets its own columns, and the report shows them all; picking the best column after
seeing the labels overstates what an attacker without labels gets.

Each temperature costs one extra forward pass of the target (see backends/tempered.py), planned,
batched and cached like any log-prob pass; the tau = 1 pass is the one loss and Min-K% use. A
text with no scored token has no score: NaN, with a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from imprint.attacks.base import register
from imprint.attacks.ez_mia import warn_undefined
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import Backend, TokenStats
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls

_MIN_SIGMA = 1e-10  # the authors' floor


def first_occurrences(token_ids: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct token id, in text order."""
    _, first = np.unique(np.asarray(token_ids), return_index=True)
    return np.sort(first)


def acmia_scores(plain: TokenStats, tempered: TokenStats, temperature: float) -> dict[str, float]:
    """AC, DerivAC and NormAC of one text at ``temperature`` (keys ``ac``, ``deriv``, ``norm``).

    ``plain`` holds the tau = 1 statistics, ``tempered`` those at tau (same tokens). NaN for a
    text with no scored token.
    """
    if len(plain) == 0:
        return {"ac": float("nan"), "deriv": float("nan"), "norm": float("nan")}
    keep = first_occurrences(plain.token_ids)
    beta = 1.0 / temperature
    base = plain.logp.astype(np.float64)[keep]
    hot = tempered.logp.astype(np.float64)[keep]
    mu = tempered.mean_logp.astype(np.float64)[keep]
    sigma = np.sqrt(np.maximum(tempered.var_logp.astype(np.float64)[keep], 0.0)) + _MIN_SIGMA
    shift = hot - base if temperature < 1 else base - hot
    return {
        "ac": float(np.mean(shift)),
        "deriv": float(np.mean((hot - mu) / beta)),
        "norm": float(np.mean((hot - mu) / sigma)),
    }


@register("acmia")
@dataclass(frozen=True)
class Acmia(ModelCallAttack):
    temperatures: tuple[float, ...] = (0.5, 2.0)

    summary = (
        "temperature-calibrated token log-probs (AC, DerivAC, NormAC) at each temperature "
        "(default 0.5 and 2; one extra target pass per temperature; local model)"
    )
    paper = (
        "Zade et al. 2025, Automatic Calibration for Membership Inference Attack on Large "
        "Language Models (ACMIA), arXiv 2505.03392"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        bad = [t for t in self.temperatures if not (t > 0 and t != 1.0 and np.isfinite(t))]
        if not self.temperatures or bad:
            raise ConfigError(
                f"acmia temperatures must be finite, > 0 and not 1 (tau = 1 is the plain model), "
                f"got {self.temperatures}; e.g. --param acmia.temperatures=0.5,2"
            )
        if len(set(self.temperatures)) != len(self.temperatures):
            raise ConfigError(f"acmia temperatures repeat: {self.temperatures}")

    def columns(self) -> tuple[str, ...]:
        return tuple(
            f"{name}@{t:g}"
            for t in self.temperatures
            for name in ("acmia", "acmia_deriv", "acmia_norm")
        )

    def check_backend(self, backend: Backend) -> None:
        if backend.local_model() is None:
            raise CapabilityError(
                "acmia rescales the target's logits, so it needs a local model (the Hugging "
                f"Face backend); {type(backend).__name__} does not expose them"
            )

    def roles(self) -> dict[str, float]:
        """The tempered target's role per temperature (a role of the attack's own)."""
        return {f"target@t={t:g}": t for t in self.temperatures}

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """The plain pass and one pass per temperature, each temperature a role of its own."""
        roles = self.roles()
        out = [(role, LogprobRequest(t)) for role in ("target", *roles) for t in texts]
        found = {role: partial(_tempered_target, t=t) for role, t in roles.items()}
        return AttackCalls.of(out, roles=found)

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Three columns per temperature, each shape (len(texts),), higher = member."""
        from imprint.backends.hf import HFLogprobBackend
        from imprint.backends.tempered import TemperedBackend

        local = requests.local("target")
        if not isinstance(local, HFLogprobBackend):
            raise CapabilityError(
                "acmia rescales the target's logits, so it needs a local model (the Hugging "
                f"Face backend); the target in this run is {type(requests.backend('target'))}"
            )
        plain = requests.token_stats("target", texts)
        out: dict[str, np.ndarray] = {}
        for role, t in self.roles().items():
            # a role of this client only (the run's are kept); Ray workers temper their own
            # replica of the target
            requests.add_role(role, TemperedBackend(local, t),
                              derive=partial(_replica_factory, t=t))  # fmt: skip
            tempered = requests.token_stats(role, texts)
            rows = [acmia_scores(p, h, t) for p, h in zip(plain, tempered, strict=True)]
            for key, name in (("ac", "acmia"), ("deriv", "acmia_deriv"), ("norm", "acmia_norm")):
                out[f"{name}@{t:g}"] = np.array([r[key] for r in rows], dtype=np.float64)
        n_nan = int(np.isnan(next(iter(out.values()))).sum())
        warn_undefined(self.name, "acmia", n_nan, len(texts), "no scored token")
        return out


def _replica_factory(base: Any, t: float) -> Any:
    """How a Ray worker builds the tempered view of its own replica (``base``) of the target."""
    from imprint.backends.tempered import tempered_replica
    from imprint.executors import CallFactory

    return CallFactory(tempered_replica, (base, t))


def _tempered_target(backends: dict[str, Any], t: float) -> Any:
    """The tempered view of the run's loaded local target (the plan's stored-answer check),
    else None."""
    from imprint.backends.tempered import TemperedBackend

    target = backends.get("target")
    local = target.local_model() if target is not None else None
    return TemperedBackend(local, t) if local is not None else None
