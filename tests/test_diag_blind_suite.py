"""Blind baseline suite: shifted vs unshifted synthetic sets, dates on WikiMIA-32, reporting."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from imprint.cli import app as diagnostics_app
from imprint.data import LabelConflictWarning
from imprint.diagnostics import blind
from imprint.diagnostics.blind_suite import (
    blind_suite_warning,
    run_blind_suite,
    strongest_blind,
)
from imprint.diagnostics.dates import find_dates
from imprint.diagnostics.greedy import fit_greedy_ngrams
from imprint.errors import ConfigError, DataError
from imprint.evaluation.blind_results import BlindFailure, BlindSuiteMetrics
from imprint.evaluation.evaluate import evaluate_blind

WIKIMIA_32 = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia" / "WikiMIA_length32.jsonl"
)
VOCAB = [f"word{i}" for i in range(60)]
FAST = ["tfidf_logreg", "date_detector", "greedy_ngrams"]


def _docs(n: int, rng: np.random.Generator, extra: str = "") -> list[str]:
    return [" ".join([*rng.choice(VOCAB, size=15), extra]).strip() for _ in range(n)]


def _shifted(n: int = 80) -> tuple[list[str], list[int]]:
    rng = np.random.default_rng(0)
    members = [f"{d} in {rng.integers(2005, 2015)}" for d in _docs(n, rng, "alpha")]
    nonmembers = [f"{d} in {rng.integers(2023, 2025)}" for d in _docs(n, rng, "beta")]
    return members + nonmembers, [1] * n + [0] * n


def _blind(data: Path, out: Path, *flags: str) -> Result:
    """``imprint diagnostics blind --data DATA [flags] --out OUT``."""
    return CliRunner().invoke(
        diagnostics_app, ["blind", "--data", str(data), *flags, "--out", str(out)]
    )


def _shifted_file(path: Path, n: int) -> Path:
    """:func:`_shifted` written as a JSONL data file."""
    texts, labels = _shifted(n)
    rows = (json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(texts, labels, strict=True))
    path.write_text("".join(rows))
    return path


def test_shifted_set_is_separable_by_every_baseline(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(blind, "N_ESTIMATORS", 50)  # the SoK forest, smaller for speed
    texts, labels = _shifted()
    results = run_blind_suite(texts, labels, n_bootstrap=200, n_folds=3, sok_protocol=False)
    assert [r.name for r in results] == [
        "sok_bag_of_words", "tfidf_logreg", "date_detector", "greedy_ngrams"
    ]  # fmt: skip
    for r in results:
        assert r.error is None and r.summary is not None
        assert r.auc > 0.95, r.name
        assert r.summary.auc.low <= r.auc <= r.summary.auc.high
        assert np.isfinite(r.scores).all()  # every sample has its out-of-fold score
    tfidf = {r.name: r for r in results}["tfidf_logreg"]
    weights = dict(tfidf.top_features)
    assert {"alpha", "beta"} & {f for f, _ in tfidf.top_features[:2]}
    assert weights.get("alpha", 1) > 0 and weights.get("beta", -1) < 0  # sign = direction
    dates = {r.name: r for r in results}["date_detector"]
    assert dict(dates.top_features)["<later date>"] < 0  # later dates point to non-members
    assert strongest_blind(results) is not None
    warning = blind_suite_warning(results)
    assert warning is not None and "distinguishable" in warning


def test_unshifted_set_is_near_chance():
    rng = np.random.default_rng(7)
    texts = _docs(400, rng)
    labels = [1, 0] * 200  # a random split of one pool
    results = run_blind_suite(texts, labels, baselines=FAST, n_bootstrap=200, n_folds=4)
    for r in results:
        assert abs(r.auc - 0.5) < 0.1, (r.name, r.auc)
    by_name = {r.name: r for r in results}
    assert by_name["date_detector"].auc == 0.5  # no dates at all: a constant score
    assert blind_suite_warning(results) is None


def test_out_of_fold_scores_never_see_their_own_label():
    # Labels independent of text, but every text unique: a model scoring its own training
    # texts would look perfect; out-of-fold scores must not.
    rng = np.random.default_rng(3)
    texts = [f"unique{i} " + " ".join(rng.choice(VOCAB, size=5)) for i in range(200)]
    labels = rng.integers(0, 2, size=200).tolist()
    (r,) = run_blind_suite(texts, labels, baselines=["tfidf_logreg"], n_bootstrap=100)
    assert r.auc < 0.65


def test_year_detector_finds_years_on_wikimia_32():
    rows = [json.loads(line) for line in WIKIMIA_32.read_text().splitlines()]
    texts, labels = [r["input"] for r in rows], [r["label"] for r in rows]
    with_year = sum(bool(find_dates(t).years) for t in texts)
    assert with_year > 0.5 * len(texts)
    assert find_dates("held in Seoul on February 18, 2023, to").latest == pytest.approx(
        2023 + 1 / 12
    )
    (r,) = run_blind_suite(texts, labels, baselines=["date_detector"], n_bootstrap=200)
    assert r.auc > 0.9
    top = [f for f, _ in r.top_features[:5]]
    assert "2023" in top
    assert dict(r.top_features)["2023"] < 0  # "2023" points to non-members


def test_greedy_decision_list():
    texts = ["red apple pie", "red apple tart", "green pear pie", "green pear tart"] * 5
    labels = np.array([1, 1, 0, 0] * 5)
    fitted = fit_greedy_ngrams(texts, labels, min_support=3)
    assert fitted.ngrams and fitted.ngrams[0] in {
        "red",
        "green",
        "apple",
        "pear",
        "red apple",
        "green pear",
        "apple pie",
        "pear pie",
    }
    scores = fitted.score(["red apple", "green pear", "blue plum"])
    assert scores[0] > 0.8 and scores[1] < 0.2 and scores[2] == pytest.approx(fitted.default)


def test_report_and_errors():
    texts, labels = _shifted(40)
    _, suite = evaluate_blind(texts, np.array(labels), seed=0, n_bootstrap=100, baselines=FAST)
    assert isinstance(suite, BlindSuiteMetrics)  # typed, straight from the suite's results
    report = suite.to_dict()
    assert report["strongest"] in FAST
    assert report["auc"]["estimate"] > 0.9 and "tpr@1%" in report
    assert set(report["baselines"]) == set(FAST)
    assert report["warning"]
    json.dumps(report)  # JSON-ready
    sok, failed_suite = evaluate_blind(texts[:3], np.array(labels[:3]), seed=0, n_bootstrap=10)
    assert isinstance(sok, BlindFailure) and isinstance(failed_suite, BlindFailure)
    assert "at least 5 texts per class" in failed_suite.error
    with pytest.raises(DataError, match="at least 5 texts per class"):
        run_blind_suite(texts[:6], [1, 1, 1, 0, 0, 0])
    with pytest.raises(ConfigError, match="unknown blind baseline"):
        run_blind_suite(texts, labels, baselines=["magic"])
    (failed,) = run_blind_suite(["a"] * 10, [1, 0] * 5, baselines=["tfidf_logreg"])
    assert failed.error and failed.summary is None and math.isnan(failed.auc)
    assert strongest_blind([failed]) is None


def test_cli_blind(tmp_path: Path):
    data = _shifted_file(tmp_path / "d.jsonl", 30)
    out = tmp_path / "blind.json"
    baselines = ("--baseline", "date_detector", "--baseline", "greedy_ngrams")
    result = _blind(data, out, *baselines, "--bootstrap", "100")
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())
    assert saved["strongest"] in {"date_detector", "greedy_ngrams"}
    assert "warning" in result.output


def test_cli_blind_dedupes_like_run(tmp_path: Path):
    from imprint.run import RunConfig, load_samples

    texts, labels = _shifted(30)
    rows = [{"text": t, "label": y} for t, y in zip(texts, labels, strict=True)]
    conflict = "Один и тот же текст 同じ文章 under both labels"
    rows += [{"text": conflict, "label": 1}, {"text": conflict, "label": 0}, rows[0]]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    out = tmp_path / "blind.json"
    result = _blind(data, out, "--baseline", "date_detector", "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())
    with pytest.warns(LabelConflictWarning):
        # the blind command has no attacks, so no ReCaLL shots to hold out: compare with a run
        # that holds none (a run's default holds 10 non-members out of every column alike)
        _, kept, run_dropped = load_samples(
            RunConfig(model="unused", data=str(data), out=tmp_path / "r", shot_holdout=0)
        )
    (row,) = saved["baselines"]
    run_counts = (sum(s.label for s in kept), sum(1 - s.label for s in kept))
    assert (row["n_members"], row["n_nonmembers"]) == run_counts == (30, 30)
    assert saved["dropped"] == run_dropped == {"text under both labels": 2, "duplicate text": 1}
    assert "both member and non-member" in result.output


def _null_split(seed: int, n: int = 60) -> tuple[list[str], list[int]]:
    """Texts independent of labels: any blind AUC away from 0.5 is chance."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(VOCAB, size=12)) for _ in range(n)]
    return texts, rng.permutation([1, 0] * (n // 2)).tolist()


def test_run_report_blind_interval_is_the_out_of_fold_bootstrap(monkeypatch: pytest.MonkeyPatch):
    from types import SimpleNamespace

    from imprint.data import Sample
    from imprint.evaluation.evaluate import evaluate_scores
    from imprint.metrics import bootstrap_metrics
    from imprint.report.render import blind_description

    monkeypatch.setattr(blind, "N_ESTIMATORS", 50)  # the SoK forest, smaller for speed
    texts, labels = _shifted(40)
    samples = [Sample(f"s{i}", t, y) for i, (t, y) in enumerate(zip(texts, labels, strict=True))]
    config = SimpleNamespace(n_bootstrap=200, seed=3, blind=True, breakdown=None)
    run_metrics = evaluate_scores(samples, {}, config=config)
    metrics = run_metrics.to_dict()
    # the SoK row: a bootstrap interval of its pooled out-of-fold scores, nothing else
    sok = run_blind_suite(texts, labels, seed=3, n_bootstrap=200, baselines=["sok_bag_of_words"])
    want = bootstrap_metrics(labels, sok[0].scores, n_resamples=200, seed=3).auc.to_dict()
    assert metrics["blind"]["auc"] == want
    # the spread of the 5 split AUCs stays, labelled as a spread
    spread = metrics["blind"]["spread"]
    ref = blind.blind_baseline(texts, labels, seed=3)
    assert spread["aucs"] == list(ref.aucs) and len(spread["aucs"]) == 5
    assert (spread["mean"], spread["std"]) == (ref.auc_mean, ref.auc_std)
    assert "not a confidence interval" in spread["kind"]
    text = blind_description(run_metrics)
    assert "spread" in text and "1.96" not in text and "Bonferroni" in text


def test_strongest_blind_interval_is_bonferroni_adjusted():
    from imprint.diagnostics.blind_suite import _folds
    from imprint.metrics import bootstrap_metrics
    from imprint.metrics.cv_interval import widen_auc

    texts, labels = _null_split(9)
    _, suite = evaluate_blind(texts, np.array(labels), seed=0, n_bootstrap=300, baselines=FAST)
    assert isinstance(suite, BlindSuiteMetrics)
    report = suite.to_dict()
    m = report["selection"]["n_classifiers"]
    assert m == 3 and report["selection"]["confidence"] == pytest.approx(1 - 0.05 / 3)
    results = run_blind_suite(texts, labels, n_bootstrap=300, baselines=FAST)
    best = strongest_blind(results)
    assert best is not None and report["strongest"] == best.name
    want = bootstrap_metrics(labels, best.scores, n_resamples=300, confidence=1 - 0.05 / 3)
    # widened for training variability as every out-of-fold AUC (metrics.cv_interval)
    folds = [test for _, test in _folds(np.asarray(labels), None, 5, 0)]
    want = widen_auc(want, labels, best.scores, folds)
    assert report["auc"] == want.auc.to_dict()
    assert report["auc_unadjusted"] == best.summary.auc.to_dict()  # type: ignore[union-attr]
    assert report["auc"]["low"] <= report["auc_unadjusted"]["low"]
    assert report["auc"]["high"] >= report["auc_unadjusted"]["high"]
    # one classifier fixed in advance: nothing to adjust
    (alone,) = run_blind_suite(texts, labels, n_bootstrap=300, baselines=["tfidf_logreg"])
    assert alone.adjusted == alone.summary


def test_demo_chance_claim_survives_picking_the_best_of_several():
    # A random split where the best of three blind classifiers looks better than chance by its
    # own 95 % interval (what the demo used to test), but not once the pick is accounted for.
    from dataclasses import replace

    from imprint.evaluation.results import BlindClassifierMetrics, RunMetrics
    from imprint.game.demo import _chance_and_detection, _figures
    from imprint.metrics import Interval

    # seed 36: with AUC intervals widened for training variability (metrics.cv_interval) the
    # split of seed 9 no longer looks better than chance unadjusted; this one still does
    texts, labels = _null_split(36)
    _, typed = evaluate_blind(texts, np.array(labels), seed=0, n_bootstrap=300, baselines=FAST)
    assert isinstance(typed, BlindSuiteMetrics)
    suite = typed.to_dict()
    assert suite["auc_unadjusted"]["low"] > 0.5 >= suite["auc"]["low"]
    chance = replace(typed.selected, auc=Interval(0.5, 0.4, 0.6))  # a SoK row at chance
    sok = BlindClassifierMetrics("sok_bag_of_words", "", chance)
    metrics = RunMetrics(attacks={}, blind=sok, blind_suite=typed)
    check = _chance_and_detection(_figures(metrics), "e1")[0]
    assert check["passed"], check
    assert "best of 3, Bonferroni 98.33% interval" in check["claim"]


def test_cli_blind_marks_tpr_not_measurable_with_few_nonmembers(tmp_path: Path):
    # 30 non-members (non-Latin texts): no FPR bound is resolvable (10 % needs 40, 5 % 80, 1 %
    # 400, 0.1 % 4000: 4 false positives allowed); no number may stand in for them in the
    # table, warning or JSON.
    rng = np.random.default_rng(5)
    greek = "αβγδεζηθικλμνξοπρστυφχψω"
    words = [a + b for a in greek for b in greek[:6]]
    members = [" ".join(rng.choice(words, 12)) + " 東京 2010" for _ in range(30)]
    nonmembers = [" ".join(rng.choice(words, 12)) + " Москва 2024" for _ in range(30)]
    data = tmp_path / "d.jsonl"
    rows = [{"text": t, "label": 1} for t in members] + [
        {"text": t, "label": 0} for t in nonmembers
    ]
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    out = tmp_path / "blind.json"
    result = _blind(data, out, "--baseline", "tfidf_logreg", "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    # neither TPR column can be measured in any row: both left out, one line says why
    assert "TPR at 1% and 5% FPR not shown: no row can measure them" in text
    assert "400 and 80 non-members needed, 30 here" in text and "TPR@1%FPR" not in text
    assert "at 1 % FPR not measurable with 30 non-members" in text  # the warning
    assert "% at 1 % FPR" not in text  # no "TPR 6.2% at 1 % FPR"
    saved = json.loads(out.read_text())
    for row in (
        saved["strongest_adjusted"],
        saved["baselines"][0],
        saved["baselines"][0]["adjusted"],
    ):
        for key, need in (("tpr@0.1%", "4000"), ("tpr@1%", "400"), ("tpr@5%", "80")):
            assert row[key]["estimate"] is None and row[key]["low"] is None
            assert f"at least {need} non-members" in row[key]["not_measurable"]


def test_cli_blind_checks_out_before_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import imprint.diagnostics.blind_suite as suite

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the suite ran although --out was unusable")

    data = _shifted_file(tmp_path / "d.jsonl", 10)
    folder = tmp_path / "somedir"
    folder.mkdir()
    monkeypatch.setattr(suite, "run_blind_suite", must_not_run)
    result = _blind(data, folder)
    assert result.exit_code == 2, result.output
    assert "is a folder; this command writes one JSON file" in " ".join(result.output.split())
    assert not any(folder.iterdir())
