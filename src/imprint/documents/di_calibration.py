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
power. The calibration suite (``benchmarks/bench_calibration.py``) and the tests call it;
:func:`calibration_rows` runs every setting of :data:`SETTINGS` (``python -m
imprint.documents.di_calibration [N_SIMS]`` prints them as a table).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from imprint.documents.dataset_inference import ALPHA, CLIP, ClipFrom, Unit, dataset_inference
from imprint.errors import ConfigError

__all__ = [
    "SETTINGS",
    "FlagRate",
    "calibration_rows",
    "simulate_dataset_inference",
    "simulated_set",
]


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


#: (name, kind, simulate_dataset_inference arguments): ``kind`` "size" rows should stay at or
#: under alpha (within binomial error), "power" rows are the power at that shift, "anticonservative"
#: rows show a test that does not hold its size (the sequence unit, the authors' clip placement).
SETTINGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("null, normal, rho 0.5, document unit", "size", {"rho": 0.5}),
    ("null, normal, rho 0.5, sequence unit", "anticonservative", {"rho": 0.5, "unit": "sequence"}),
    ("shift 0.5, normal, rho 0.5", "power", {"rho": 0.5, "shift": 0.5}),
    ("shift 1.0, normal, rho 0.5", "power", {"rho": 0.5, "shift": 1.0}),
    (
        "null, Cauchy, rho 0.2, clip bounds from the fit halves",
        "size",
        {"rho": 0.2, "tail_df": 1.0},
    ),
    (
        "null, Cauchy, rho 0.2, clip bounds per set (authors)",
        "anticonservative",
        {"rho": 0.2, "tail_df": 1.0, "clip_from": "set"},
    ),
    ("null, Cauchy, rho 0.2, no clipping", "size", {"rho": 0.2, "tail_df": 1.0, "clip": 0.0}),
    ("shift 1.0, Cauchy, rho 0.2, clipped", "power", {"rho": 0.2, "tail_df": 1.0, "shift": 1.0}),
    (
        "shift 1.0, Cauchy, rho 0.2, no clipping",
        "power",
        {"rho": 0.2, "tail_df": 1.0, "shift": 1.0, "clip": 0.0},
    ),
)


def calibration_rows(n_sims: int = 400, seed: int = 11) -> list[dict[str, Any]]:
    """Every setting of :data:`SETTINGS` simulated ``n_sims`` times: name, kind, rate, se, and
    for size rows ``within`` (rate <= alpha + 2 binomial s.e. at alpha)."""
    rows = []
    for name, kind, kw in SETTINGS:
        found = simulate_dataset_inference(n_sims, seed=seed, **kw)
        limit = found.nominal + 2 * math.sqrt(found.nominal * (1 - found.nominal) / n_sims)
        row = {"name": name, "kind": kind, **found.to_dict()}
        if kind == "size":
            row["within"] = found.rate <= limit
        rows.append(row)
    return rows


if __name__ == "__main__":  # pragma: no cover - a command for the README's figures
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    print("| setting | kind | share flagged | s.e. | n |")
    print("|---|---|---|---|---|")
    for r in calibration_rows(n):
        print(f"| {r['name']} | {r['kind']} | {r['rate']:.3f} | {r['se']:.3f} | {r['n_sims']} |")
