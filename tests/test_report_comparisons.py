"""A run's paired comparisons: every pair in metrics.json (read back unchanged), the report's
table of each attack against the best and against LOSS, and documents as the resampled unit."""

from __future__ import annotations

import json
import math

import numpy as np

from imprint.data import Sample
from imprint.evaluation.comparisons import comparisons_from_dict, run_comparisons
from imprint.report.comparisons import comparison_blocks, comparison_rows


def _samples_and_scores(n: int = 120):
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], n // 2)
    samples = [Sample(f"s{i}", f"text {i}", int(lab), {"doc_id": f"d{i // 3}"})
               for i, lab in enumerate(labels)]  # fmt: skip
    scores = {
        "loss": rng.normal(size=n) + 0.3 * labels,
        "min_k": rng.normal(size=n) + 2.0 * labels,
        "zlib": rng.normal(size=n) + 0.35 * labels,
        "recall": np.where(np.arange(n) < 5, np.nan, rng.normal(size=n) + 0.3 * labels),
    }
    return samples, scores


def test_every_pair_is_kept_and_read_back_unchanged():
    samples, scores = _samples_and_scores()
    result = run_comparisons(samples, scores, n_bootstrap=100, seed=0)
    assert result is not None and result.n_pairs == 6 and result.resamples == "texts"
    data = json.loads(json.dumps(result.to_dict()))
    back = comparisons_from_dict(data, "comparisons")
    assert back.to_dict() == result.to_dict()
    assert (
        run_comparisons(samples[:3], {"loss": scores["loss"][:3]}, n_bootstrap=10, seed=0) is None
    )


def test_report_shows_each_attack_against_the_best_and_against_loss():
    samples, scores = _samples_and_scores()
    result = run_comparisons(samples, scores, n_bootstrap=100, seed=0)
    header, rows = comparison_rows(result)
    pairs = {(r[0], r[1]) for r in rows}
    # best is min_k: against the other three; then loss against zlib and recall
    assert pairs == {("min_k", "loss"), ("min_k", "zlib"), ("min_k", "recall"),
                     ("loss", "zlib"), ("loss", "recall")}  # fmt: skip
    verdicts = {(r[0], r[1]): r[-1] for r in rows}
    assert verdicts[("min_k", "loss")] == "min_k better"
    assert verdicts[("loss", "zlib")] == "no difference shown"
    assert "Bonferroni" in header[3] and "99.1667%" in header[3]  # 1 - 0.05 / 6
    (_, title), (_, text), _ = comparison_blocks(result)
    assert title == "Paired comparisons" and "6 pair(s)" in text and "same texts" in text
    recall = result.between("loss", "recall")
    assert recall.n_members + recall.n_nonmembers == 115  # its 5 NaN samples left out


def test_document_runs_resample_documents():
    samples, scores = _samples_and_scores()
    groups = np.array([s.meta["doc_id"] for s in samples])
    result = run_comparisons(samples, scores, n_bootstrap=50, seed=0, groups=groups)
    assert result.resamples == "documents" and result.clustered
    pair = result.between("min_k", "loss")
    assert pair.n_member_units == 20 and pair.n_nonmember_units == 20
    assert not math.isnan(pair.p_value)
    assert "cluster-robust" in result.describe()


def test_run_metrics_keep_the_comparisons_in_metrics_json():
    from imprint.evaluation.results import RunMetrics

    samples, scores = _samples_and_scores()
    compared = run_comparisons(samples, scores, n_bootstrap=50, seed=0)
    metrics = RunMetrics(attacks={}, comparisons=compared)
    data = json.loads(json.dumps(metrics.to_dict()))
    assert data["comparisons"]["n_pairs"] == 6 and data["comparisons"]["resamples"] == "texts"
    assert RunMetrics.from_dict(data).to_dict() == data
    assert "comparisons" not in RunMetrics(attacks={}).to_dict()  # none with fewer than 2 columns
