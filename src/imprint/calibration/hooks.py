"""Rows whose simulations live beside the figures they check, in other packages:

- dataset inference (:mod:`imprint.documents.di_calibration`): size under the null with
  correlated sequences (the false-positive check of a run is the same test on two halves of the
  non-members, so it shares this size) and power against a shift;
- paired AUC comparisons (:mod:`imprint.metrics.paired_calibration`): coverage of the paired
  interval for AUC(A) - AUC(B) and the size of the paired test, on correlated documents.

Each hook returns no rows (and says why in its note) when its module is not there, so the suite
runs on any checkout.
"""

from __future__ import annotations

import importlib
from typing import Any

from imprint.calibration.core import Row, info_row

__all__ = ["rows_dataset_inference", "rows_paired"]


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _from_rate(figure: str, method: str, kind: str, nominal: float, rate: float, n: int) -> Row:
    """A row from a measured rate: the per-simulation flags are rebuilt from it (the share is
    all that the tolerance needs)."""
    from imprint.calibration.core import coverage_row, size_row

    k = round(rate * n)
    flags = [True] * k + [False] * (n - k)
    make = coverage_row if kind == "coverage" else size_row
    return make(figure, method, flags, nominal)


def rows_dataset_inference(n_sims: int, seed: int) -> list[Row]:
    """Dataset inference's size (20 + 20 documents of 10 sequences, within-document correlation
    0.5) and its power against a 0.5 shift of one feature."""
    di = _module("imprint.documents.di_calibration")
    if di is None or not hasattr(di, "simulate_dataset_inference"):
        return []
    null = di.simulate_dataset_inference(n_sims, seed=seed)
    alt = di.simulate_dataset_inference(n_sims, seed=seed + 1, shift=0.5)
    method = "Welch t-test on per-document means (documents the unit)"
    figure = "dataset inference p-value, null, 20 + 20 documents x 10 correlated sequences"
    return [
        _from_rate(figure, method, "size", null.nominal, null.rate, null.n_sims),
        info_row(
            "dataset inference power, shift 0.5 of one feature, same sets",
            method,
            alt.rate,
            alt.n_sims,
        ),
    ]


def rows_paired(n_sims: int, seed: int) -> list[Row]:
    """Paired AUC(A) - AUC(B) on the same documents: coverage and size, DeLong and bootstrap."""
    pc = _module("imprint.metrics.paired_calibration")
    if pc is None or not hasattr(pc, "paired_coverage"):
        return []
    rows = []
    for method in ("delong", "bootstrap"):
        cov = pc.paired_coverage(n_sims, seed=seed, method=method, auc_a=0.75, auc_b=0.7)
        size = pc.paired_size(n_sims, seed=seed + 1, method=method, auc_a=0.7)
        rows.append(
            _from_rate(
                "paired AUC(A) - AUC(B), same samples (0.75 vs 0.70)",
                f"{method}, paired",
                "coverage",
                cov.nominal,
                cov.measured,
                cov.n_sims,
            )
        )
        rows.append(
            _from_rate(
                "paired test of equal AUCs (0.70 vs 0.70)",
                f"{method}, paired",
                "size",
                size.nominal,
                size.measured,
                size.n_sims,
            )
        )
    return rows
