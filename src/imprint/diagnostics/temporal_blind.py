"""The SoK blind baseline on each bucket of a built temporal benchmark.

A temporal split is only a membership benchmark if the text alone cannot tell the two sides
apart. The SoK bag-of-words forest (:mod:`imprint.diagnostics.blind`) is scored out of fold
(:func:`imprint.diagnostics.blind_suite.run_blind_suite`, stratified K folds) with a stratified
bootstrap interval on its AUC, widened for the folds' training overlap
(:func:`imprint.metrics.cv_interval.widen_auc`); one classifier is chosen in advance, so no
selection adjustment applies. Its interval is read by the run report's rule
(:mod:`imprint.diagnostics.blind_verdict`): a shift is shown when it lies above 0.5, none is
detectable when it contains 0.5 and stays at or below 0.6, else the bucket is inconclusive.

Every bucket is a test, and the terminal warns when *any* bucket shows a shift, so the buckets
of one call are one family: each bucket's interval is at the Bonferroni level
``1 - (1 - FAMILY_CONFIDENCE) / B`` over the B buckets scored (B = 4: 98.75 %), which keeps the
chance of a false "shift" on any bucket at most 2.5 % (one-sided) when no bucket has one.
Bonferroni rather than Holm: the verdict reads an interval, and Bonferroni's intervals hold
simultaneously (Holm's step-down has no such intervals). Measured by
``tests/test_temporal_blind.py`` (a seeded simulation of null buckets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from imprint.data.temporal import Bucket
from imprint.diagnostics.blind_suite import BlindSuiteResult, run_blind_suite
from imprint.diagnostics.blind_verdict import blind_verdict
from imprint.errors import DataError
from imprint.metrics import Interval, bootstrap_metrics
from imprint.metrics.cv_interval import widen_auc

__all__ = ["BASELINE", "CORRECTION", "FAMILY_CONFIDENCE", "blind_on_buckets", "bucket_confidence"]

BASELINE = "sok_bag_of_words"
#: the chance that no bucket's interval misses its AUC, over all buckets of one call
FAMILY_CONFIDENCE = 0.95
#: the multiplicity correction across buckets, as the manifest and terminal name it
CORRECTION = "bonferroni"


def bucket_confidence(n_buckets: int, family: float = FAMILY_CONFIDENCE) -> float:
    """Each bucket's interval level: Bonferroni over ``n_buckets``, ``1 - (1 - family) / B``."""
    return 1.0 - (1.0 - family) / max(1, n_buckets)


def blind_on_buckets(
    buckets: Sequence[Bucket],
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
    n_folds: int = 5,
    advance: Callable[[int], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """``{words: entry}``: each bucket's out-of-fold SoK AUC as ``auc``/``low``/``high`` at
    ``confidence`` (Bonferroni over the buckets given: ``correction``, ``n_buckets``,
    ``family_confidence``), its blind ``verdict`` on that interval
    (:func:`~imprint.diagnostics.blind_verdict.blind_verdict`: ``shift``, ``no_shift`` or
    ``inconclusive``) and ``near_chance`` (its state is ``no_shift``), the members' count
    ``n_members`` and non-members' ``n_nonmembers`` and the most telling words (weight > 0
    points to members); or ``{"error": why}`` when the bucket is too small or has no shared
    vocabulary. ``advance(1)`` is called after each bucket."""
    level = bucket_confidence(len(buckets))
    family = {
        "correction": CORRECTION,
        "n_buckets": len(buckets),
        "family_confidence": FAMILY_CONFIDENCE,
    }
    out: dict[int, dict[str, Any]] = {}
    for bucket in buckets:
        texts, labels = bucket.texts_labels()
        entry = _one(
            texts, labels, seed=seed, n_bootstrap=n_bootstrap, n_folds=n_folds, level=level
        )
        out[bucket.words] = {**entry, **family} if "verdict" in entry else entry
        if advance is not None:
            advance(1)
    return out


def _corrected_auc(
    result: BlindSuiteResult, labels: list[int], *, level: float, seed: int, n_bootstrap: int
) -> Interval:
    """The forest's AUC interval at ``level``: the same seeded resamples as its 95 % summary,
    read at the corrected level, widened over the same folds."""
    y = np.asarray(labels, dtype=np.int64)
    summary = bootstrap_metrics(
        y, result.scores, n_resamples=n_bootstrap, seed=seed, confidence=level, fpr_bounds=()
    )
    folds = result.folds
    if folds is not None:
        summary = widen_auc(
            summary, y, result.scores, [np.flatnonzero(folds == f) for f in np.unique(folds)]
        )
    return summary.auc


def _one(
    texts: list[str], labels: list[int], *, seed: int, n_bootstrap: int, n_folds: int, level: float
) -> dict[str, Any]:
    base = {
        "baseline": BASELINE,
        "n_members": sum(labels),
        "n_nonmembers": len(labels) - sum(labels),
    }
    try:
        (result,) = run_blind_suite(
            texts,
            labels,
            seed=seed,
            n_folds=n_folds,
            n_bootstrap=n_bootstrap,
            baselines=(BASELINE,),
            sok_protocol=False,
        )
    except DataError as err:
        return {**base, "error": str(err)}
    if result.summary is None:
        return {**base, "error": result.error or "the forest could not be fitted"}
    auc = _corrected_auc(result, labels, level=level, seed=seed, n_bootstrap=n_bootstrap)
    # the run report's rule (three states); the SoK forest is fixed in advance: m = 1
    verdict = blind_verdict(auc, classifier=BASELINE, n_classifiers=1, confidence=level)
    return {
        **base,
        "auc": auc.estimate,
        "low": auc.low,
        "high": auc.high,
        "confidence": level,
        "n_folds": n_folds,
        "near_chance": verdict.state == "no_shift",
        "verdict": verdict.to_dict(),
        "top_features": [[f, w] for f, w in result.top_features[:5]],
    }
