"""``imprint view`` over hostile folders: markup in every text a run carries is escaped on every
page, and one run whose scores.parquet is readable but malformed gets a note instead of
stopping the whole site (one odd folder must not hide the others)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from imprint.data import Sample
from imprint.diagnostics import blind
from imprint.evaluation.evaluate import evaluate_scores
from imprint.report.writer import write_run
from imprint.run import RunConfig
from imprint.view.entries import find_entries
from imprint.view.site import build_site

ATTACK = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _run(out: Path, *, model: str = "smollm2-135m", data: str = "d.jsonl",
         text: str = "text", attack: str = "loss") -> Path:  # fmt: skip
    rng = np.random.default_rng(0)
    samples = [Sample(f"s{i}{ATTACK if i == 0 else ''}", f"{text} {i} Ωμέγα 中文", i % 2,
                      meta={"src": ATTACK}) for i in range(24)]  # fmt: skip
    labels = np.array([s.label for s in samples])
    scores = {attack: rng.normal(size=24) + labels, "min_k": rng.normal(size=24)}
    config = RunConfig(model=model, data=data, out=out, n_bootstrap=20)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blind, "N_ESTIMATORS", 10)
        patch.setattr(sys, "argv", ["imprint", "run"])
        metrics = evaluate_scores(samples, scores, config=config)
        write_run(
            out,
            samples,
            scores,
            metrics,
            {"config": config, "data": {"evaluated": 24, "dropped": {}}},
        )
    return out


def test_markup_in_names_texts_models_data_and_attacks_is_escaped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run(runs / f"run {ATTACK.replace('/', '-')}", model=ATTACK, data=f"/x/{ATTACK}.jsonl",
         text=ATTACK + " " + "word " * 2500, attack=f"loss{ATTACK}")  # fmt: skip
    site = tmp_path / "site"
    build_site(find_entries([runs]), site, served=False)
    pages = [p for p in site.rglob("*.html")]
    assert len(pages) >= 3  # the index, the run's page, its report
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "<script>alert" not in html and "<img src=x" not in html, page


def test_a_run_with_a_null_label_gets_a_note_and_the_others_their_pages(tmp_path: Path):
    runs = tmp_path / "runs"
    _run(runs / "good")
    bad = _run(runs / "bad")
    table = pq.read_table(bad / "scores.parquet")
    labels = pa.array([None, *table.column("label").to_pylist()[1:]], pa.int64())
    pq.write_table(table.set_column(table.column_names.index("label"), "label", labels),
                   bad / "scores.parquet")  # fmt: skip
    site = tmp_path / "site"
    build_site(find_entries([runs]), site, served=False)  # before the fix: TypeError
    assert (site / "run" / "good" / "index.html").is_file()
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "scores.parquet unreadable" in index


def test_a_link_that_leads_nowhere_is_listed_with_a_note(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "moved-run").symlink_to(tmp_path / "gone")
    (runs / "loop").symlink_to(runs / "loop")
    notes = {e.name: e.note for e in find_entries([runs])}  # before the fix: both left out
    assert notes["moved-run"] == f"a link to {tmp_path / 'gone'}, which is missing or loops"
    assert "which is missing or loops" in notes["loop"]


def test_a_build_folder_that_cannot_be_made_is_refused_naming_the_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from imprint.cli import app

    (tmp_path / "runs").mkdir()
    (tmp_path / "a-file").write_text("x")
    for build in (tmp_path / "a-file" / "site", Path("/proc/imprint-view-site")):
        result = CliRunner().invoke(
            app, ["view", str(tmp_path / "runs"), "--build", str(build), "--no-serve"]
        )  # before the fix: a NotADirectoryError / FileNotFoundError traceback
        assert result.exit_code == 2, result.output
        assert f"--build {build}: cannot make that folder" in result.output


def test_a_run_whose_marker_is_of_a_newer_format_is_noted_as_load_run_refuses_it(tmp_path):
    import json

    import imprint
    from imprint.errors import DataError

    run = _run(tmp_path / "runs" / "newer-layout")
    marker = run / ".imprint-output.json"
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "format_version": "5.0"}))
    with pytest.raises(DataError, match="format_version 5.0"):
        imprint.load_run(run)
    (entry,) = find_entries([tmp_path / "runs"])  # before: listed as readable, page and all
    assert not entry.page and "format_version 5.0, written by a newer imprint" in entry.note
    assert ".imprint-output.json" in entry.note


@pytest.mark.parametrize("kind", ["study", "audit"])
def test_a_study_or_audit_of_a_newer_format_is_noted(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "runs" / kind
    (folder / "cells").mkdir(parents=True)
    (folder / "audit.json").write_text("{}")
    (folder / ".imprint-output.json").write_text(f'{{"kind": "{kind}", "format_version": "2.0"}}')
    (entry,) = find_entries([tmp_path / "runs"])  # before: listed as read, without a note
    assert entry.kind == kind and "format_version 2.0, written by a newer imprint" in entry.note
