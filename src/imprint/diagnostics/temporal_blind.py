"""The SoK blind baseline on each bucket of a built temporal benchmark.

A temporal split is only a membership benchmark if the text alone cannot tell the two sides
apart. The SoK bag-of-words forest (:mod:`imprint.diagnostics.blind`) is scored out of fold
(:func:`imprint.diagnostics.blind_suite.run_blind_suite`, stratified K folds) with a 95 %
stratified bootstrap interval on its AUC; one classifier is chosen in advance, so no selection
adjustment applies. Its interval is read by the run report's rule
(:mod:`imprint.diagnostics.blind_verdict`): a shift is shown when it lies above 0.5, none is
detectable when it contains 0.5 and stays at or below 0.6, else the bucket is inconclusive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from imprint.data.temporal import Bucket
from imprint.diagnostics.blind_suite import run_blind_suite
from imprint.diagnostics.blind_verdict import blind_verdict
from imprint.errors import DataError

__all__ = ["BASELINE", "blind_on_buckets"]

BASELINE = "sok_bag_of_words"


def blind_on_buckets(
    buckets: Sequence[Bucket],
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
    n_folds: int = 5,
    advance: Callable[[int], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """``{words: entry}``: each bucket's out-of-fold SoK AUC as ``auc``/``low``/``high``, its
    blind ``verdict`` (:func:`~imprint.diagnostics.blind_verdict.blind_verdict`: ``shift``,
    ``no_shift`` or ``inconclusive``) and ``near_chance`` (its state is ``no_shift``), the
    members' count ``n_members`` and non-members' ``n_nonmembers`` and the most telling words
    (weight > 0 points to members); or ``{"error": why}`` when the bucket is too small or has
    no shared vocabulary. ``advance(1)`` is called after each bucket."""
    out: dict[int, dict[str, Any]] = {}
    for bucket in buckets:
        texts, labels = bucket.texts_labels()
        out[bucket.words] = _one(texts, labels, seed=seed, n_bootstrap=n_bootstrap, n_folds=n_folds)
        if advance is not None:
            advance(1)
    return out


def _one(
    texts: list[str], labels: list[int], *, seed: int, n_bootstrap: int, n_folds: int
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
    auc = result.summary.auc
    # the run report's rule (three states); the SoK forest is fixed in advance: m = 1
    verdict = blind_verdict(
        auc, classifier=BASELINE, n_classifiers=1, confidence=result.summary.confidence
    )
    return {
        **base,
        "auc": auc.estimate,
        "low": auc.low,
        "high": auc.high,
        "confidence": result.summary.confidence,
        "n_folds": n_folds,
        "near_chance": verdict.state == "no_shift",
        "verdict": verdict.to_dict(),
        "top_features": [[f, w] for f, w in result.top_features[:5]],
    }
