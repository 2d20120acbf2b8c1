"""RMIA, the relative membership inference attack (Zarifzadeh et al. 2024, "Low-Cost High-Power
Membership Inference Attacks", ICML; Section 3), for language models with reference models of
known training data.

Pr(x|theta) is the target's likelihood of x. For an LM we take exp(mean token log-likelihood)
(the geometric mean of the per-token probabilities, in (0, 1]), not the sequence likelihood:
the offline formula below adds a constant (1 - a) / 2 to a probability, which only makes sense
for values on a probability-like scale (a sequence likelihood of e^-300 would vanish next to it).
Any other per-example signal can be chosen (``signal``); it is exponentiated the same way.

- Pr(x) = mean over the reference models of Pr(x|theta_r): all of them (online, where about half
  trained on x), or offline the OUT ones only, scaled as the paper's offline approximation
  (Section 3): Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2. a = 1 uses Pr_OUT as it is.
- ``a="auto"`` (the default, as the authors' Privacy Meter does when no a is set): a is tuned on
  the reference models. One reference model plays the target and the others the references; a
  runs over the grid 0.0, 0.1, ..., 1.0, and the a whose offline RMIA has the highest AUC on
  that model's known IN/OUT candidates is used (the smallest on ties). The chosen a, the model
  and the AUC at each grid value are recorded in the manifest (``a_tuning``). A number fixes a.
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
from typing import Any, Literal

import numpy as np

from imprint.attacks.base import Preparation, RunContext, prepared_field, register
from imprint.attacks.reference_models import ReferenceModelAttack
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import SignalSet
from imprint.training_manifest import IN, OUT, UNKNOWN

__all__ = ["A_GRID", "RMIA", "log_marginal", "pairwise_fraction", "rmia_scores", "tune_offline_a"]

POPULATIONS = ("auto", "references", "candidates")
#: the values of the offline a that tuning tries (Privacy Meter's grid: 0.0 to 1.0 by 0.1)
A_GRID = tuple(round(0.1 * i, 1) for i in range(11))


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


def tune_offline_a(
    pseudo_x: np.ndarray,
    ref_x: np.ndarray,
    member_x: np.ndarray,
    pseudo_z: np.ndarray,
    ref_z: np.ndarray,
    member_z: np.ndarray,
    labels: np.ndarray,
    *,
    gamma: float = 1.0,
    grid: Sequence[float] = A_GRID,
) -> tuple[float, list[float]]:
    """The offline a under which offline RMIA best attacks a reference model playing the target.

    ``pseudo_x`` (n,) and ``pseudo_z`` (m,) are that model's signals on the candidates and the
    population texts, ``labels`` (n,) its membership of the candidates (1 IN, 0 OUT, -1 unknown:
    left out); ``ref_*``/``member_*`` are the other reference models', as for
    :func:`rmia_scores`. Returns the grid value with the highest AUC (the first, i.e. smallest,
    on ties) and the AUC at every grid value (NaN where undefined). Raises :class:`ConfigError`
    when no grid value gives an AUC (no scored IN or no scored OUT candidate)."""
    from imprint.metrics import roc_auc_score as auc  # here: the CLI imports every attack module

    labels = np.asarray(labels)
    aucs = []
    for a in grid:
        s = rmia_scores(
            pseudo_x, ref_x, member_x, pseudo_z, ref_z, member_z, offline=True, a=a, gamma=gamma
        )
        keep = np.isfinite(s) & (labels != UNKNOWN)
        y = labels[keep] == IN
        aucs.append(auc(y, s[keep]) if 0 < y.sum() < y.size else float("nan"))
    if not np.isfinite(aucs).any():
        raise ConfigError(
            "rmia: cannot tune a: the model playing the target has no IN or no OUT candidate "
            "that the other reference models score (a candidate needs one OUT for it); set it "
            "with --param rmia.a=VALUE (in [0, 1])"
        )
    return float(grid[int(np.nanargmax(aucs))]), [float(v) for v in aucs]


@register("rmia")
@dataclass(frozen=True)
class RMIA(ReferenceModelAttack):
    a: float | Literal["auto"] = "auto"  # offline a; auto: tuned on the reference models
    gamma: float = 1.0
    population: str = "auto"
    # the population texts' signals under the target (m,) and each reference model (K, m),
    # requested in prepare() through the run's request layer; None: compare with the candidates
    z_signals: tuple[tuple[float, ...], ...] | None = prepared_field()
    # a="auto": the tuned a, the reference model that played the target, the grid and its AUCs
    a_tuning: dict[str, Any] | None = prepared_field(record=True)

    summary = (
        "pairwise likelihood ratios Pr(x|target)/Pr(x) vs population texts, Pr(x) from "
        "reference models (online; offline: OUT only, scaled by a); needs --references"
    )
    paper = "Zarifzadeh et al. 2024, Low-Cost High-Power Membership Inference Attacks"
    deviations = (
        "a=auto tunes a with one of the run's K reference models as the target and the other "
        "K-1 as its references; Privacy Meter attacks the target's paired model, which is "
        "not among the K references, with all K of them (imprint's target is no reference "
        "model, so there is no such spare model).",
        "While tuning, the model playing the target is scored exactly as the target is (its "
        "own population-text signals, the OUT reference models only); Privacy Meter's tuning "
        "uses the real target's population signals and, with its one-reference setting, "
        "also the IN reference models' signals mapped back through the offline formula.",
        "Offline (the rmia_offline column), a population text's Pr(z) averages all K "
        "reference models (all are OUT for it: the paper's mean over reference models), where "
        "Privacy Meter's run_rmia keeps the K/2 largest of them (its rule for a candidate, "
        "OUT for half the models), which raises Pr(z); per-sample scores differ by up to 0.05 "
        "on benchmarks/bench_authors_b.py's simulation and are identical under its rule.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.a != "auto" and not (isinstance(self.a, float | int) and 0.0 <= self.a <= 1.0):
            raise ConfigError(f"rmia.a must be auto or a number in [0, 1], got {self.a!r}")
        if not self.gamma > 0:
            raise ConfigError(f"rmia.gamma must be > 0, got {self.gamma}")
        if self.population not in POPULATIONS:
            raise ConfigError(
                f"rmia.population must be one of {POPULATIONS}, got {self.population!r}"
            )
        if self.a == "auto" and "offline" in self.modes and len(self.models) < 2:
            raise ConfigError(  # checked here: before any model loads
                "rmia: a=auto tunes the offline a by attacking one reference model with the "
                f"others, which needs at least 2 reference models (here {len(self.models)}); "
                "set --param rmia.a=VALUE (in [0, 1]) or --param rmia.modes=online"
            )

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        attack = self._with_membership(samples, run)
        texts = run.references.population if run.references is not None else ()
        if self.population == "references" and not texts:
            raise ConfigError(
                "rmia.population=references, but the training manifest names no population "
                "texts; add 'population' to it or use --param rmia.population=candidates"
            )
        if self.population != "candidates" and texts:
            attack = replace(attack, z_signals=self._population(texts, run))
        if self.a == "auto" and "offline" in self.modes:
            attack = replace(attack, a_tuning=attack._tune([s.text for s in samples], run))
        return Preparation(attack=attack)

    @property
    def offline_a(self) -> float:
        """The a of the offline formula: the fixed one, or the tuned one once prepared."""
        if self.a != "auto":
            return float(self.a)
        if self.a_tuning is None:
            raise ConfigError("rmia: a=auto, but the attack was not prepared (a not tuned)")
        return float(self.a_tuning["a"])

    def _tune(self, texts: list[str], run: RunContext) -> dict[str, Any]:
        """Tune a (see the module docstring): the first reference model with both IN and OUT
        candidates plays the target, the others are its references; signals come through the
        run's request layer (the same cached passes the scoring uses)."""
        member = self.member_matrix(texts)
        both = [i for i, row in enumerate(member) if (row == IN).any() and (row == OUT).any()]
        if not both:
            raise ConfigError(
                "rmia: a=auto tunes the offline a by attacking one reference model with the "
                "others, which needs a reference model that is IN for some candidates and OUT "
                "for others (none is here); set --param rmia.a=VALUE (in [0, 1]) or --param "
                "rmia.modes=online"
            )
        if run.requests is None:
            raise ConfigError("rmia: tuning a (a=auto) needs the run's request client")
        x = np.stack([self.signal_array(run.requests.token_stats(m, texts)) for m in self.models])
        p = both[0]
        others = [i for i in range(len(self.models)) if i != p]
        if self.z_signals is None:  # the candidates are the population, as in score()
            z_p, z_r, z_m = x[p], x[others], member[others]
        else:
            z = np.array(self.z_signals, dtype=np.float64)[1:]  # row 0 is the target's
            z_p, z_r = z[p], z[others]
            z_m = np.full(z_r.shape, OUT, dtype=np.int8)
        a, aucs = tune_offline_a(
            x[p], x[others], member[others], z_p, z_r, z_m, member[p], gamma=self.gamma
        )
        return {
            "a": a,
            "target": self.models[p],
            "grid": list(A_GRID),
            "auc": [round(v, 6) if np.isfinite(v) else None for v in aucs],
        }

    def _population(self, texts: Sequence[str], run: RunContext) -> tuple[tuple[float, ...], ...]:
        """The population texts' signals, target first, through the request layer (cached)."""
        if run.requests is None:
            raise ConfigError("rmia: population texts need the run's request client")
        rows = []
        for role in ("target", *self.models):
            stats = run.requests.token_stats(role, list(texts))
            rows.append(tuple(float(v) for v in self.signal_array(stats)))
        return tuple(rows)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
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
                a=self.offline_a if mode == "offline" else 0.0,
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
