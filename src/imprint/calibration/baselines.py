"""Calibration rows for the blind baselines, threshold transfer and reference-model attacks.

- Blind baselines under the null: texts of members and non-members drawn from one word
  distribution, so every model-less classifier's true AUC is 0.5. The out-of-fold interval of a
  classifier fixed in advance must cover 0.5 at 95 %; the strongest of m classifiers, with its
  Bonferroni interval at 1 - 0.05/m, must cover 0.5 at 95 % too despite the pick. The
  classifiers are the suite's fast ones by default (the SoK forest costs ~20 s a fit here).
- Threshold transfer: a threshold set at t on set A, its FPR on set B; the interval resamples
  both sets; truth: t when A and B share a distribution, 1 - Phi(z_{1-t} - d) when B is
  shifted by d.
- LiRA and RMIA when the target is a reference-like model that saw none of the candidates
  (their pure score functions on simulated per-example signals): AUC 0.5 on average and an
  interval that covers 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from imprint.calibration.core import Row, coverage_row, info_row, mean_row
from imprint.calibration.sequences import LEVEL, normal_cdf, normal_quantile
from imprint.metrics import bootstrap_metrics, transfer_interval
from imprint.metrics import roc_auc_score as auc

__all__ = ["FAST_BLIND", "null_texts", "rows_blind", "rows_reference_attacks", "rows_transfer"]

#: the suite's classifiers cheap enough to fit hundreds of times
FAST_BLIND = ("greedy_ngrams", "date_detector")


def null_texts(rng: np.random.Generator, n: int, words: int = 20) -> list[str]:
    """``n`` texts of ``words`` words from one Zipf-like vocabulary of 200 words."""
    weights = 1 / np.arange(1, 201)
    picks = rng.choice(200, size=(n, words), p=weights / weights.sum())
    return [" ".join(f"w{j}" for j in row) for row in picks]


def rows_blind(
    n_sims: int,
    seed: int,
    *,
    n_texts: int = 60,
    baselines: Sequence[str] = FAST_BLIND,
    b: int = 200,
) -> list[Row]:
    """The fixed classifier's out-of-fold interval (the first of ``baselines``) and the
    strongest-of-m Bonferroni interval, both under the null."""
    from imprint.diagnostics.blind_suite import run_blind_suite, selected_summary

    fixed, strongest = [], []
    for i in range(n_sims):
        rng = np.random.default_rng([seed, i])
        texts = null_texts(rng, n_texts)
        labels = rng.permutation(np.arange(n_texts) % 2).tolist()
        results = run_blind_suite(
            texts, labels, seed=i, n_bootstrap=b, baselines=list(baselines), sok_protocol=False
        )
        first = results[0].summary
        fixed.append(first is not None and first.auc.low <= 0.5 <= first.auc.high)
        chosen = selected_summary(results)
        strongest.append(chosen is not None and chosen[1].auc.low <= 0.5 <= chosen[1].auc.high)
    m = len(baselines)
    return [
        coverage_row(
            f"blind baseline AUC, null ({n_texts} texts), {baselines[0]} fixed in advance",
            "5-fold out-of-fold scores, BCa over texts, hull with the corrected CV t",
            fixed,
            LEVEL,
        ),
        coverage_row(
            f"blind baseline AUC, null ({n_texts} texts), strongest of {m}",
            f"Bonferroni interval at 1 - 0.05/{m} over out-of-fold scores",
            strongest,
            LEVEL,
        ),
    ]


def rows_transfer(n_sims: int, seed: int, *, n: int = 400, b: int = 400) -> list[Row]:
    """Threshold transfer FPR intervals at t = 5 %: B like A, and B shifted by 0.3."""
    t = 0.05
    rows = []
    for shift in (0.0, 0.3):
        truth = 1 - normal_cdf(normal_quantile(1 - t) - shift)
        hits = []
        for i in range(n_sims):
            rng = np.random.default_rng([seed, i, int(shift * 10)])
            a, bb = rng.normal(size=n), rng.normal(size=n) + shift
            interval = transfer_interval(a, bb, t, n_resamples=b, seed=i)
            hits.append(interval is not None and interval.low <= truth <= interval.high)
        figure = (
            f"threshold transfer: FPR on B at a 5 % threshold from A ({n} + {n}, B shift {shift:g})"
        )
        rows.append(coverage_row(figure, "bootstrap resampling A and B", hits, LEVEL))
    return rows


def _reference_null(
    rng: np.random.Generator, n: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(target signal (n,), reference signals (k, n), IN/OUT (k, n), labels (n,)): each
    reference trained on a random half of the candidates (IN raises the signal by 0.5); the
    target, like an OUT reference, saw none of them. The claimed members are the easier half
    (a noisy split on each text's own difficulty, as a benchmark whose members differ from its
    non-members): the target's raw signal (LOSS) separates them, a reference attack that
    calibrates each text's difficulty must not."""
    from imprint.training_manifest import IN, OUT

    difficulty = rng.normal(size=n)
    member = np.where(rng.random((k, n)) < 0.5, IN, OUT)
    ref = difficulty + 0.3 * rng.normal(size=(k, n)) + 0.5 * (member == IN)
    target = difficulty + 0.3 * rng.normal(size=n)
    easier = np.argsort(np.argsort(difficulty + rng.normal(size=n)))
    labels = (easier >= n // 2).astype(int)
    return target, ref, member, labels


def rows_reference_attacks(
    n_sims: int, seed: int, *, n: int = 200, k: int = 8, b: int = 200
) -> list[Row]:
    """LiRA (online) and RMIA (online, population = the candidates' other half) AUCs when the
    target saw none of the candidates: 0.5 on average, interval covering 0.5."""
    from imprint.attacks.lira import fit_gaussians, lira_online
    from imprint.attacks.rmia import rmia_scores

    aucs: dict[str, list[float]] = {"lira": [], "rmia": [], "loss": []}
    hits: dict[str, list[bool]] = {"lira": [], "rmia": []}
    for i in range(n_sims):
        rng = np.random.default_rng([seed, i])
        target, ref, member, labels = _reference_null(rng, n, k)
        scores = {
            "lira": lira_online(target, fit_gaussians(ref, member)),
            "rmia": rmia_scores(target, ref, member, target, ref, member, offline=False),
        }
        for name, s in scores.items():
            summary = bootstrap_metrics(labels, s, n_resamples=b, seed=i, fpr_bounds=())
            aucs[name].append(summary.auc.estimate)
            hits[name].append(summary.auc.low <= 0.5 <= summary.auc.high)
        aucs["loss"].append(auc(labels, target))  # the shift the reference attacks must remove
    rows = [
        info_row(
            f"LOSS AUC on the same candidates (members the easier half; {n} candidates)",
            "the target's raw signal: the shift is real",
            float(np.mean(aucs["loss"])),
            n_sims,
        )
    ]
    for name, label in (("lira", "LiRA online"), ("rmia", "RMIA online")):
        figure = f"{label} AUC, target saw none of {n} candidates ({k} reference models)"
        rows.append(mean_row(figure, "the attack's score function", aucs[name], 0.5))
        rows.append(coverage_row(figure, "BCa bootstrap over texts", hits[name], LEVEL))
    return rows
