"""LiRA, the likelihood-ratio attack (Carlini et al. 2022, "Membership Inference Attacks From First
Principles"), for language models with reference models of known training data.

Per example x, a per-example signal s (default: the mean token log-likelihood) under the target,
s_t(x), and under every reference model, each IN (trained on x) or OUT. Carlini et al. apply a
logit to a classifier's confidence to make it Gaussian; an LM's mean token log-likelihood is an
average of many log-probabilities, already close to Gaussian, so it is used as it is.

- online: Gaussians N(mu_in(x), sd_in^2) and N(mu_out(x), sd_out^2) fitted to the IN and OUT
  reference signals of x; score = log N(s_t; mu_in, sd_in) - log N(s_t; mu_out, sd_out).
- offline: OUT only, one-sided: the paper's Lambda = P(S_out <= s_t) = Phi(z) with
  z = (s_t - mu_out(x)) / sd_out. The column holds z itself, which orders the samples exactly as
  Phi(z) does but does not saturate at 1.0 in floating point (Phi(9) == 1.0 already).

Variance: ``per_example`` (sd of the IN and of the OUT values of x) or ``global``, one sd for
all, which the paper recommends with few reference models (under ~64). The global sd is pooled
from a fixed-effects fit s_r(x) = a(x) + b * IN_r(x) + noise over every (model, example) pair, so
it measures the spread of one example's signal across models, not the spread between examples;
the same fit gives the IN-OUT shift b, which stands in for mu_in(x) (mu_out(x) + b) when no
reference model trained on x (and for mu_out likewise), e.g. with an odd K. ``auto`` is
per-example when every example has >= 32 IN and >= 32 OUT values, else global. Means are plain
means (the Gaussian fit), not the medians of the authors' code. Higher = member.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import Preparation, RunContext, register
from imprint.attacks.reference_models import ReferenceModelAttack
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import SignalSet
from imprint.training_manifest import IN, OUT

__all__ = ["GaussianFit", "LiRA", "fit_gaussians", "lira_offline", "lira_online"]

VARIANCES = ("auto", "global", "per_example")
#: values per class per example from which ``auto`` takes per-example variances
PER_EXAMPLE_MIN = 32
#: floor on every sd: identical reference signals must not divide by zero
MIN_SD = 1e-6


@dataclass(frozen=True)
class GaussianFit:
    """Per-example IN/OUT Gaussians, arrays of shape (n,)."""

    mu_in: np.ndarray
    mu_out: np.ndarray
    sd_in: np.ndarray
    sd_out: np.ndarray
    shift: float  # the pooled IN - OUT shift b
    sd_global: float


def _pooled(ref: np.ndarray, is_in: np.ndarray, valid: np.ndarray) -> tuple[float, float]:
    """(shift b, pooled residual sd) of the fixed-effects fit over the valid entries."""
    w = valid.astype(np.float64)
    count = w.sum(axis=0)
    has = count > 0
    safe = np.where(has, count, 1.0)
    s = np.where(valid, ref, 0.0)
    ind = np.where(valid, is_in, 0.0).astype(np.float64)
    s_c = (s - s.sum(axis=0) / safe) * w
    i_c = (ind - ind.sum(axis=0) / safe) * w
    denom = float((i_c**2).sum())
    if denom > 0:
        shift = float((i_c * s_c).sum() / denom)
        dof = w.sum() - has.sum() - 1
    else:  # no example is IN for some models and OUT for others: unpaired difference
        ins, outs = ref[valid & is_in], ref[valid & ~is_in]
        shift = float(ins.mean() - outs.mean()) if ins.size and outs.size else float("nan")
        dof = w.sum() - has.sum()
    resid = (s_c - (shift if denom > 0 else 0.0) * i_c) * w
    sd = float(np.sqrt((resid**2).sum() / dof)) if dof > 0 else float("nan")
    return shift, sd


def _class_stats(ref: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example: (mean, sd with ddof 1, count) of the entries in ``mask``; NaN where empty."""
    count = mask.sum(axis=0)
    vals = np.where(mask, ref, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, vals.sum(axis=0) / np.maximum(count, 1), np.nan)
        sq = np.where(mask, (ref - mean) ** 2, 0.0).sum(axis=0)
        sd = np.where(count > 1, np.sqrt(sq / np.maximum(count - 1, 1)), np.nan)
    return mean, sd, count


def fit_gaussians(ref: np.ndarray, member: np.ndarray, *, variance: str = "auto") -> GaussianFit:
    """IN/OUT Gaussians per example from reference signals ``ref`` (K, n) and ``member`` (K, n):
    1 IN, 0 OUT, -1 unknown (left out, as are non-finite signals)."""
    if variance not in VARIANCES:
        raise ConfigError(f"lira.variance must be one of {VARIANCES}, got {variance!r}")
    ref = np.asarray(ref, dtype=np.float64)
    member = np.asarray(member)
    valid = np.isfinite(ref) & ((member == IN) | (member == OUT))
    is_in = member == IN
    mu_in, sd_in_x, n_in = _class_stats(ref, valid & is_in)
    mu_out, sd_out_x, n_out = _class_stats(ref, valid & ~is_in)
    shift, sd_global = _pooled(ref, is_in, valid)
    mu_in = np.where(n_in > 0, mu_in, mu_out + shift)
    mu_out = np.where(n_out > 0, mu_out, mu_in - shift)
    if variance == "auto":
        enough = n_in.size > 0 and min(n_in.min(), n_out.min()) >= PER_EXAMPLE_MIN
        variance = "per_example" if enough else "global"
    if variance == "global":
        if not np.isfinite(sd_global):
            raise ConfigError(
                "lira: a global variance needs at least two reference signals of one example "
                "(or one IN and one OUT); add reference models (K >= 2)"
            )
        sd_in = sd_out = np.full(ref.shape[1], sd_global)
    else:  # per example, the global sd where an example has fewer than 2 values of a class
        sd_in = np.where(np.isfinite(sd_in_x), sd_in_x, sd_global)
        sd_out = np.where(np.isfinite(sd_out_x), sd_out_x, sd_global)
    floor = lambda sd: np.maximum(sd, MIN_SD)  # noqa: E731
    return GaussianFit(mu_in, mu_out, floor(sd_in), floor(sd_out), shift, sd_global)


def lira_online(target: np.ndarray, fit: GaussianFit) -> np.ndarray:
    """log N(s; mu_in, sd_in) - log N(s; mu_out, sd_out), shape (n,). Higher = member."""
    from scipy.stats import norm  # here: importing scipy.stats costs every CLI call ~0.3 s

    s = np.asarray(target, dtype=np.float64)
    return norm.logpdf(s, fit.mu_in, fit.sd_in) - norm.logpdf(s, fit.mu_out, fit.sd_out)


def lira_offline(target: np.ndarray, fit: GaussianFit) -> np.ndarray:
    """z = (s - mu_out) / sd_out, in the order of the paper's Phi(z) = P(S_out <= s)."""
    return (np.asarray(target, dtype=np.float64) - fit.mu_out) / fit.sd_out


@register("lira")
@dataclass(frozen=True)
class LiRA(ReferenceModelAttack):
    variance: str = "auto"
    online_needs_out: ClassVar[bool] = True  # mu_out(x), or mu_in(x) - shift: both need OUT

    summary = (
        "likelihood ratio of the target's signal under IN/OUT reference Gaussians (online) or "
        "OUT only (offline); needs --references"
    )
    paper = "Carlini et al. 2022, Membership Inference Attacks From First Principles"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variance not in VARIANCES:
            raise ConfigError(f"lira.variance must be one of {VARIANCES}, got {self.variance!r}")

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        prepared = super().prepare(samples, run)
        if len(self.models) < 2:  # fail now, not in score() after every model has run
            raise ConfigError(
                f"lira needs at least 2 reference models for a variance, got {len(self.models)} "
                f"({list(self.models)}); build more (imprint game build --reference-models K, "
                "K >= 2) or add models to the training manifest; rmia works with one"
            )
        return prepared

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        target, refs, member = self.values(signals)
        fit = fit_gaussians(refs, member, variance=self.variance)
        out = {}
        if "online" in self.modes:
            out[self.name] = lira_online(target, fit)
        if "offline" in self.modes:
            out[f"{self.name}_offline"] = lira_offline(target, fit)
        return out
