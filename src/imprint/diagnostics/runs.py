"""Threshold transfer read off run folders: perturbed members (MIMIR Table 4) and run vs run
(MIMIR Table 5), plus AUC differences, paired on the samples both runs scored.

A run folder's ``scores.parquet`` has columns ``id``, ``label``, ``text``, ``meta`` (a JSON
string) and one float column per attack (higher = more likely member). Thresholds are fixed at
x % FPR on one set of non-members with :func:`imprint.metrics.threshold_at_fpr` and applied to
another set with :func:`imprint.metrics.threshold_transfer`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from imprint.diagnostics.paired_runs import (
    AUCDifference,
    RunPairing,
    pair_runs,
    paired_auc_differences,
)
from imprint.errors import DataError
from imprint.metrics import roc_auc_score as auc
from imprint.metrics import threshold_at_fpr, threshold_transfer, unresolvable

__all__ = [
    "DEFAULT_TRANSFER_FPRS",
    "AttackComparison",
    "PerturbationRow",
    "PerturbationTable",
    "RunComparison",
    "RunScores",
    "auc_difference",
    "compare_runs",
    "perturbation_groups",
    "perturbation_table",
    "read_run",
]

DEFAULT_TRANSFER_FPRS = (0.01, 0.05, 0.1)
BASE_COLUMNS = ("id", "label", "text", "meta")
NATURAL = "none"


def _pct(f: float) -> str:
    return f"{round(f * 100, 10):g}%"


@dataclass(frozen=True)
class RunScores:
    """Scores of a run folder: ``labels`` (shape (n,)), ``meta`` (n dicts), ``scores`` attack
    name -> array of shape (n,), possibly with NaN; ``ids`` the n sample ids (empty when the
    file has no ``id`` column); ``texts`` the n texts (empty when it has no ``text`` column)."""

    path: Path
    labels: NDArray[np.int64]
    meta: list[dict[str, Any]]
    scores: dict[str, NDArray[np.float64]]
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


def read_run(run_dir: str | Path) -> RunScores:
    """Read ``scores.parquet`` of a run folder (see the module docstring for its columns)."""
    import pyarrow.parquet as pq

    path = Path(run_dir)
    file = path / "scores.parquet" if path.is_dir() else path
    if not file.is_file():
        raise DataError(f"{path} has no scores.parquet; pass a run folder written by `imprint run`")
    table = pq.read_table(file)
    missing = [c for c in ("label", "meta") if c not in table.column_names]
    if missing:
        raise DataError(f"{file} lacks column(s) {missing}; is it an imprint run's scores file?")
    labels = np.asarray(table.column("label").to_pylist(), dtype=np.int64)
    meta = [json.loads(m) if m else {} for m in table.column("meta").to_pylist()]
    scores = {
        name: np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
        for name in table.column_names
        if name not in BASE_COLUMNS
    }
    if not scores:
        raise DataError(f"{file} has no attack score columns")
    ids = [str(i) for i in table.column("id").to_pylist()] if "id" in table.column_names else []
    texts = (
        [str(t) for t in table.column("text").to_pylist()] if "text" in table.column_names else []
    )
    return RunScores(path, labels, meta, scores, ids, texts)


@dataclass(frozen=True)
class PerturbationRow:
    """One attack of a perturbation table, per group (``members``, ``nonmembers``, each
    perturbation): rows scored (``n``) and unscored (``n_nan``), the rate at or above each
    target FPR's threshold (``rates``, None where not measurable); per target FPR (``"1%"``)
    the threshold set on the natural non-members and, where they cannot resolve it, why."""

    n: dict[str, int]
    n_nan: dict[str, int]
    thresholds: dict[str, float | None]
    rates: dict[str, dict[str, float | None]]
    not_measurable: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "n_nan": self.n_nan, "thresholds": self.thresholds,
                "rates": self.rates, "not_measurable": self.not_measurable}  # fmt: skip


@dataclass(frozen=True)
class PerturbationTable:
    """:func:`perturbation_table`'s result: the run, the target FPRs, the groups in order and
    one :class:`PerturbationRow` per attack; ``to_dict`` is ``perturbation_table.json``."""

    run: str
    fprs: tuple[float, ...]
    groups: tuple[str, ...]
    attacks: dict[str, PerturbationRow]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "fprs": list(self.fprs), "groups": list(self.groups),
                "attacks": {name: row.to_dict() for name, row in self.attacks.items()}}  # fmt: skip


def _finite(values: NDArray[np.float64]) -> NDArray[np.float64]:
    return values[~np.isnan(values)]


def perturbation_table(
    run_dir: str | Path,
    *,
    fprs: Sequence[float] = DEFAULT_TRANSFER_FPRS,
    field: str = "perturbation",
) -> PerturbationTable:
    """FPR that perturbed members get at thresholds giving ``fprs`` on natural non-members.

    Rows are grouped by ``meta[field]`` (natural rows: missing or ``"none"``). Per attack and
    target FPR: the threshold, the rate at or above it for natural members (TPR), natural
    non-members (the achieved FPR, <= target) and each perturbation group (the transferred FPR;
    perturbed members are the B set of :func:`~imprint.metrics.threshold_transfer`). NaN scores
    are left out and counted.
    """
    run = read_run(run_dir)
    groups = np.array([str(m.get(field) or NATURAL) for m in run.meta])
    kinds = sorted(set(groups) - {NATURAL}, key=_kind_order)
    if not kinds:
        raise DataError(
            f"{run.path}: no row has meta[{field!r}] other than 'none'; score a dataset "
            "written by `imprint perturb`"
        )
    natural = groups == NATURAL
    sets = {"members": natural & (run.labels == 1), "nonmembers": natural & (run.labels == 0)}
    sets.update({k: groups == k for k in kinds})
    rows = {name: _perturbation_row(values, sets, fprs) for name, values in run.scores.items()}
    return PerturbationTable(str(run.path), tuple(fprs), tuple(sets), rows)


def _perturbation_row(
    values: NDArray[np.float64], sets: dict[str, NDArray[np.bool_]], fprs: Sequence[float]
) -> PerturbationRow:
    """One attack's counts, thresholds and rates; a target FPR the natural non-members cannot
    resolve (fewer than 4/t) gets None everywhere and its reason under ``not_measurable``."""
    calib = _finite(values[sets["nonmembers"]])
    reasons = unresolvable(fprs, calib.size, where="the natural (unperturbed) non-members")
    kept = [f for f in fprs if f not in reasons]
    n, n_nan, rates = {}, {}, {}
    for group, mask in sets.items():
        n[group] = int((mask & ~np.isnan(values)).sum())
        n_nan[group] = int((mask & np.isnan(values)).sum())
        transfer = threshold_transfer(calib, _finite(values[mask]), fprs=kept) if kept else {}
        rates[group] = {_pct(f): _json(transfer[f]) if f in transfer else None for f in fprs}
    thresholds = {
        _pct(f): _json(threshold_at_fpr(calib, f)) if calib.size and f not in reasons else None
        for f in fprs
    }
    not_measurable = {_pct(f): why for f, why in reasons.items()}
    return PerturbationRow(n, n_nan, thresholds, rates, not_measurable)


def perturbation_groups(run: RunScores, *, field: str = "perturbation") -> list[str]:
    """Per row of ``run``: ``members`` or ``nonmembers`` for natural rows (``meta[field]``
    missing or ``"none"``), else the perturbation's name (e.g. ``edit10``)."""
    return [
        ("members" if label == 1 else "nonmembers")
        if str(meta.get(field) or NATURAL) == NATURAL
        else str(meta[field])
        for meta, label in zip(run.meta, run.labels, strict=True)
    ]


def _kind_order(kind: str) -> tuple[int, str]:
    digits = "".join(ch for ch in kind if ch.isdigit())
    return (int(digits) if digits else 10**6, kind)


def _json(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _bootstrap_aucs(
    labels: NDArray[np.int64], scores: NDArray[np.float64], n: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """AUC of ``n`` stratified resamples (members and non-members resampled separately)."""
    from scipy.stats import rankdata

    pos, neg = scores[labels == 1], scores[labels == 0]
    out = np.empty(n)
    chunk = max(1, 2_000_000 // (pos.size + neg.size))
    for start in range(0, n, chunk):
        c = min(chunk, n - start)
        p = pos[rng.integers(0, pos.size, size=(c, pos.size))]
        q = neg[rng.integers(0, neg.size, size=(c, neg.size))]
        ranks = rankdata(np.concatenate([p, q], axis=1), axis=1)
        u = ranks[:, : pos.size].sum(axis=1) - pos.size * (pos.size + 1) / 2
        out[start : start + c] = u / (pos.size * neg.size)
    return out


def auc_difference(
    labels_a: NDArray[np.int64],
    scores_a: NDArray[np.float64],
    labels_b: NDArray[np.int64],
    scores_b: NDArray[np.float64],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AUCDifference:
    """AUC(B) - AUC(A) with a percentile interval from independent stratified resamples.

    The two runs are resampled independently (child generators of ``default_rng(seed)``), as
    for two separate samples: ``a``, ``b`` and ``diff``, each ``{estimate, low, high}``.
    """
    gen_a, gen_b = np.random.default_rng(seed).spawn(2)
    boot_a = _bootstrap_aucs(labels_a, scores_a, n_resamples, gen_a)
    boot_b = _bootstrap_aucs(labels_b, scores_b, n_resamples, gen_b)
    alpha = (1.0 - confidence) / 2
    est_a, est_b = auc(labels_a, scores_a), auc(labels_b, scores_b)

    def interval(estimate: float, values: NDArray[np.float64]) -> dict[str, float]:
        low, high = np.quantile(values, [alpha, 1 - alpha])
        return {"estimate": float(estimate), "low": float(low), "high": float(high)}

    diff = interval(est_b - est_a, boot_b - boot_a)
    return AUCDifference(interval(est_a, boot_a), interval(est_b, boot_b), dict(diff))


def _transfer_cells(
    a_non: NDArray[np.float64],
    b_non: NDArray[np.float64],
    b_mem: NDArray[np.float64],
    fprs: Sequence[float],
) -> dict[str, dict[str, Any]]:
    """Per target FPR: the threshold set on A's non-members, the FPR and TPR it gives on B. A
    target A's non-members cannot resolve (fewer than 4/t) is all None with its reason."""
    reasons = unresolvable(fprs, a_non.size, where="run A, where the thresholds are set")
    cells: dict[str, dict[str, Any]] = {}
    for f in fprs:
        if f in reasons:
            cells[_pct(f)] = {
                "threshold": None, "fpr_b": None, "tpr_b": None, "not_measurable": reasons[f]
            }  # fmt: skip
            continue
        threshold = threshold_at_fpr(a_non, f)
        cells[_pct(f)] = {
            "threshold": _json(threshold),
            "fpr_b": _json(threshold_transfer(a_non, b_non, fprs=(f,))[f]),
            "tpr_b": _json(float(np.mean(b_mem >= threshold))),
        }
    return cells


@dataclass(frozen=True)
class AttackComparison:
    """One attack in both runs: samples each left unscored; per target FPR the threshold set
    on A's non-members with the FPR and TPR it gives on B (``transfer``); AUC(B) - AUC(A)
    (``auc``). ``error`` (then no figures) when a run lacks a class with finite scores."""

    n_nan_a: int
    n_nan_b: int
    transfer: dict[str, dict[str, Any]] = field(default_factory=dict)
    auc: AUCDifference | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n_nan_a": self.n_nan_a, "n_nan_b": self.n_nan_b}
        if self.error is not None:
            return {**out, "error": self.error}
        out["transfer"] = self.transfer
        out["auc"] = None if self.auc is None else self.auc.to_dict()
        return out


@dataclass(frozen=True)
class RunComparison:
    """:func:`compare_runs`'s result; ``to_dict`` is ``imprint diagnostics compare``'s JSON."""

    run_a: str
    run_b: str
    fprs: tuple[float, ...]
    pairing: RunPairing
    attacks: dict[str, AttackComparison]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "fprs": list(self.fprs),
            "pairing": {**self.pairing.to_dict(), "description": self.pairing.describe()},
            "attacks": {name: row.to_dict() for name, row in self.attacks.items()},
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
        }


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    fprs: Sequence[float] = DEFAULT_TRANSFER_FPRS,
    n_resamples: int = 1000,
    seed: int = 0,
) -> RunComparison:
    """Thresholds fixed at ``fprs`` on A's non-members, the FPR they give on B's non-members,
    and the AUC difference B - A with its interval, for every attack both runs scored.

    The AUC difference is paired on the samples the runs share (by id; ``pairing`` says how
    many, and how many were only in one run): DeLong's paired test, Bonferroni over the attacks,
    and the paired bootstrap (:mod:`.paired_runs`). An attack without two member and two
    non-member shared units falls back to independent resamples of each run, marked
    ``"method": "independent"`` with the reason."""
    a, b = read_run(run_a), read_run(run_b)
    common = [c for c in a.scores if c in b.scores]
    pairing = pair_runs(a, b)
    paired = paired_auc_differences(a, b, pairing, common, n_resamples=n_resamples, seed=seed)
    rows: dict[str, AttackComparison] = {}
    for name in common:
        ok_a, ok_b = ~np.isnan(a.scores[name]), ~np.isnan(b.scores[name])
        la, sa = a.labels[ok_a], a.scores[name][ok_a]
        lb, sb = b.labels[ok_b], b.scores[name][ok_b]
        nans = (int((~ok_a).sum()), int((~ok_b).sum()))
        if min(np.bincount(la, minlength=2).min(), np.bincount(lb, minlength=2).min()) == 0:
            rows[name] = AttackComparison(
                *nans, error="a run lacks members or non-members with finite scores"
            )
            continue
        difference = paired.get(name) or replace(
            auc_difference(la, sa, lb, sb, n_resamples=n_resamples, seed=seed),
            reason="fewer than two member and two non-member samples scored in both runs "
            "(paired by id); the runs were resampled independently",
        )
        transfer = _transfer_cells(sa[la == 0], sb[lb == 0], sb[lb == 1], fprs)
        rows[name] = AttackComparison(*nans, transfer=transfer, auc=difference)
    return RunComparison(
        str(a.path),
        str(b.path),
        tuple(fprs),
        pairing,
        rows,
        tuple(c for c in a.scores if c not in b.scores),
        tuple(c for c in b.scores if c not in a.scores),
    )
