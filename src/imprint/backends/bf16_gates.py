"""The bf16 accuracy gate: does bf16 scoring change what a user reads off a report?

Per score column, bf16 scores against float32 scores of the same texts (held out from the bf16
path's development), three criteria, each about a figure imprint reports:

- **AUC**: |AUC(bf16) - AUC(fp32)| <= :data:`GATE_AUC` on the labelled set (0.005 is a tenth of
  the narrowest bootstrap half-width imprint's reports typically show, +-0.03 to +-0.1);
- **TPR at the lowest measurable FPR** (the four-false-positive rule of
  :mod:`imprint.metrics.resolution`): the two dtypes' TPRs differ by at most
  :data:`GATE_TPR_TEXTS` member text;
- **ranking**: Spearman >= :data:`GATE_SPEARMAN` on every set, labelled or not (WikiMIA, Chinese,
  Russian, long texts), so a column cannot pass on English short texts alone.

``benchmarks/bench_bf16.py --record-gate`` measures the gate per shipped model family and writes
it to ``bf16_gate_results.json`` next to this module, keyed by family and CPU kind (the native bf16
unit: bf16 GEMM kernels differ between AMX and AVX-512, so a gate measured on one does not vouch
for the other). ``--dtype auto`` reads it (:mod:`imprint.backends.dtype_choice`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

GATE_AUC = 0.005
GATE_TPR_TEXTS = 1
GATE_SPEARMAN = 0.998
GATE_FILE = Path(__file__).with_name("bf16_gate_results.json")
# bump when the bf16 path changes what it computes: gates measured on the old one no longer hold.
# The default CPU bf16 path: bf16 head over position blocks, then the compiled reduction.
BF16_PATH = "bf16-head+compiled-blocks+fused-reduce/2"
# the head in vocabulary slices folded into running statistics (an option: not shown to pay)
FUSED_HEAD_PATH = "bf16-fused-head+compiled-blocks/3"

Scores = Mapping[str, Sequence[float] | np.ndarray]


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(np.asarray(a, float), np.asarray(b, float)).statistic)


def tpr_texts_at_lowest_fpr(labels: np.ndarray, scores: np.ndarray) -> tuple[float, int]:
    """(FPR bound, members detected) at the lowest FPR the non-members can resolve."""
    import warnings

    from imprint.metrics.binary import tpr_at_fpr
    from imprint.metrics.resolution import lowest_resolvable_fpr

    bound = lowest_resolvable_fpr(int((labels == 0).sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a not-measurable bound here is a bug in the set's size
        tpr = tpr_at_fpr(labels, scores, bound)
    assert tpr is not None
    return bound, round(float(tpr) * int(labels.sum()))


def evaluate(
    fp32: Mapping[str, Scores],
    bf16: Mapping[str, Scores],
    labels: Mapping[str, Sequence[int] | np.ndarray],
) -> dict[str, Any]:
    """The gate for every column of every set: ``fp32[set][column]`` against ``bf16[set][column]``;
    ``labels[set]`` (1 = member) for the sets that have them (AUC and TPR are read there).

    Returns ``{"passed", "columns": {column: {"spearman": {set: r}, "auc_diff": {set: d},
    "tpr_diff_texts": {set: n}, "passed"}}, "worst": {...}}``.
    """
    from imprint.metrics.binary import roc_auc_score

    columns: dict[str, dict[str, Any]] = {}
    for name, ref in fp32.items():
        for col, values in ref.items():
            ours = np.asarray(bf16[name][col], float)
            entry = columns.setdefault(col, {"spearman": {}, "auc_diff": {}, "tpr_diff_texts": {}})
            entry["spearman"][name] = round(spearman(values, ours), 6)
            if name in labels:
                y = np.asarray(labels[name], int)
                auc = roc_auc_score(y, values) - roc_auc_score(y, ours)
                entry["auc_diff"][name] = round(abs(float(auc)), 6)
                bound, tp32 = tpr_texts_at_lowest_fpr(y, np.asarray(values, float))
                _, tp16 = tpr_texts_at_lowest_fpr(y, ours)
                entry["tpr_diff_texts"][name] = abs(tp32 - tp16)
                entry.setdefault("tpr_fpr_bound", {})[name] = round(bound, 6)
    for entry in columns.values():
        entry["passed"] = (
            min(entry["spearman"].values()) >= GATE_SPEARMAN
            and max(entry["auc_diff"].values(), default=0.0) <= GATE_AUC
            and max(entry["tpr_diff_texts"].values(), default=0) <= GATE_TPR_TEXTS
        )
    return {
        "passed": all(e["passed"] for e in columns.values()),
        "columns": columns,
        "worst": worst(columns),
    }


def worst(columns: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The weakest figure of each criterion: (column, set, value)."""
    cells: dict[str, list[tuple[str, str, Any]]] = {
        key: [(col, s, v) for col, e in columns.items() for s, v in e[key].items()]
        for key in ("spearman", "auc_diff", "tpr_diff_texts")
    }

    def third(cell: tuple[str, str, Any]) -> float:
        return float(cell[2])

    lowest: tuple[str, str, Any] = min(cells["spearman"], key=third)
    out: dict[str, Any] = {"spearman": list(lowest)}
    for name in ("auc_diff", "tpr_diff_texts"):
        found: list[tuple[str, str, Any]] = cells[name]
        out[name] = list(sorted(found, key=third)[-1]) if found else None
    return out


def summary(result: Mapping[str, Any]) -> str:
    """One line: the weakest figure of each criterion against its bound."""
    w = result["worst"]
    parts = [f"lowest Spearman {w['spearman'][2]:.5f} ({w['spearman'][0]}, {w['spearman'][1]}) "
             f"vs >= {GATE_SPEARMAN}"]  # fmt: skip
    if w.get("auc_diff"):
        parts.append(f"largest |AUC diff| {w['auc_diff'][2]:.4f} ({w['auc_diff'][0]}) "
                     f"vs <= {GATE_AUC}")  # fmt: skip
    if w.get("tpr_diff_texts"):
        parts.append(f"largest TPR diff {w['tpr_diff_texts'][2]} text(s) "
                     f"({w['tpr_diff_texts'][0]}) vs <= {GATE_TPR_TEXTS}")  # fmt: skip
    return "; ".join(parts)


def load_results(path: Path = GATE_FILE) -> dict[str, Any]:
    """Recorded gates: ``{family: {"fingerprint", "dims", "cpu_kinds": {unit: gate}}}``."""
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")).get("families", {}))


def find_gate(
    families: Mapping[str, Any], fingerprint: str | None, unit: str
) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """(family, family record, gate) for these weights on this CPU kind, or None."""
    for family, record in families.items():
        if fingerprint and record.get("fingerprint") == fingerprint:
            gate = record.get("cpu_kinds", {}).get(unit)
            return (family, record, gate) if gate is not None else None
    return None


def record(
    family: str,
    fingerprint: str,
    dims: Mapping[str, int],
    unit: str,
    gate: Mapping[str, Any],
    *,
    bf16_path: str = BF16_PATH,
    path: Path = GATE_FILE,
) -> None:
    """Write one family's gate on one CPU kind into ``path`` (everything else kept);
    ``bf16_path`` is the scoring path it was measured on (the backend's scoring variant), so a
    gate of any other path never counts for the default one."""
    families = load_results(path)
    entry = families.get(family, {})
    if entry.get("fingerprint") != fingerprint:  # new weights: gates of the old ones are void
        entry = {}
    kinds = dict(entry.get("cpu_kinds", {}))
    kinds[unit] = {"bf16_path": bf16_path, **gate}
    families[family] = {"fingerprint": fingerprint, "dims": dict(dims), "cpu_kinds": kinds}
    about = (
        "bf16 accuracy gates per model family and CPU kind, written by benchmarks/bench_bf16.py "
        "--record-gate; read by imprint.backends.dtype_choice (re-measure, do not edit)"
    )
    text = json.dumps({"about": about, "families": families}, indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
