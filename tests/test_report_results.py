"""Typed run results: metrics.json round trip on a real run folder, warning kinds, the blind suite
fitted once per run, and a report stage that only renders."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from imprint.data import Sample
from imprint.diagnostics import blind
from imprint.diagnostics import blind_suite as suite_module
from imprint.errors import ConfigError, DataError
from imprint.evaluation import evaluate_scores, read_metrics
from imprint.evaluation.results import (
    WARNING_KINDS,
    BlindClassifierMetrics,
    BlindFailure,
    BlindSuiteMetrics,
    RunMetrics,
    RunWarning,
    SkippedGroup,
)
from imprint.report import write_run
from imprint.report.exposed import exposed_texts
from imprint.report.render import render_html, render_markdown
from imprint.run import RunConfig, execute_run

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"
ODD_GROUPS = ["русский", "中文 | 表", "<b>x</b>", "ελληνικά"]


def _wikimia(n_per_label: int) -> list[dict]:
    rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()]
    members = [r for r in rows if r["label"] == 1][:n_per_label]
    nonmembers = [r for r in rows if r["label"] == 0][:n_per_label]
    return members + nonmembers


def _run_data(tmp_path: Path) -> Path:
    """WikiMIA-32 rows (shifted: the blind suite sees it) with non-Latin, long and odd texts,
    a breakdown field with odd group names and one group holding members only."""
    rows = _wikimia(24)
    for i, row in enumerate(rows):
        row["grp"] = ODD_GROUPS[i % len(ODD_GROUPS)]
    rows[0]["input"] = "Москва — столица России; 北京是中国的首都。 " * 3
    rows[1]["input"] = " ".join(["длинный текст очень"] * 120)  # longer than the model window
    rows[2]["grp"] = rows[3]["grp"] = "только члены"  # members only: not scored
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _count_fits(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Wrap every blind classifier's fold fit and the SoK protocol in counters."""
    monkeypatch.setattr(blind, "N_ESTIMATORS", 50)  # the SoK forest, smaller for speed
    counts: dict[str, int] = {}

    def counted(name: str, fn):  # noqa: ANN202
        def wrapper(*args, **kwargs):  # noqa: ANN202
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper

    for name, (description, fit) in list(suite_module.BASELINES.items()):
        monkeypatch.setitem(suite_module.BASELINES, name, (description, counted(name, fit)))
    protocol = counted("sok_protocol", blind.blind_baseline)
    monkeypatch.setattr(blind, "blind_baseline", protocol)
    return counts


def test_run_folder_round_trip_and_blind_fitted_once(tiny_model_dir, tmp_path, monkeypatch):
    counts = _count_fits(monkeypatch)
    out = tmp_path / "run"
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(_run_data(tmp_path)),
            out=out,
            attacks=("loss", "zlib"),
            breakdown="grp",
            n_bootstrap=50,
            progress=False,
        )
    )
    # once per run: each classifier once per fold (5), the SoK protocol once
    assert counts == {name: 5 for name in suite_module.BASELINES} | {"sok_protocol": 1}
    assert isinstance(result.metrics, RunMetrics)
    text = (out / "metrics.json").read_text()
    saved = json.loads(text)
    assert result.metrics.to_dict() == saved  # in process and on disk: the same results
    read = read_metrics(out)
    assert read.to_dict() == saved  # (NaN != NaN, so the objects are compared as written)
    assert json.dumps(read.to_dict(), indent=2) + "\n" == text  # same keys, same order
    # the report renders from the typed results alone: the same files, nothing refitted
    manifest = json.loads((out / "manifest.json").read_text())
    plots = ["forest.png", "roc.png", "histograms.png"]
    exposed = exposed_texts(result.samples, result.scores, read)  # a view of the scores file
    assert render_markdown(read, manifest, plots, exposed) == (out / "report.md").read_text()
    assert render_html(read, manifest, out, plots, exposed) == (out / "report.html").read_text()
    write_run(tmp_path / "again", result.samples, result.scores, read, manifest)
    assert counts["sok_protocol"] == 1 and counts["tfidf_logreg"] == 5
    # typed content: odd group names survive, the members-only group is skipped and warned of
    assert read.breakdown is not None and set(ODD_GROUPS) <= set(read.breakdown.groups)
    skipped = read.breakdown.groups["только члены"]
    assert skipped == SkippedGroup("needs members and non-members", 2)
    kinds = [w.kind for w in read.warnings]
    assert "blind_not_at_chance" in kinds  # WikiMIA is temporally shifted
    assert any("только члены" in m for m in read.warnings_of("single_class"))
    assert saved["warning_kinds"] == kinds
    assert isinstance(read.blind, BlindClassifierMetrics) and read.blind.protocol is not None
    assert isinstance(read.blind_suite, BlindSuiteMetrics)
    assert read.blind_suite.strongest in read.blind_suite.baselines


def _samples(labels: list[int], *, texts: list[str] | None = None, group=None) -> list[Sample]:
    texts = texts or [f"текст {i} 文本" for i in range(len(labels))]
    meta = [{"g": group(i)} if group else {} for i in range(len(labels))]
    return [
        Sample(f"s{i}", t, y, m)
        for i, (t, y, m) in enumerate(zip(texts, labels, meta, strict=True))
    ]


def _config(**kw) -> SimpleNamespace:
    return SimpleNamespace(
        **{"n_bootstrap": 50, "seed": 0, "blind": False, "breakdown": None, **kw}
    )


def test_warning_kinds_of_undefined_and_unmeasurable_figures():
    labels = [1, 0] * 4  # 4 non-members: no TPR bound is measurable
    partial = np.arange(8.0)
    partial[0] = np.nan
    no_members = np.where(np.array(labels) == 1, np.nan, 1.0)
    samples = _samples(labels, group=lambda i: "solo ☃" if i < 1 else "mixed")
    scores = {"ok": np.arange(8.0), "partial": partial, "ref[base]": no_members}
    metrics = evaluate_scores(samples, scores, config=_config(blind=True, breakdown="g"))
    kinds = {w.kind: [] for w in metrics.warnings}
    for w in metrics.warnings:
        kinds[w.kind].append(w.message)
    assert set(kinds) == {
        "blind_not_computed",
        "unscored_samples",
        "few_nonmembers",
        "single_class",
        "degenerate_scores",  # ref[base] scores every text alike (issue 37 item 8)
    }
    assert [m.split(":")[0] for m in kinds["degenerate_scores"]] == ["ref[base]"]
    assert len(kinds["blind_not_computed"]) == 2  # SoK row and suite: 4 per class < 5 folds
    assert isinstance(metrics.blind, BlindFailure) and isinstance(metrics.blind_suite, BlindFailure)
    assert [m.split(":")[0] for m in kinds["unscored_samples"]] == ["partial", "ref[base]"]
    assert "only 4 non-members" in kinds["few_nonmembers"][0]
    single = kinds["single_class"]
    assert any(m.startswith("ref[base]: no member") for m in single)
    assert any("'solo ☃' (1 sample)" in m for m in single)
    assert set(kinds) <= set(WARNING_KINDS)
    # a healthy column draws none of these
    # (40 non-members: TPR@10 % is measurable under the four-false-positive rule)
    quiet = evaluate_scores(_samples([1, 0] * 40), {"ok": np.arange(80.0)}, config=_config())
    assert quiet.warnings == ()


def test_blind_warning_has_its_kind_whatever_its_text(monkeypatch):
    monkeypatch.setattr(blind, "N_ESTIMATORS", 50)  # the SoK forest, smaller for speed
    texts = [f"early history of {i} 1850 born" for i in range(20)]
    texts += [f"recent news from 2024 {i} announced" for i in range(20)]
    samples = _samples([1] * 20 + [0] * 20, texts=texts)
    metrics = evaluate_scores(samples, {}, config=_config(blind=True))
    (message,) = metrics.warnings_of("blind_not_at_chance")
    assert isinstance(metrics.blind_suite, BlindSuiteMetrics)
    assert message == metrics.blind_suite.warning
    # the demo's shift claim tests the kind, not the text
    from imprint.game.demo import _shift_checks

    strong = {"estimate": 0.9, "low": 0.8, "high": 1.0}
    shift = {"state": "shift"}  # the one blind verdict (issue 37 item 5) with its warning kind
    base = {"blind": strong, "blind_strongest": strong, "attacks": {}, "blind_verdict": shift}
    reworded = {**base, "warnings": ["reworded"], "warning_kinds": ["blind_not_at_chance"]}
    assert _shift_checks(base, reworded)[0]["passed"]
    lookalike = {**base, "warnings": ["Blind baseline ..."], "warning_kinds": ["unclassified"]}
    assert not _shift_checks(base, lookalike)[0]["passed"]


def test_old_metrics_json_without_kinds_reads_back(tmp_path):
    samples = _samples([1, 0] * 10, group=lambda i: ["a", "b"][i % 2])
    scores = {"x": np.r_[np.nan, np.arange(19.0)]}
    new = evaluate_scores(samples, scores, config=_config(breakdown="g")).to_dict()
    old = {k: v for k, v in new.items() if k != "warning_kinds"}  # the layout before kinds
    read = RunMetrics.from_dict(json.loads(json.dumps(old)))
    # unscored samples, few non-members (10 < 40 for 10 %), single-class groups
    assert [w.kind for w in read.warnings] == ["unclassified"] * 3
    assert read.to_dict() == {**new, "warning_kinds": ["unclassified"] * 3}
    assert read.breakdown is not None and all(
        isinstance(g, SkippedGroup) for g in read.breakdown.groups.values()
    )  # each group holds one class only


def test_bad_metrics_json_names_the_place(tmp_path):
    samples = _samples([1, 0] * 10)
    data = evaluate_scores(samples, {"loss": np.arange(20.0)}, config=_config()).to_dict()
    data["attacks"]["loss"]["auc"]["low"] = "high"
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"attacks\['loss'\]\.auc\.low: expected a number"):
        read_metrics(tmp_path)
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        read_metrics(tmp_path)
    with pytest.raises(DataError, match="has no metrics.json"):
        read_metrics(tmp_path / "missing")
    data = evaluate_scores(samples, {"loss": np.arange(20.0)}, config=_config()).to_dict()
    data["warning_kinds"] = ["made_up"] * len(data["warnings"])
    data["warnings"].append("x")
    with pytest.raises(DataError, match="warning_kinds"):
        RunMetrics.from_dict(data)
    with pytest.raises(ConfigError, match="unknown warning kind"):
        RunWarning("made_up", "x")  # type: ignore[arg-type]


def test_writer_takes_typed_results_and_prints_names_literally(tmp_path):
    from rich.console import Console

    samples = _samples([1, 0] * 10)
    scores = {"ref[base]": np.r_[np.nan, np.arange(19.0)]}
    metrics = evaluate_scores(samples, scores, config=_config())
    manifest = {"config": {"model": "m", "data": "d", "n_bootstrap": 50, "seed": 0}}
    manifest["data"] = {"evaluated": 20, "dropped": {}}
    with pytest.raises(ConfigError, match="RunMetrics"):
        write_run(tmp_path / "dict", samples, scores, metrics.to_dict(), manifest)  # type: ignore[arg-type]
    console = Console(record=True, width=300)
    write_run(tmp_path / "run", samples, scores, metrics, manifest, console=console)
    # a column name is not rich markup: "[base]" stays in the printed warning
    assert "warning: ref[base]: 1 samples had no defined score" in console.export_text()


def test_every_blind_row_marks_unresolvable_tpr_as_not_measurable():
    """Not only the row the report shows: every classifier of the suite, adjusted or not."""
    import json as _json

    from conftest import WIKIMIA

    from imprint.evaluation.evaluate import evaluate_blind

    rows = [_json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()][:80]
    labels = np.array([r["label"] for r in rows])
    _, suite = evaluate_blind([r["input"] for r in rows], labels, seed=0, n_bootstrap=30)
    out = suite.to_dict()
    rows_seen = [out, *out["baselines"].values()]
    rows_seen += [r["adjusted"] for r in out["baselines"].values() if r.get("adjusted")]
    for row in rows_seen:
        for key in ("tpr@0.1%", "tpr@1%"):  # < 1000 and < 100 non-members here
            assert row[key]["estimate"] is None and "not_measurable" in row[key], (row, key)
