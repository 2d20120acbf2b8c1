"""RMIA, the relative membership inference attack (Zarifzadeh et al. 2024, "Low-Cost High-Power
Membership Inference Attacks"), for language models with reference models of known training data.

Pr(x|theta) is the target's likelihood of x. For an LM we take exp(mean token log-likelihood)
(the geometric mean of the per-token probabilities, in (0, 1]), not the sequence likelihood:
the offline formula below adds a constant (1 - a) / 2 to a probability, which only makes sense
for values on a probability-like scale (a sequence likelihood of e^-300 would vanish next to it).
Any other per-example signal can be chosen (``signal``); it is exponentiated the same way.

- Pr(x) = mean over the reference models of Pr(x|theta_r): all of them (online, where about half
  trained on x), or offline the OUT ones only, scaled as the paper's offline approximation:
  Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2 (``a``; 0.3 is the offline default of the authors'
  Privacy Meter code; a = 1 uses Pr_OUT as it is).
- Likelihood ratio LR(x) = Pr(x|theta) / Pr(x); score(x) = the fraction of population texts z
  with LR(x) / LR(z) > gamma (``gamma``, default 1). Pr(z) is computed like Pr(x).

Population texts z (``population``): ``references`` takes the texts the training manifest names
as population (a game's held-out texts: trained by no model, target included); ``candidates``
compares with the run's own samples (no labels used); ``auto`` takes the former when the manifest
has any. With one fixed set of z the score is a non-decreasing function of LR(x), so its ranking
is LR's up to ties; the pairwise form is the paper's. Higher = member. Offline, a sample that no
reference model is OUT for scores NaN (left out of the metrics and counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from imprint.attacks.base import Preparation, RunContext, prepared_field, register
from imprint.attacks.reference_models import ReferenceModelAttack
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import SignalSet
from imprint.training_manifest import OUT

__all__ = ["RMIA", "log_marginal", "pairwise_fraction", "rmia_scores"]

POPULATIONS = ("auto", "references", "candidates")


def log_marginal(ref: np.ndarray, member: np.ndarray, *, offline: bool, a: float) -> np.ndarray:
    """log Pr(x) per example from reference log-likelihoods ``ref`` (K, n); ``member`` (K, n) is
    1 IN / 0 OUT / -1 unknown. Online: log of the mean of exp(ref) over all finite entries;
    offline: over the OUT entries, then log(((1 + a) Pr_OUT + (1 - a)) / 2). NaN where none."""
    from scipy.special import logsumexp  # here: the CLI imports every attack module

    ref = np.asarray(ref, dtype=np.float64)
    use = np.isfinite(ref) & ((np.asarray(member) == OUT) if offline else True)
    count = use.sum(axis=0)
    vals = np.where(use, ref, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mean = logsumexp(vals, axis=0) - np.log(np.maximum(count, 1))
        if offline:
            # log(((1+a) p + (1-a)) / 2) computed from log p, exact for every p in [0, 1]
            log_mean = np.logaddexp(np.log1p(a) + log_mean, np.log1p(-a)) - np.log(2.0)
    return np.where(count > 0, log_mean, np.nan)


def pairwise_fraction(log_lr_x: np.ndarray, log_lr_z: np.ndarray, gamma: float) -> np.ndarray:
    """Fraction of z with LR(x) / LR(z) > gamma, i.e. log LR(z) < log LR(x) - log gamma, per x;
    NaN entries of z are left out, a NaN x scores NaN. Shape (n,)."""
    z = np.sort(np.asarray(log_lr_z, dtype=np.float64)[np.isfinite(log_lr_z)])
    x = np.asarray(log_lr_x, dtype=np.float64)
    if z.size == 0:
        raise ConfigError("rmia: no population text z has a finite likelihood ratio")
    below = np.searchsorted(z, x - np.log(gamma), side="left") / z.size
    return np.where(np.isfinite(x), below, np.nan)


def rmia_scores(
    target_x: np.ndarray,
    ref_x: np.ndarray,
    member_x: np.ndarray,
    target_z: np.ndarray,
    ref_z: np.ndarray,
    member_z: np.ndarray,
    *,
    offline: bool,
    a: float = 0.3,
    gamma: float = 1.0,
) -> np.ndarray:
    """RMIA scores of the candidates x against population texts z (log-likelihood signals)."""
    lr_x = np.asarray(target_x, dtype=np.float64) - log_marginal(
        ref_x, member_x, offline=offline, a=a
    )
    lr_z = np.asarray(target_z, dtype=np.float64) - log_marginal(
        ref_z, member_z, offline=offline, a=a
    )
    return pairwise_fraction(lr_x, lr_z, gamma)


@register("rmia")
@dataclass(frozen=True)
class RMIA(ReferenceModelAttack):
    a: float = 0.3
    gamma: float = 1.0
    population: str = "auto"
    # the population texts' signals under the target (m,) and each reference model (K, m),
    # requested in prepare() through the run's request layer; None: compare with the candidates
    z_signals: tuple[tuple[float, ...], ...] | None = prepared_field()

    summary = (
        "pairwise likelihood ratios Pr(x|target)/Pr(x) vs population texts, Pr(x) from "
        "reference models (online; offline: OUT only, scaled by a); needs --references"
    )
    paper = "Zarifzadeh et al. 2024, Low-Cost High-Power Membership Inference Attacks"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.a <= 1.0:
            raise ConfigError(f"rmia.a must be in [0, 1], got {self.a}")
        if not self.gamma > 0:
            raise ConfigError(f"rmia.gamma must be > 0, got {self.gamma}")
        if self.population not in POPULATIONS:
            raise ConfigError(
                f"rmia.population must be one of {POPULATIONS}, got {self.population!r}"
            )

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        attack = self._with_membership(samples, run)
        texts = run.references.population if run.references is not None else ()
        if self.population == "references" and not texts:
            raise ConfigError(
                "rmia.population=references, but the training manifest names no population "
                "texts; add 'population' to it or use --param rmia.population=candidates"
            )
        if self.population == "candidates" or not texts:
            return Preparation(attack=attack)
        return Preparation(attack=replace(attack, z_signals=self._population(texts, run)))

    def _population(self, texts: Sequence[str], run: RunContext) -> tuple[tuple[float, ...], ...]:
        """The population texts' signals, target first, through the request layer (cached)."""
        if run.requests is None:
            raise ConfigError("rmia: population texts need the run's request client")
        rows = []
        for role in ("target", *self.models):
            stats = run.requests.token_stats(role, list(texts))
            rows.append(tuple(float(v) for v in self.signal_array(stats)))
        return tuple(rows)

    def score(self, signals: SignalSet) -> dict[str, np.ndarray]:
        target, refs, member = self.values(signals)
        z_target, z_refs, z_member = self._z(target, refs, member)
        out: dict[str, Any] = {}
        for mode in self.modes:
            column = self.name if mode == "online" else f"{self.name}_offline"
            out[column] = rmia_scores(
                target,
                refs,
                member,
                z_target,
                z_refs,
                z_member,
                offline=mode == "offline",
                a=self.a,
                gamma=self.gamma,
            )
        return out

    def _z(
        self, target: np.ndarray, refs: np.ndarray, member: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.z_signals is None:  # the candidates themselves
            return target, refs, member
        z = np.array(self.z_signals, dtype=np.float64)
        # population texts were trained by no reference model: OUT everywhere
        return z[0], z[1:], np.full(z[1:].shape, OUT, dtype=np.int8)
