"""Rows whose simulations live beside the figures they check, in other packages:

- dataset inference (:mod:`imprint.documents.di_calibration`, its ``calibration_rows``): size
  under the null with correlated sequences (a run's false-positive check is the same test on two
  halves of the non-members, so it shares this size), with heavy tails, and power against shifts;
- paired AUC comparisons (:mod:`imprint.metrics.paired_calibration`): coverage of the paired
  interval for AUC(A) - AUC(B) and the size of the paired test, on i.i.d. samples and (issue 37)
  on few correlated documents, where the plain percentile bootstrap was too liberal.

Each hook returns no rows (and says why in its note) when its module is not there, so the suite
runs on any checkout.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

from imprint.calibration.core import Row, info_row

__all__ = ["rows_dataset_inference", "rows_paired", "rows_paired_documents"]


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _flags(rate: float, n: int) -> list[bool]:
    """Per-simulation flags with this share (all that a tolerance needs)."""
    k = round(rate * n)
    return [True] * k + [False] * (n - k)


def _from_rate(figure: str, method: str, kind: str, nominal: float, rate: float, n: int) -> Row:
    from imprint.calibration.core import coverage_row, size_row

    make = coverage_row if kind == "coverage" else size_row
    return make(figure, method, _flags(rate, n), nominal)


def rows_dataset_inference(n_sims: int, seed: int) -> list[Row]:
    """Every setting of dataset inference's own suite (``di_calibration.calibration_rows``):
    sizes within alpha + 2 s.e. (the issue's rule), the paper's sequence unit and the authors'
    per-set clipping as old behaviour (anticonservative), powers shown for context."""
    from imprint.calibration.core import size_row

    di = _module("imprint.documents.di_calibration")
    if di is None or not hasattr(di, "calibration_rows"):
        return []
    rows = []
    for r in di.calibration_rows(n_sims, seed=seed):
        figure = f"dataset inference, {r['name']} (20 + 20 documents x 10 sequences)"
        unit = r.get("setting", {}).get("unit", "document")
        method = f"Welch t-test on per-{unit} means"
        flags = _flags(r["rate"], r["n_sims"])
        if r["kind"] == "power":
            rows.append(info_row(figure, method, r["rate"], r["n_sims"]))
        else:
            old = r["kind"] != "size"
            rows.append(size_row(figure, ("OLD/paper: " if old else "") + method, flags,
                                 r["nominal"], n_se=2.0, expect_pass=not old))  # fmt: skip
    return rows


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


#: a small ``--unit document`` run: 15 + 15 documents of 10 sequences, half the noise shared
PAIRED_DOCS = {"n_members": 15, "n_nonmembers": 15, "seqs_per_doc": 10, "within_doc": 0.5}


def rows_paired_documents(n_sims: int, seed: int) -> list[Row]:
    """Size of the paired comparison of two attacks of equal AUC (0.70) on 15 + 15 documents,
    resampling documents: DeLong (cluster-robust), the paired bootstrap's expanded percentile
    interval, and its plain percentile interval (OLD, before issue 37)."""
    pc = _module("imprint.metrics.paired_calibration")
    if pc is None or not hasattr(pc, "paired_size"):
        return []
    figure = "paired test of equal AUCs on documents (0.70 vs 0.70, 15 + 15 documents x 10)"
    rows = []
    for method, label in (("delong", "delong, paired, cluster-robust"),
                          ("bootstrap", "bootstrap, paired, over documents, expanded percentile"),
                          ("bootstrap_percentile", "OLD: bootstrap, paired, over documents, "
                           "percentile")):  # fmt: skip
        size = pc.paired_size(n_sims, seed=seed, method=method, auc_a=0.7, **PAIRED_DOCS)
        row = _from_rate(figure, label, "size", size.nominal, size.measured, size.n_sims)
        if method == "bootstrap_percentile":
            row = replace(row, expect_pass=False, note="issue 37: too narrow with 15 units")
        rows.append(row)
    return rows
