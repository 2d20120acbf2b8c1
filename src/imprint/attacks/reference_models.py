"""Shared by the attacks that calibrate against reference models with known training data (LiRA,
RMIA): the per-example signal each model gives a text, and the IN/OUT membership of every
candidate in every reference model (from ``RunContext.references``, see
:mod:`imprint.training_manifest`). Not an attack itself: nothing here registers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import (
    Attack,
    Preparation,
    RunContext,
    check_fraction,
    lowest_fraction_mean,
    prepared_field,
)
from imprint.attacks.min_k_pp import standardised_logp
from imprint.backends.base import TokenStats
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import IN, OUT, UNKNOWN

__all__ = ["SIGNALS", "ReferenceModelAttack", "membership_by_text", "signal_value"]

#: Per-example signals (higher = the model finds the text more likely), all from the one cached
#: log-prob pass per (model, text): mean / sum of token log-probs, Min-K% and Min-K%++ means.
SIGNALS = ("mean_logp", "sum_logp", "min_k", "min_k_pp")


def signal_value(stats: TokenStats, signal: str, k: float) -> float:
    """One text's signal under one model; NaN for a text with no scored token."""
    logp = np.asarray(stats.logp, dtype=np.float64)
    if logp.size == 0:
        return float("nan")
    if signal == "mean_logp":
        return float(logp.mean())
    if signal == "sum_logp":
        return float(logp.sum())
    if signal == "min_k":
        return lowest_fraction_mean(logp, k)
    return lowest_fraction_mean(standardised_logp(stats), k)


def membership_by_text(samples: Sequence[Sample], matrix: np.ndarray) -> dict[str, tuple[int, ...]]:
    """Text -> membership per model (columns of ``matrix``, shape (K, n)); a text held by several
    samples is IN for a model that trained on any of them, else OUT if any says OUT."""
    out: dict[str, tuple[int, ...]] = {}
    for j, s in enumerate(samples):
        column = tuple(int(v) for v in matrix[:, j])
        old = out.get(s.text)
        if old is not None:
            column = tuple(
                IN if IN in (a, b) else OUT if OUT in (a, b) else UNKNOWN
                for a, b in zip(old, column, strict=True)
            )
        out[s.text] = column
    return out


def _no_out_reason(matrix: np.ndarray) -> tuple[str, str]:
    """(why no sample is OUT for any model, how to fix it) for a membership ``matrix`` (K, n)
    without OUT entries: every model trained on everything, or the rest is of unknown
    membership because the manifest lists 'nonmembers'."""
    n = matrix.shape[1]
    if not (matrix == UNKNOWN).any():
        return (
            f"every reference model trained on every one of the {n} samples (by id)",
            "Use reference models that each left some samples out (a game's "
            "--reference-models K trains each on half)",
        )
    unknown = int((~(matrix == IN).any(axis=0)).sum())  # no OUT anywhere: unknown everywhere
    return (
        f"no sample is known to be OUT for any reference model ({n - unknown} IN for some "
        f"model, {unknown} unknown for every model: a model entry that lists 'nonmembers' "
        "counts only those ids as OUT, every id in neither list as unknown)",
        "List the non-members under 'nonmembers', or drop 'nonmembers' so that every sample "
        "outside 'members' counts as OUT",
    )


@dataclass(frozen=True)
class ReferenceModelAttack(Attack):
    """Base of LiRA and RMIA: ``models`` are the reference roles (filled from the run),
    ``signal``/``k`` the per-example signal, ``modes`` online and/or offline."""

    models: tuple[str, ...] = ()
    signal: str = "mean_logp"
    k: float = 0.2
    modes: tuple[str, ...] = ("online", "offline")
    membership: dict[str, tuple[int, ...]] | None = prepared_field()
    #: online mode also needs OUT values (LiRA's OUT Gaussian; RMIA online averages all models)
    online_needs_out: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "modes", tuple(self.modes))
        if not self.models:
            raise ConfigError(
                f"attack {self.name!r} needs reference models with known training data: "
                "--references DIR (a game built with --reference-models K) or a training manifest"
            )
        if self.signal not in SIGNALS:
            raise ConfigError(f"{self.name}.signal must be one of {SIGNALS}, got {self.signal!r}")
        check_fraction(f"{self.name}.k", self.k)
        bad = [m for m in self.modes if m not in ("online", "offline")]
        if bad or not self.modes or len(set(self.modes)) != len(self.modes):
            raise ConfigError(
                f"{self.name}.modes must list online and/or offline once each, got {self.modes}"
            )

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        if run.references is None:
            return "no reference models with known training data (--references)"
        return None

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> Attack:
        if run.references is not None:
            params.setdefault("models", run.references.names)
        return cls(**params)

    def columns(self) -> tuple[str, ...]:
        return tuple(self.name if m == "online" else f"{self.name}_offline" for m in self.modes)

    def needs(self) -> tuple[Need, ...]:
        return (Need(), *(Need(model=m) for m in self.models))

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        return Preparation(attack=self._with_membership(samples, run))

    def _with_membership(self, samples: Sequence[Sample], run: RunContext) -> Any:
        refset = run.references
        if refset is None or set(self.models) - set(refset.names):
            have = refset.names if refset is not None else ()
            raise ConfigError(
                f"attack {self.name!r}: reference models {list(self.models)} are not all in the "
                f"run's --references ({list(have)})"
            )
        rows = [refset.names.index(m) for m in self.models]
        matrix = refset.matrix([s.id for s in samples])[rows]
        if "online" in self.modes and not (matrix == IN).any():
            example = ", ".join(repr(s.id) for s in samples[:2])
            raise ConfigError(
                f"attack {self.name!r}, online mode: no reference model trained on any of the "
                f"{len(samples)} samples (by id), so there is no IN distribution. Check that the "
                f"manifest's ids are the run's sample ids (here e.g. {example}), or use --param "
                f"{self.name}.modes=offline"
            )
        if ("offline" in self.modes or self.online_needs_out) and not (matrix == OUT).any():
            mode = "offline" if "offline" in self.modes else "online"
            why, fix = _no_out_reason(matrix)
            raise ConfigError(
                f"attack {self.name!r}, {mode} mode: {why}, so there is no OUT distribution and "
                f"every score would be NaN. {fix}"
                + ("" if self.online_needs_out else f", or --param {self.name}.modes=online")
            )
        return replace(self, membership=membership_by_text(samples, matrix))

    # -- helpers for score() ---------------------------------------------------------------
    def values(self, signals: SignalSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(target signal (n,), reference signals (K, n), membership (K, n))."""
        target = self.signal_array(signals.get())
        refs = np.stack([self.signal_array(signals.get(Need(model=m))) for m in self.models])
        return target, refs, self.member_matrix(signals.texts)

    def signal_array(self, stats: Sequence[TokenStats]) -> np.ndarray:
        return np.array([signal_value(s, self.signal, self.k) for s in stats], dtype=np.float64)

    def member_matrix(self, texts: Sequence[str]) -> np.ndarray:
        if self.membership is None:
            raise ConfigError(f"attack {self.name!r} was not prepared (membership unknown)")
        unknown = (UNKNOWN,) * len(self.models)
        columns = [self.membership.get(t, unknown) for t in texts]
        return np.array(columns, dtype=np.int8).T.reshape(len(self.models), len(texts))
