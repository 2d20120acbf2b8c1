"""Size (and power) of "an attack beats the text"
(:func:`imprint.diagnostics.blind_verdict.attack_beats_text`) with DeLong alone and with the
hull of DeLong and the corrected CV interval over the blind suite's folds.

Each data set: 50 + 50 texts stood in by 20 Gaussian features; m blind classifiers, each a
nearest-centroid direction fitted by stratified 5-fold cross-validation (numpy, so thousands of
data sets take seconds); the strongest by out-of-fold AUC is the blind column. The first
classifier's features carry ``--shift`` (added to 5 features of the members), the others none.
The attack's scores are Gaussian with true AUC equal to the shifted classifier's mean
out-of-fold AUC (measured on 300 pilot sets) plus ``--gain``: ``--gain 0`` is the null's
boundary (a size), a positive gain a power.

Run: nice -n 10 python benchmarks/bench_beats_text.py [--sets 2000] [--classifiers 1]
     [--shift 0] [--gain 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from imprint.diagnostics.blind_verdict import attack_beats_text  # noqa: E402
from imprint.metrics.binary import roc_auc_score  # noqa: E402

N_PER_CLASS, N_FEATURES, N_FOLDS = 50, 20, 5


def out_of_fold(
    rng: np.random.Generator, y: np.ndarray, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    """One nearest-centroid classifier's out-of-fold scores and each text's test fold."""
    x = rng.normal(size=(y.size, N_FEATURES))
    x[:, :5] += shift * y[:, None]
    folds = np.empty(y.size, dtype=int)
    for cls in (0, 1):
        folds[y == cls] = rng.permutation(int((y == cls).sum())) % N_FOLDS
    scores = np.empty(y.size)
    for f in range(N_FOLDS):
        train, test = folds != f, folds == f
        scores[test] = x[test] @ (x[train & (y == 1)].mean(0) - x[train & (y == 0)].mean(0))
    return scores, folds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=2000)
    ap.add_argument("--classifiers", type=int, default=1)
    ap.add_argument("--shift", type=float, default=0.0)
    ap.add_argument("--gain", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args()
    y = np.repeat([1, 0], N_PER_CLASS)
    pilot = float(
        np.mean(
            [roc_auc_score(y, out_of_fold(np.random.default_rng(1000 + i), y, args.shift)[0])
             for i in range(300)]
        )
    )  # fmt: skip
    target = min(max(pilot, 0.5) + args.gain, 0.999)
    d = np.sqrt(2) * norm.ppf(target)
    rng = np.random.default_rng(args.seed)
    counts = {"DeLong alone": 0, "hull with corrected CV": 0}
    start = time.time()
    for _ in range(args.sets):
        shifts = [args.shift] + [0.0] * (args.classifiers - 1)
        blind = max((out_of_fold(rng, y, s) for s in shifts), key=lambda c: roc_auc_score(y, c[0]))
        attack = rng.normal(size=y.size) + d * y
        counts["DeLong alone"] += attack_beats_text(y, attack, blind[0]).beats_text
        counts["hull with corrected CV"] += attack_beats_text(
            y, attack, blind[0], folds=blind[1]
        ).beats_text
    print(
        f"{N_PER_CLASS}+{N_PER_CLASS} texts, strongest of {args.classifiers}, shift "
        f"{args.shift} (blind mean OOF AUC {pilot:.3f}), attack true AUC {target:.3f}, "
        f"{args.sets} sets, {time.time() - start:.0f} s:"
    )
    for rule, k in counts.items():
        rate = k / args.sets
        se = np.sqrt(rate * (1 - rate) / args.sets)
        print(f"  'beats the text' ({rule}): {rate:.3f} +- {se:.3f} (nominal 0.025 at gain 0)")


if __name__ == "__main__":
    main()
