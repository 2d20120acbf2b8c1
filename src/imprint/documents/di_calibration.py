"""Dataset inference checked by simulation: its size under the null with correlated sequences,
its power against shifts, and what the authors' outlier clipping buys with heavy tails.

Each simulated set has ``n_docs`` documents of ``seqs_per_doc`` sequences and ``n_features``
attack scores. A sequence's features are a document effect shared by all its sequences
(variance ``rho``) plus its own noise (variance ``1 - rho``): ``rho`` is the correlation of two
sequences of one document. ``tail_df`` draws the sequence noise from a Student t with that many
degrees of freedom, scaled to unit variance where it has one (heavy tails: a few sequences with
extreme scores). The suspect set's first feature is shifted by ``shift`` (0: the null, the
suspect set is as unseen as the validation set).

:func:`simulate_dataset_inference` returns the share of simulations flagged with its binomial
standard error: under the null that share is the test's size (nominal ``alpha``), otherwise its
power. The calibration suite (``benchmarks/bench_calibration.py``) and the tests call it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from imprint.documents.dataset_inference import ALPHA, CLIP, ClipFrom, Unit, dataset_inference
from imprint.errors import ConfigError

__all__ = ["FlagRate", "simulate_dataset_inference", "simulated_set"]


@dataclass(frozen=True)
class FlagRate:
    """The share of ``n_sims`` simulated tests flagged at ``alpha`` and its binomial standard
    error sqrt(rate (1 - rate) / n); ``nominal`` is alpha (the size a null run should keep)."""

    rate: float
    se: float
    n_sims: int
    nominal: float
    setting: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def simulated_set(
    rng: np.random.Generator,
    *,
    n_docs: int,
    seqs_per_doc: int,
    n_features: int = 3,
    rho: float = 0.5,
    shift: float = 0.0,
    tail_df: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(features (n_docs * seqs_per_doc, n_features), document id per row): see the module
    docstring."""
    if not 0 <= rho < 1:
        raise ConfigError(f"rho (the within-document correlation) must be in [0, 1), got {rho}")
    groups = np.repeat(np.arange(n_docs), seqs_per_doc)
    shape = (len(groups), n_features)
    if tail_df is None:
        noise = rng.standard_normal(shape)
    else:
        noise = rng.standard_t(tail_df, size=shape)
        if tail_df > 2:
            noise /= math.sqrt(tail_df / (tail_df - 2))
    doc_effect = rng.standard_normal((n_docs, n_features))[groups]
    x = math.sqrt(rho) * doc_effect + math.sqrt(1 - rho) * noise
    x[:, 0] += shift
    return x, groups


def simulate_dataset_inference(
    n_sims: int,
    *,
    n_docs: int = 20,
    seqs_per_doc: int = 10,
    n_features: int = 3,
    rho: float = 0.5,
    shift: float = 0.0,
    tail_df: float | None = None,
    unit: Unit = "document",
    clip: float = CLIP,
    clip_from: ClipFrom = "fit",
    alpha: float = ALPHA,
    seed: int = 0,
) -> FlagRate:
    """Run :func:`~imprint.documents.dataset_inference.dataset_inference` on ``n_sims`` seeded
    pairs of simulated sets (suspect shifted by ``shift``, validation not) and count flags."""
    if n_sims < 1:
        raise ConfigError(f"n_sims must be >= 1, got {n_sims}")
    rng = np.random.default_rng([seed, 17])
    shape = {"n_docs": n_docs, "seqs_per_doc": seqs_per_doc, "n_features": n_features}
    flagged = 0
    for i in range(n_sims):
        xs, gs = simulated_set(rng, rho=rho, shift=shift, tail_df=tail_df, **shape)
        xv, gv = simulated_set(rng, rho=rho, tail_df=tail_df, **shape)
        result = dataset_inference(
            xs, xv, gs, gv, alpha=alpha, unit=unit, seed=i, clip=clip, clip_from=clip_from
        )
        flagged += result.flagged
    rate = flagged / n_sims
    setting: dict[str, Any] = {**shape, "rho": rho, "shift": shift, "tail_df": tail_df}
    setting.update(unit=unit, clip=clip, clip_from=clip_from, seed=seed)
    return FlagRate(rate, math.sqrt(rate * (1 - rate) / n_sims), n_sims, alpha, setting)
