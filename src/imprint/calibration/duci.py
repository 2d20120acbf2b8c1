"""Calibration rows for DUCI's interval (:func:`imprint.documents.duci.duci`): coverage of the
fraction of a document set the target trained on.

Each simulated data set has ``n`` documents and K reference models trained on complementary
halves in pairs (as a game builds them). A model's per-document MIA score is the document's
difficulty (shared by every model) plus the model's own gain if it trained on the document,
plus noise; each model's gain is its own draw around ``shift`` (sd ``gain_sd``): training runs
differ in how attackable they leave a model, the target's run included. The target trains on
each document with probability p; the truth is the share it trained on.

The OLD row rebuilds the interval before issue 37 (the between-model spread taken at the
estimate, the normal quantile) from the same bootstrap, to show its defect: misses above the
interval at high fractions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from imprint.calibration.core import Row, coverage_row
from imprint.calibration.sequences import LEVEL
from imprint.documents.duci import _two_way_bootstrap, duci, model_spread

__all__ = ["SETTINGS", "duci_data", "rows_duci"]

#: (label, K, p, shift, gain_sd): the settings the suite runs (n = 60 documents each)
SETTINGS: tuple[tuple[str, int, float, float, float], ...] = (
    ("K = 4", 4, 0.0, 1.5, 0.5),
    ("K = 4", 4, 0.5, 1.5, 0.5),
    ("K = 4", 4, 0.75, 1.5, 0.5),
    ("K = 4", 4, 1.0, 1.5, 0.5),
    ("K = 8", 8, 0.75, 1.5, 0.5),
    ("K = 8", 8, 1.0, 1.5, 0.5),
    ("K = 4, strong signal", 4, 0.75, 3.0, 1.0),
    ("K = 4, strong signal", 4, 1.0, 3.0, 1.0),
    ("K = 8, strong signal", 8, 1.0, 3.0, 1.0),
)
N_DOCUMENTS = 60
N_BOOTSTRAP = 200


def duci_data(
    rng: np.random.Generator, n: int, k: int, p: float, shift: float, gain_sd: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(target scores (n,), reference scores (K, n), memberships (K, n), true fraction): see
    the module docstring; K must be even (pairs)."""
    difficulty = rng.normal(size=n)
    member = np.zeros((k, n), dtype=int)
    for j in range(0, k, 2):
        member[j, rng.permutation(n)[: n // 2]] = 1
        member[j + 1] = 1 - member[j]

    def scores(trained: np.ndarray) -> np.ndarray:
        gain = shift + gain_sd * rng.normal()
        return difficulty + gain * trained + rng.normal(size=n)

    target_in = rng.random(n) < p
    refs = np.stack([scores(member[j]) for j in range(k)])
    return scores(target_in), refs, member, float(target_in.mean())


def _old_interval(target: np.ndarray, refs: np.ndarray, member: np.ndarray, seed: int) -> Any:
    """The interval before issue 37: the percentile interval widened on both sides by
    sqrt(1 + s^2 / v), s the between-model spread at the estimate, the normal quantile."""
    r = duci(target, refs, member, n_bootstrap=N_BOOTSTRAP, seed=seed)
    boot = _two_way_bootstrap(np.atleast_2d(target), refs, member, N_BOOTSTRAP, seed)
    boot = boot[np.isfinite(boot)]
    lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    s = model_spread(refs, member, r.threshold, r.tpr, r.fpr, r.estimate)
    widen = np.sqrt(1.0 + s**2 / boot.var())
    return r.estimate - (r.estimate - lo) * widen, r.estimate + (hi - r.estimate) * widen


def _hits(n_sims: int, seed: int, setting: tuple[Any, ...], old: bool) -> tuple[list[bool], float]:
    """Whether each simulation's interval held the truth, and the intervals' mean width."""
    _, k, p, shift, gain_sd = setting
    rng = np.random.default_rng([seed, k, round(p * 100), round(shift * 10)])
    hits, widths = [], []
    for i in range(n_sims):
        target, refs, member, truth = duci_data(rng, N_DOCUMENTS, k, p, shift, gain_sd)
        if old:
            lo, hi = _old_interval(target, refs, member, i)
        else:
            lo, hi = duci(target, refs, member, n_bootstrap=N_BOOTSTRAP, seed=i).interval
        hits.append(bool(lo <= truth <= hi))
        widths.append(hi - lo)
    return hits, float(np.mean(widths))


def rows_duci(n_sims: int, seed: int, *, settings: Any = SETTINGS, old: bool = True) -> list[Row]:
    """Coverage of DUCI's 95 % interval in each setting; with ``old``, the interval before
    issue 37 at K = 4, p = 1 (the defect reproduced)."""
    method = (
        f"two-way bootstrap ({N_BOOTSTRAP} resamples) widened by one model's probit-scale "
        "prediction limit at the bound"
    )
    old_method = "OLD: widened by the between-model sd at the estimate, normal quantile"
    runs = [(s, False) for s in settings] + ([(("K = 4", 4, 1.0, 1.5, 0.5), True)] if old else [])
    rows = []
    for setting, is_old in runs:
        label, _, p, shift, gain_sd = setting
        figure = (
            f"DUCI fraction, p = {p:g} ({N_DOCUMENTS} documents, {label}, model gains "
            f"{shift:g} +- {gain_sd:g})"
        )
        hits, width = _hits(n_sims, seed, setting, is_old)
        how = f"{old_method if is_old else method}; mean width {width:.2f}"
        rows.append(coverage_row(figure, how, hits, LEVEL, expect_pass=not is_old))
    return rows
