"""Run vs run: thresholds from A's non-members applied to B (MIMIR Table 5), AUC differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from score_folders import write_scores
from typer.testing import CliRunner, Result

from imprint.cli import app as diagnostics_app
from imprint.diagnostics.runs import auc_difference, compare_runs, read_run
from imprint.errors import DataError
from imprint.metrics import auc


@pytest.fixture()
def runs(tmp_path: Path) -> tuple[Path, Path]:
    # A: 20 non-members scored 1..20, 5 members scored 30..34.
    # B: 10 non-members scored 15..24, members 18, 25, 26, 27.
    a = write_scores(
        tmp_path / "a",
        [0] * 20 + [1] * 5,
        {"loss": [*range(1, 21), *range(30, 35)], "only_a": [0.0] * 25},
    )
    b = write_scores(
        tmp_path / "b",
        [0] * 10 + [1] * 4,
        {"loss": [*range(15, 25), 18, 25, 26, 27], "only_b": [0.0] * 14},
    )
    return a, b


def test_transfer_arithmetic_by_hand(runs: tuple[Path, Path]):
    a, b = runs
    result = compare_runs(a, b, fprs=(0.2, 0.25), n_resamples=200)
    loss = result.attacks["loss"]
    # 20 % of 20 non-members = 4 false positives allowed (the fewest the resolution rule takes):
    # threshold just above 16 (17..20 >= t). On B's non-members 15..24: 17..24, 8 of 10.
    assert 16 < loss.transfer["20%"]["threshold"] < 16.0001
    assert loss.transfer["20%"]["fpr_b"] == 0.8
    assert loss.transfer["20%"]["tpr_b"] == 1.0  # 18, 25, 26, 27 all above 16
    # 25 %: 5 allowed, threshold just above 15; B: 16..24 = 9 of 10.
    assert loss.transfer["25%"]["fpr_b"] == 0.9
    assert result.only_in_a == ("only_a",) and result.only_in_b == ("only_b",)
    assert set(result.attacks) == {"loss"}
    assert result.to_dict()["attacks"]["loss"]["transfer"] == loss.transfer  # the JSON form


def test_auc_difference_interval(runs: tuple[Path, Path]):
    a, b = read_run(runs[0]), read_run(runs[1])
    sa, sb = a.scores["loss"], b.scores["loss"]
    diff = auc_difference(a.labels, sa, b.labels, sb, n_resamples=500, seed=3)
    assert diff.method == "independent"
    assert diff.a["estimate"] == auc(a.labels, sa) == 1.0
    expected_b = auc(b.labels, sb)
    assert diff.b["estimate"] == pytest.approx(expected_b)
    assert diff.diff["estimate"] == pytest.approx(expected_b - 1.0)
    for part in ("a", "b", "diff"):
        assert diff.to_dict()[part]["low"] <= diff.to_dict()[part]["estimate"]
        assert diff.to_dict()[part]["estimate"] <= diff.to_dict()[part]["high"]
    assert diff == auc_difference(a.labels, sa, b.labels, sb, n_resamples=500, seed=3)
    assert diff != auc_difference(a.labels, sa, b.labels, sb, n_resamples=500, seed=4)


def test_bootstrap_auc_matches_metrics_auc():
    from imprint.diagnostics.runs import _bootstrap_aucs

    rng = np.random.default_rng(0)
    labels = np.array([1] * 7 + [0] * 9)
    scores = rng.integers(0, 5, size=16).astype(float)  # many ties
    boot = _bootstrap_aucs(labels, scores, 5, np.random.default_rng(1))
    replay = np.random.default_rng(1)
    pos, neg = scores[labels == 1], scores[labels == 0]
    p = pos[replay.integers(0, 7, size=(5, 7))]
    q = neg[replay.integers(0, 9, size=(5, 9))]
    for i in range(5):
        lab = np.array([1] * 7 + [0] * 9)
        assert boot[i] == pytest.approx(auc(lab, np.concatenate([p[i], q[i]])))


def test_compare_nan_and_single_class(tmp_path: Path):
    a = write_scores(tmp_path / "a", [0, 0, 1, 1], {"x": [0.0, float("nan"), 1.0, 2.0]})
    b = write_scores(tmp_path / "b", [0, 0, 0, 0], {"x": [0.0, 1.0, 2.0, 3.0]})
    result = compare_runs(a, b, n_resamples=50)
    assert result.attacks["x"].n_nan_a == 1
    assert result.attacks["x"].error and result.attacks["x"].auc is None
    assert "error" in result.to_dict()["attacks"]["x"]
    with pytest.raises(DataError, match="scores.parquet"):
        compare_runs(tmp_path / "missing", b)


def _compare(runs: tuple[Path, Path], out: Path, *, bootstrap: str, fprs: str) -> Result:
    """``imprint diagnostics compare A B`` with its JSON written to ``out``."""
    return CliRunner().invoke(
        diagnostics_app,
        ["compare", str(runs[0]), str(runs[1]), "--out", str(out), "--bootstrap", bootstrap,
         "--fprs", fprs],
    )  # fmt: skip


def test_cli_compare(runs: tuple[Path, Path], tmp_path: Path):
    out = tmp_path / "cmp.json"
    result = _compare(runs, out, bootstrap="100", fprs="0.2,0.25")
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())
    assert saved["attacks"]["loss"]["transfer"]["20%"]["fpr_b"] == 0.8
    assert "loss" in result.output


def test_compare_marks_unresolvable_targets_not_measurable(tmp_path: Path, runs: tuple[Path, Path]):
    # A has 20 non-members: 20 % is resolvable (4 false positives), 1 % (needs 400) and 10 %
    # (needs 40) are not; B's size does not matter (the threshold is set on A). Nothing
    # unresolvable may be a number, in JSON or table.
    out = tmp_path / "cmp.json"
    result = _compare(runs, out, bootstrap="50", fprs="0.01,0.1,0.2")
    assert result.exit_code == 0, result.output
    cell = json.loads(out.read_text())["attacks"]["loss"]["transfer"]["1%"]
    assert cell["threshold"] is None and cell["fpr_b"] is None and cell["tpr_b"] is None
    assert "at least 400 non-members (4 false positives" in cell["not_measurable"]
    assert "there are 20 in run A" in cell["not_measurable"]
    text = " ".join(result.output.split())
    assert "not measurable @1%: an FPR of 1 % needs at least 400" in text
    assert "not measurable @10%: an FPR of 10 % needs at least 40" in text
    assert "@20%" not in text  # the resolvable one carries no note
    table = compare_runs(*runs, fprs=(0.001, 0.2), n_resamples=50).attacks["loss"]
    assert "4000 non-members" in table.transfer["0.1%"]["not_measurable"]
    assert table.transfer["20%"]["fpr_b"] == 0.8 and "not_measurable" not in table.transfer["20%"]


def test_cli_compare_checks_out_before_any_work(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import imprint.diagnostics.runs as runs_module

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("compare_runs ran although --out was unusable")

    folder, existing = tmp_path / "somedir", tmp_path / "done.json"
    folder.mkdir()
    existing.write_text("{}")
    monkeypatch.setattr(runs_module, "compare_runs", must_not_run)
    for out, message in (
        (folder, "is a folder; this command writes one JSON file"),
        (existing, "already exists; pass a new file path, or add --overwrite"),
        (existing / "x.json", "is a file, so nothing can be made under it"),
    ):
        args = ["compare", str(runs[0]), str(runs[1]), "--out", str(out), "--bootstrap", "20"]
        result = CliRunner().invoke(diagnostics_app, args)
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split()), result.output
    assert existing.read_text() == "{}"  # left as it was
    monkeypatch.undo()
    args = ["compare", str(runs[0]), str(runs[1]), "--out", str(existing), "--overwrite"]
    result = CliRunner().invoke(diagnostics_app, [*args, "--bootstrap", "20", "--fprs", "0.2"])
    assert result.exit_code == 0, result.output
    assert json.loads(existing.read_text())["attacks"]["loss"]["transfer"]["20%"]["fpr_b"] == 0.8


def _shared_runs(tmp_path: Path, *, docs: bool = False) -> tuple[Path, Path]:
    """Two runs scoring the same 200 texts (plus 10 of their own): B is A plus a little signal
    and noise, so their AUCs are strongly correlated."""
    rng = np.random.default_rng(0)
    n = 200
    labels = np.repeat([1, 0], n // 2)
    base = rng.normal(size=n) + 0.5 * labels
    better = base + 0.25 * labels + 0.15 * rng.normal(size=n)
    own = rng.normal(size=10)

    def write(path: Path, scores: np.ndarray, tag: str) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        meta = [json.dumps({"doc_id": f"d{i // 4}"} if docs else {}) for i in range(n)]
        table = {
            "id": [f"s{i}" for i in range(n)] + [f"{tag}{i}" for i in range(10)],
            "label": [*labels.tolist(), *([0] * 10)],
            "text": ["t"] * (n + 10),
            "meta": meta + ["{}"] * 10,
            "loss": np.concatenate([scores, own]),
        }
        pq.write_table(pa.table(table), path / "scores.parquet")
        return path

    return write(tmp_path / "a", base, "a"), write(tmp_path / "b", better, "b")


def test_compare_pairs_runs_on_shared_ids_and_tests_the_difference_paired(tmp_path: Path):
    from imprint.metrics.paired import delong_test

    a, b = _shared_runs(tmp_path)
    result = compare_runs(a, b, n_resamples=300)
    pairing = result.to_dict()["pairing"]
    assert (pairing["n_paired"], pairing["n_only_in_a"], pairing["n_only_in_b"]) == (200, 10, 10)
    assert "paired 200 samples by id (10 only in A, 10 only in B" in pairing["description"]
    found = result.attacks["loss"].auc
    assert found is not None and found.method == "paired"
    row = found.to_dict()
    assert row["method"] == "paired" and row["n_paired"] == 200
    ra, rb = read_run(a), read_run(b)
    ref = delong_test(ra.labels[:200], rb.scores["loss"][:200], ra.scores["loss"][:200])
    assert row["diff"]["estimate"] == pytest.approx(ref.diff)
    assert row["diff"]["low"] > 0 and row["diff_bootstrap"]["low"] > 0 and row["verdict"] == "b"
    # as independent runs (the old method) the same difference is not shown: its interval,
    # which ignores that the runs share their texts, straddles 0
    indep = auc_difference(
        ra.labels[:200], ra.scores["loss"][:200], rb.labels[:200], rb.scores["loss"][:200],
        n_resamples=300,
    )  # fmt: skip
    assert indep.diff["low"] < 0 < indep.diff["high"]


def test_compare_resamples_documents_of_document_runs(tmp_path: Path):
    a, b = _shared_runs(tmp_path, docs=True)
    result = compare_runs(a, b, n_resamples=100)
    assert result.pairing.to_dict()["resamples"] == "documents"
    found = result.attacks["loss"].auc
    assert found is not None and found.resamples == "documents"


def test_cli_compare_says_how_many_it_paired(tmp_path: Path):
    a, b = _shared_runs(tmp_path)
    result = CliRunner().invoke(diagnostics_app, ["compare", str(a), str(b), "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "paired 200 samples by id (10 only in A, 10 only in B" in text
