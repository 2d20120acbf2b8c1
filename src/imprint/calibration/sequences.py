"""Calibration rows for sequence-level figures: the bootstrap intervals of AUC and TPR@FPR.

Generators draw scores with a known population AUC / TPR (Gaussian members shifted by ``mu``
from Gaussian non-members) in the settings the tool meets: i.i.d. texts, class imbalance, ties
(scores on a coarse grid), few non-members, and clustered sequences (a document effect shared by
a document's sequences, as in a ``--unit document`` run). Each row function takes the number of
simulations and a seed and returns its rows; ``B`` bootstrap resamples per interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from imprint.calibration.core import Row, coverage_row, share_row
from imprint.metrics import Interval, bootstrap_metrics
from imprint.metrics.resolution import MIN_FALSE_POSITIVES

__all__ = [
    "B",
    "LEVEL",
    "clustered_hits",
    "clustered_sequences",
    "coverage_hits",
    "gaussian",
    "rounded",
    "tie_auc",
    "normal_cdf",
    "normal_quantile",
    "rows_clustered",
    "rows_iid",
    "rows_resolution",
]

#: bootstrap resamples per simulated interval (the coverage, not the interval, is measured)
B = 400
#: the confidence of every interval checked here
LEVEL = 0.95


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def gaussian(
    rng: np.random.Generator, n_pos: int, n_neg: int, mu: float
) -> tuple[np.ndarray, np.ndarray]:
    labels = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    return labels, rng.normal(size=n_pos + n_neg) + mu * labels


def _covers(interval: Interval, truth: float) -> bool:
    low, high = interval.low, interval.high
    return bool(low <= truth <= high)


def tie_auc(mu: float, step: float) -> float:
    """Population AUC of scores rounded to multiples of ``step`` (ties count 1/2)."""
    grid = np.arange(-12.0, 12.0 + step, step)
    edges = np.r_[-np.inf, grid[:-1] + step / 2, np.inf]
    cdf = np.vectorize(normal_cdf)
    p_neg = np.diff(cdf(edges))
    p_pos = np.diff(cdf(edges - mu))
    below = np.cumsum(p_neg) - p_neg
    return float(np.sum(p_pos * (below + p_neg / 2)))


def coverage_hits(
    n_sims: int,
    seed: int,
    draw: Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]],
    truths: dict[str, float],
    fpr_bounds: tuple[float, ...],
    *,
    b: int = B,
    min_false_positives: int = MIN_FALSE_POSITIVES,
    widen_at_edge: bool = True,
) -> dict[str, list[bool]]:
    """Per figure ("auc", or an FPR bound as text), whether each simulation's interval held
    its truth (a figure the resolution rule withholds counts as a miss)."""
    hits: dict[str, list[bool]] = {k: [] for k in truths}
    for i in range(n_sims):
        rng = np.random.default_rng([seed, i])
        labels, scores = draw(rng)
        s = bootstrap_metrics(
            labels, scores, n_resamples=b, seed=i, fpr_bounds=fpr_bounds, confidence=LEVEL,
            min_false_positives=min_false_positives, widen_at_edge=widen_at_edge,
        )  # fmt: skip
        for key, truth in truths.items():
            interval = s.auc if key == "auc" else s.tpr(float(key))
            hits[key].append(interval is not None and _covers(interval, truth))
    return hits


def rows_iid(n_sims: int, seed: int) -> list[Row]:
    """i.i.d. texts: AUC and TPR@10 % / 1 % under an alternative, AUC under the null, class
    imbalance, ties, few non-members."""
    mu = 1.0
    auc_true = normal_cdf(mu / math.sqrt(2))
    tpr = {t: 1 - normal_cdf(normal_quantile(1 - t) - mu) for t in (0.1, 0.01)}
    rows = []
    hits = coverage_hits(
        n_sims,
        seed,
        lambda r: gaussian(r, 1000, 1000, mu),
        {"auc": auc_true, "0.1": tpr[0.1], "0.01": tpr[0.01]},
        (0.1, 0.01),
    )
    method = "stratified BCa bootstrap over texts"
    rows.append(
        coverage_row("sequence AUC, i.i.d. (1000 + 1000, AUC 0.76)", method, hits["auc"], LEVEL)
    )
    rows.append(
        coverage_row("sequence TPR@10% FPR, i.i.d. (1000 + 1000)", method, hits["0.1"], LEVEL)
    )
    rows.append(
        coverage_row("sequence TPR@1% FPR, i.i.d. (1000 + 1000)", method, hits["0.01"], LEVEL)
    )
    settings = [
        ("sequence AUC, null (100 + 100)", lambda r: gaussian(r, 100, 100, 0.0), 0.5),
        (
            "sequence AUC, imbalance (400 members + 50 non-members)",
            lambda r: gaussian(r, 400, 50, mu),
            auc_true,
        ),
        (
            "sequence AUC, ties (scores on a grid of 0.5, 150 + 150)",
            lambda r: rounded(r, 150, 150, mu, 0.5),
            tie_auc(mu, 0.5),
        ),
        ("sequence AUC, few non-members (100 + 20)", lambda r: gaussian(r, 100, 20, mu), auc_true),
    ]
    for k, (figure, draw, truth) in enumerate(settings):
        hits = coverage_hits(n_sims, seed + 1 + k, draw, {"auc": truth}, ())
        rows.append(coverage_row(figure, method, hits["auc"], LEVEL))
    return rows


def rounded(
    rng: np.random.Generator, n_pos: int, n_neg: int, mu: float, step: float
) -> tuple[np.ndarray, np.ndarray]:
    labels, scores = gaussian(rng, n_pos, n_neg, mu)
    return labels, np.round(scores / step) * step


def rows_resolution(n_sims: int, seed: int) -> list[Row]:
    """TPR at an FPR that 50 non-members cannot resolve: None with its reason, every time."""
    flags = []
    for i in range(n_sims):
        labels, scores = gaussian(np.random.default_rng([seed, i]), 50, 50, 1.0)
        s = bootstrap_metrics(labels, scores, n_resamples=20, seed=i, fpr_bounds=(0.001, 0.01))
        flags.append(all(s.tpr_at_fpr[b] is None and b in s.not_measurable for b in (0.001, 0.01)))
    method = "resolution rule: >= 4/t non-members (issue 37), else None and the reason"
    return [share_row("sequence TPR@0.1% and @1% FPR, 50 non-members", method, flags)]


def clustered_sequences(
    rng: np.random.Generator,
    n_docs: int,
    *,
    mu: float,
    tau: float,
    seqs: tuple[int, int] = (4, 16),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sequence labels, sequence scores, document of each sequence): ``n_docs`` documents,
    half members, each of 4-16 sequences; a sequence's score is its document's effect (sd
    ``tau``) plus its own noise (sd 1), plus ``mu`` for members. Population sequence AUC:
    Phi(mu / sqrt(2 (tau^2 + 1)))."""
    doc_labels = np.arange(n_docs) % 2
    lengths = rng.integers(seqs[0], seqs[1] + 1, size=n_docs)
    docs = np.repeat(np.arange(n_docs), lengths)
    effect = rng.normal(scale=tau, size=n_docs)
    labels = doc_labels[docs]
    scores = effect[docs] + rng.normal(size=docs.size) + mu * labels
    return labels, scores, docs


def clustered_hits(
    n_sims: int, seed: int, *, grouped: bool, n_docs: int = 60, b: int = B
) -> list[bool]:
    """Whether each simulated document run's sequence-AUC interval held the population AUC:
    resampling documents (``grouped``, the run's rule) or sequences one by one (the old one)."""
    mu, tau = 0.8, 1.0
    truth = normal_cdf(mu / math.sqrt(2 * (tau**2 + 1)))
    hits = []
    for i in range(n_sims):
        labels, scores, docs = clustered_sequences(
            np.random.default_rng([seed, i]), n_docs, mu=mu, tau=tau
        )
        s = bootstrap_metrics(
            labels,
            scores,
            n_resamples=b,
            seed=i,
            fpr_bounds=(),
            groups=docs if grouped else None,
            interval="bca" if grouped else "percentile",  # OLD: the old code's interval too
        )
        hits.append(_covers(s.auc, truth))
    return hits


def rows_clustered(n_sims: int, seed: int) -> list[Row]:
    """A ``--unit document`` run's sequence AUC (60 documents of 4-16 correlated sequences)."""
    figure = "sequence AUC in a document run (60 documents x 4-16 sequences, rho 0.5)"
    return [
        coverage_row(
            figure,
            "BCa bootstrap resampling documents (the run's rule)",
            clustered_hits(n_sims, seed, grouped=True),
            LEVEL,
        ),
        coverage_row(
            figure,
            "OLD: percentile bootstrap resampling sequences one by one",
            clustered_hits(n_sims, seed, grouped=False),
            LEVEL,
            expect_pass=False,
            note="the defect of issue 20: correlated sequences resampled as independent",
        ),
    ]
