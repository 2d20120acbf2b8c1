"""Issue 37, items 6, 7 and 11: figures at the edge of what the data can carry.

- TPR at FPR t is read with k = floor(t n) false positives allowed; with k < 4 its interval
  under-covers (the threshold's real FPR is about (k+1)/(n+1)), so it is not measurable.
- A bootstrap that collapses (every resample gives one value) is replaced by a score bound.
- Ties that decide a TPR threshold are reported; the share of tied scores is recorded.
- The paired bootstrap's interval on documents is BCa over documents.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from imprint.metrics import bootstrap_metrics, min_nonmembers, tpr_at_fpr
from imprint.metrics._validation import NotMeasurableWarning, allowed_false_positives

BOUNDS = (0.001, 0.01, 0.05, 0.1, 0.25)


@pytest.mark.parametrize("bound", BOUNDS)
def test_min_nonmembers_is_the_smallest_n_allowing_four_false_positives(bound: float) -> None:
    brute = next(n for n in range(1, 10_000) if allowed_false_positives(bound, n) >= 4)
    assert min_nonmembers(bound) == brute


def test_tpr_is_reported_only_where_four_false_positives_are_allowed() -> None:
    rng = np.random.default_rng(0)
    for n_neg in (9, 10, 15, 19, 20, 39, 40, 79, 80, 100, 399, 400):
        labels = np.r_[np.ones(30, int), np.zeros(n_neg, int)]
        scores = rng.normal(size=labels.size) + labels
        s = bootstrap_metrics(labels, scores, n_resamples=20, fpr_bounds=(0.01, 0.05, 0.1))
        for bound in (0.01, 0.05, 0.1):
            resolvable = allowed_false_positives(bound, n_neg) >= 4
            assert (s.tpr(bound) is not None) == resolvable, (n_neg, bound)
            assert (bound in s.not_measurable) != resolvable
            if not resolvable:
                assert "4 false positives" in s.not_measurable[bound]
                with pytest.warns(NotMeasurableWarning):
                    assert tpr_at_fpr(labels, scores, bound) is None


def test_tpr_at_one_percent_with_100_nonmembers_is_not_measurable() -> None:
    """The outside review's case: k = 1 covered 0.82-0.90 at nominal 0.95."""
    rng = np.random.default_rng(1)
    labels = np.r_[np.ones(100, int), np.zeros(100, int)]
    scores = rng.normal(size=200) + labels
    s = bootstrap_metrics(labels, scores, n_resamples=50, fpr_bounds=(0.01, 0.1))
    assert s.tpr(0.01) is None and "400 non-members" in s.not_measurable[0.01]
    assert s.tpr(0.1) is not None  # k = 10


def test_collapsed_auc_bootstrap_gives_a_score_bound_not_a_point() -> None:
    """8 members all above 8 non-members: every resample has AUC 1, the percentile and BCa
    intervals are [1, 1]; the Wilson bound with van Dantzig's variance bound at n = 8 is not."""
    labels = np.r_[np.ones(8, int), np.zeros(8, int)]
    scores = np.r_[np.arange(8) + 10.0, np.arange(8.0)]
    s = bootstrap_metrics(labels, scores, n_resamples=200, fpr_bounds=())
    z = 1.959963984540054
    assert s.auc.estimate == 1.0 and s.auc.high == 1.0
    assert s.auc.low == pytest.approx(8 / (8 + z * z))
    assert s.auc.basis is not None and "collapsed" in s.auc.basis
    assert s.auc.to_dict()["basis"] == s.auc.basis
    # an ordinary interval carries no basis, and its dict is unchanged
    mixed = bootstrap_metrics(labels, np.r_[scores[:8] - 5, scores[8:]], n_resamples=200)
    assert mixed.auc.basis is None and "basis" not in mixed.auc.to_dict()


def test_ties_that_decide_a_threshold_are_reported() -> None:
    """30 of 200 scores tied at the top (15 members, 15 non-members): TPR@5 % (5 false
    positives allowed) reads 0 in every resample; the tie is named and the interval is a
    score bound over the members, not [0, 0]."""
    rng = np.random.default_rng(2)
    labels = np.r_[np.ones(100, int), np.zeros(100, int)]
    scores = rng.normal(size=200) + 0.5 * labels
    scores[np.r_[0:15, 100:115]] = 10.0
    s = bootstrap_metrics(labels, scores, n_resamples=200, fpr_bounds=(0.05,))
    assert s.tied_share == pytest.approx(30 / 200)
    tpr = s.tpr(0.05)
    assert tpr is not None and tpr.estimate == 0.0 and tpr.high > 0.0
    assert tpr.basis is not None
    note = s.tie_decides[0.05]
    assert "30 scores tied" in note and "15 members" in note and "0.150" in note
    cell = s.to_dict()["tpr@5%"]
    assert cell["ties"] == note and cell["basis"] == tpr.basis
    assert s.to_dict()["tied_share"] == pytest.approx(0.15)


def test_untied_scores_record_no_tie_note() -> None:
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(100, int), np.zeros(100, int)]
    s = bootstrap_metrics(labels, rng.normal(size=200) + labels, n_resamples=50)
    assert s.tied_share == 0.0 and s.tie_decides == {}


def test_score_bound_and_tie_note_survive_metrics_json() -> None:
    from imprint.evaluation.columns import summary_from_dict

    labels = np.r_[np.ones(8, int), np.zeros(8, int)]
    scores = np.r_[np.arange(8) + 10.0, np.arange(8.0)]
    s = bootstrap_metrics(labels, scores, n_resamples=100)
    back = summary_from_dict(s.to_dict(), "metrics.json")
    assert back.auc == s.auc and back.tied_share == s.tied_share


def test_paired_bootstrap_on_documents_reads_the_expanded_level() -> None:
    """The percentile interval of the paired bootstrap was too narrow with few documents (size
    0.076 at alpha 0.05 on 15 + 15); it is read at Hesterberg's expanded level for K units."""
    from scipy.stats import norm
    from scipy.stats import t as student_t

    from imprint.metrics.paired import expanded_level, paired_bootstrap, paired_bootstrap_aucs
    from imprint.metrics.paired_calibration import simulate_paired

    want = 2 * norm.cdf(math.sqrt(15 / 14) * student_t.ppf(0.975, 14)) - 1
    assert expanded_level(0.95, 15) == pytest.approx(want) and 0.97 < want < 0.975
    assert expanded_level(0.95, 10_000) == pytest.approx(0.95, abs=1e-3)
    rng = np.random.default_rng(4)
    labels, a, b, groups = simulate_paired(rng, n_members=15, n_nonmembers=15, seqs_per_doc=5,
                                           within_doc=0.5)  # fmt: skip
    iv = paired_bootstrap(labels, a, b, groups=groups, n_resamples=400, seed=0)
    boot = paired_bootstrap_aucs(labels, np.stack([a, b]), groups=groups, n_resamples=400, seed=0)
    alpha = 1 - want
    low, high = np.quantile(boot[0] - boot[1], [alpha / 2, 1 - alpha / 2])
    assert (iv.low, iv.high) == pytest.approx((low, high))
    pct = paired_bootstrap(labels, a, b, groups=groups, n_resamples=400, seed=0,
                           interval="percentile")  # fmt: skip
    assert iv.low < pct.low and pct.high < iv.high


def test_compare_scores_records_the_expanded_interval() -> None:
    from imprint.metrics.paired_calibration import simulate_paired
    from imprint.metrics.pairwise import compare_scores

    rng = np.random.default_rng(6)
    labels, a, b, groups = simulate_paired(rng, n_members=15, n_nonmembers=15, seqs_per_doc=4,
                                           within_doc=0.5)  # fmt: skip
    out = compare_scores(labels, {"a": a, "b": b}, groups=groups, n_resamples=300)
    assert out.to_dict()["bootstrap"] == "paired_expanded_percentile"
    assert "expanded percentile" in out.describe()


# ---------------------------------------------------------------- the calibration suite's rows


def test_tpr_at_the_edge_covers_and_the_old_edge_did_not() -> None:
    """Quick variants of the suite's tpr_edge rows: at k = 4 (40 non-members, 400 members,
    AUC 0.9) the interval covers; at the old rule's edge (k = 1: 100 + 100 at 1 %) it does not
    (0.82 over 1,000 data sets in the full suite)."""
    from imprint.calibration.edges import _edge_row

    (edge,) = _edge_row(150, 21, 0.1, 0.9, 10)
    assert edge.passed and edge.figure.startswith("sequence TPR@10% FPR at the edge, k = 4")
    (old,) = _edge_row(300, 22, 0.01, 0.9, 1, rule=1)
    assert old.method.startswith("OLD") and not old.expect_pass
    assert not old.passed and old.measured < 0.9, old


def test_document_tpr_truth_is_the_population_tpr() -> None:
    from imprint.calibration.edges import doc_tpr_truth

    rng = np.random.default_rng(0)
    n = 400_000
    m = rng.integers(4, 17, size=2 * n)
    scores = rng.normal(size=2 * n) + rng.normal(size=2 * n) / np.sqrt(m)
    scores[:n] += 0.8
    threshold = np.quantile(scores[n:], 0.9)
    assert np.mean(scores[:n] > threshold) == pytest.approx(
        doc_tpr_truth(0.1, 0.8, 1.0, (4, 16)), abs=4e-3
    )


def test_document_tpr_edge_row_covers() -> None:
    from imprint.calibration.edges import rows_doc_tpr_edge

    (row,) = rows_doc_tpr_edge(120, 23, b=200)
    assert row.passed and "40 + 40 documents" in row.figure, row


def test_collapsed_auc_row_covers_and_the_point_did_not() -> None:
    from imprint.calibration.edges import rows_degenerate

    new, old = rows_degenerate(200, 24, b=200)
    assert new.passed, new
    assert not old.passed and not old.expect_pass and old.measured < 0.85, old


def test_paired_document_rows_are_in_the_suite() -> None:
    from imprint.calibration import SUITE
    from imprint.calibration.hooks import rows_paired_documents

    assert {"tpr_edge", "document_tpr_edge", "degenerate", "paired_documents"} <= {
        e.name for e in SUITE
    }
    rows = rows_paired_documents(20, 0)
    assert [r.kind for r in rows] == ["size"] * 3 and not rows[2].expect_pass
    assert "expanded percentile" in rows[1].method and rows[2].method.startswith("OLD")


# ---------------------------------------------------------------- in a run's report


def test_run_names_score_bounds_and_deciding_ties_for_groups_and_columns() -> None:
    """The demo's "AUC by group": 8 canaries all above 8 non-members printed 1.000 [1.000,
    1.000]; the group's interval is now a score bound, said in the cell and a run warning."""
    from types import SimpleNamespace

    from imprint.data import Sample
    from imprint.evaluation.evaluate import evaluate_scores
    from imprint.game.demo_checks import _fmt
    from imprint.report.cells import fmt

    labels = [1] * 8 + [0] * 8 + [1, 0] * 50
    group = ["canary x8"] * 16 + ["pool"] * 100
    rng = np.random.default_rng(7)
    loss = np.r_[np.arange(8) + 10.0, np.arange(8.0), rng.normal(size=100)]
    loss[16:46] = 5.0  # 30 pool scores tied (15 members, 15 non-members) at 5.0
    rows = enumerate(zip(labels, group, strict=True))
    samples = [Sample(f"s{i}", f"t{i}", y, {"g": g}) for i, (y, g) in rows]
    config = SimpleNamespace(n_bootstrap=200, seed=0, blind=False, breakdown="g")
    metrics = evaluate_scores(samples, {"loss": loss}, config=config)
    canary = metrics.breakdown.groups["canary x8"]["loss"]
    assert canary.auc.estimate == 1.0 and canary.auc.low < 0.7 and canary.auc.basis
    assert fmt(canary.auc).endswith("(score bound)")
    assert "score bound" in _fmt(canary.auc.to_dict())
    bounds = [w.message for w in metrics.warnings if w.kind == "score_bound"]
    assert any("loss in g=canary x8: AUC 1.000" in m for m in bounds), bounds
    pool = metrics.breakdown.groups["pool"]["loss"]
    assert pool.tie_decides and pool.tied_share == pytest.approx(0.3)
    ties = [w.message for w in metrics.warnings if w.kind == "ties_decide_threshold"]
    assert any("loss in g=pool" in m and "30 scores tied at 5" in m for m in ties), ties


def test_bad_fpr_bounds_are_refused_in_one_line(tmp_path) -> None:
    """Hostile pass: --fprs nan / inf / 1.5 crashed in the resolution rule (traceback or
    "cannot convert float NaN to integer"); a repeated bound gave two identical columns."""

    from typer.testing import CliRunner

    from imprint.cli import app as diagnostics_app
    from imprint.errors import ConfigError

    for bad in (math.nan, math.inf, 1.5, -0.1):
        with pytest.raises(ConfigError, match="FPR bound must be a fraction"):
            min_nonmembers(bad)
    for k in (-1, 2.5, "4", True):
        with pytest.raises(ConfigError, match="min_false_positives must be"):
            bootstrap_metrics([1, 0] * 50, np.arange(100.0), n_resamples=10, min_false_positives=k)
    from score_folders import write_scores as _run

    a = _run(tmp_path / "a", [0] * 20 + [1] * 5, {"loss": [*range(1, 21), *range(30, 35)]})
    b = _run(tmp_path / "b", [0] * 10 + [1] * 4, {"loss": [*range(15, 25), 18, 25, 26, 27]})
    for fprs, message in (("nan", "'nan', is not a valid fraction"),
                          ("0.1,inf", "item 2, 'inf', is not a valid fraction"),
                          ("1.5", "'1.5', is not a valid fraction"),
                          ("0.2,0.2", "repeats an FPR")):  # fmt: skip
        result = CliRunner().invoke(diagnostics_app, ["compare", str(a), str(b), "--fprs", fprs])
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and "--fprs" in text and message in text, text
        assert "Traceback" not in text


def test_identical_score_bounds_share_one_warning_naming_every_place() -> None:
    """The demo printed 37 'is a score bound' lines, one per canary group and column, most
    of them the same AUC 1.000 [0.676, 1.000] for the same reason: one line names them all."""
    from types import SimpleNamespace

    from imprint.data import Sample
    from imprint.evaluation.evaluate import evaluate_scores

    labels = [1] * 8 + [0] * 8 + [1, 0] * 50
    group = ["canary x8"] * 16 + ["pool"] * 100
    rng = np.random.default_rng(3)
    perfect = np.r_[np.arange(8) + 10.0, np.arange(8.0), rng.normal(size=100)]
    scores = {"loss": perfect, "zlib": perfect * 2.0, "min_k": perfect + 1.0}
    rows = enumerate(zip(labels, group, strict=True))
    samples = [Sample(f"s{i}", f"t{i}", y, {"g": g}) for i, (y, g) in rows]
    config = SimpleNamespace(n_bootstrap=200, seed=0, blind=False, breakdown="g")
    metrics = evaluate_scores(samples, scores, config=config)
    bounds = [w.message for w in metrics.warnings if w.kind == "score_bound"]
    shared = [m for m in bounds if "AUC 1.000" in m]
    assert len(shared) == 1, bounds
    assert shared[0].startswith("3 figures read AUC 1.000")
    assert all(f"{c} in g=canary x8" in shared[0] for c in scores)
