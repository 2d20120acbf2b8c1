"""The run report's content: provenance (version, command, resolved model, fingerprints, seeds),
warnings from the manifest, tables sorted by AUC, the most exposed texts, and the plots it
embeds with their ids; the ROC bands are the evaluation's bootstrap."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from imprint.backends.models import describe_model
from imprint.data import Sample
from imprint.diagnostics import blind
from imprint.evaluation import evaluate_scores, read_metrics
from imprint.evaluation.curves import RocCurve
from imprint.report.provenance import model_provenance, safe_command
from imprint.report.render import md_escape
from imprint.report.writer import write_run
from imprint.run import RunConfig

N = 80  # 40 non-members: TPR@10 % is measurable (four false positives allowed)


ARGV = ["imprint", "run", "--model", "smollm2-135m", "--api-base", "https://u:pw@h/v1?k=s"]
WARNING = "reference 'base' has the target's fingerprint 99da73f1: its ratio is 0"


def _entry(spec: str, fingerprint: str) -> dict:
    """A model's manifest entry as the HF backend writes it (resolved_model: describe_model)."""
    return {"model": spec, "provider": "hf", "fingerprint": fingerprint,
            "resolved_model": describe_model(spec)}  # fmt: skip


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run folder from fixed scores (written once: the blind suite takes seconds):
    'strong' separates members, 'weak' barely, 'anti' is reversed (lowest AUC), named so that
    alphabetical order is not AUC order; the process's command line is ``ARGV``."""
    rng = np.random.default_rng(0)
    samples = [Sample(f"s{i}", f"text {i} on topic {i % 5}", i % 2) for i in range(N)]
    labels = np.array([s.label for s in samples])
    scores = {
        "anti": -labels + rng.normal(size=N),
        "strong": 3.0 * labels + rng.normal(size=N),
        "weak": 0.4 * labels + rng.normal(size=N),
    }
    folder = tmp_path_factory.mktemp("report") / "run"
    config = RunConfig(model="smollm2-135m", data="d.jsonl", out=folder, n_bootstrap=100, seed=7)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blind, "N_ESTIMATORS", 30)  # the SoK forest, smaller for speed
        metrics = evaluate_scores(samples, scores, config=config)
    manifest = {
        "config": config,
        "data": {"evaluated": N, "dropped": {}, "source": "/x/d.jsonl", "fingerprint": "abc123"},
        "models": {
            "target": _entry("smollm2-135m", "99da73f1"),
            "base": _entry("gguf:/m/Other-7B-it.Q5_K_M.gguf", "77aa"),
        },
        "attacks": {"neighborhood": {"seed": 3, "k": 5}},
        "warnings": [{"kind": "reference_is_target", "message": WARNING}],
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ARGV)
        write_run(folder, samples, scores, metrics, manifest)
    return folder


def test_report_and_manifest_carry_provenance(out):
    record = json.loads((out / "manifest.json").read_text())["provenance"]
    from imprint import __version__

    assert record["imprint_version"] == __version__
    # the exact command, with the URL's credentials and query masked
    assert record["command"] == "imprint run --model smollm2-135m --api-base 'https://***@h/v1?***'"
    target = record["models"]["target"]
    assert target["kind"] == "instruct" and "SmolLM2-135M-Instruct" in target["resolved"]
    assert target["quantisation"].startswith("GGUF Q4_1")
    assert target["fingerprint"] == "99da73f1"
    base = record["models"]["base"]
    assert base["quantisation"].startswith("GGUF Q5_K_M") and base["kind"].startswith("instruct")
    assert record["data"]["fingerprint"] == "abc123"
    assert record["seeds"]["run (sampling, folds, bootstrap)"] == 7
    assert record["seeds"]["neighborhood.seed"] == 3
    page = (out / "report.html").read_text()
    block = re.search(r'<table id="provenance">.*?</table>', page, re.S)
    assert block, "no provenance block in report.html"
    for shown in (__version__, "SmolLM2-135M-Instruct (instruct)", "GGUF Q4_1", "99da73f1",
                  "abc123", "--api-base", "run (sampling, folds, bootstrap): 7"):  # fmt: skip
        assert shown in block.group(0), shown
    text = re.sub(r"data:image/png;base64,[^\"]+", "", page)
    assert "pw" not in text and "k=s" not in text
    assert "Provenance" in (out / "report.md").read_text()


def test_manifest_warnings_are_shown_in_the_report(out):
    assert md_escape(WARNING) in (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert f'<p class="warn"><b>Warning:</b> {WARNING}' in page.replace("&#x27;", "'")


def _first_column(page: str, ident: str) -> list[str]:
    table = re.search(rf'<table id="{ident}">.*?</table>', page, re.S)
    assert table, ident
    return re.findall(r"<tr><td>([^<]*)</td>", table.group(0))


def test_tables_are_sorted_by_auc_not_by_name(out):
    metrics = read_metrics(out)
    by_auc = sorted(metrics.attacks, key=lambda c: -metrics.attacks[c].auc.estimate)
    assert by_auc == ["strong", "weak", "anti"]
    page = (out / "report.html").read_text()
    rows = [r for r in _first_column(page, "attacks") if not r.startswith("blind")]
    assert rows == by_auc


def test_most_exposed_texts_per_best_attack_with_labels(out):
    import pyarrow.parquet as pq

    table = pq.read_table(out / "scores.parquet").to_pydict()
    strong = np.array(table["strong"])
    top = np.argsort(-strong)[:10]
    page = (out / "report.html").read_text()
    found = re.search(r'<table id="exposed-strong">.*?</table>', page, re.S)
    assert found, "no exposed-texts table for the best attack"
    cells = re.findall(r"<tr>(.*?)</tr>", found.group(0))[1:]  # skip the header
    assert len(cells) == 10
    for row, i in zip(cells, top, strict=True):
        values = re.findall(r"<td>([^<]*)</td>", row)
        label = "member" if table["label"][i] == 1 else "non-member"
        assert values[2:4] == [label, table["id"][i]]
    assert 'id="exposed-weak"' in page and 'id="exposed-anti"' in page  # the 3 best columns


def test_report_embeds_forest_and_roc_with_ids_and_alt_texts(out):
    page = (out / "report.html").read_text()
    for ident in ("plot-forest", "plot-roc", "plot-histograms"):
        figure = re.search(rf'<figure id="{ident}"><img alt="([^"]+)" src="data:image/png', page)
        assert figure and len(figure.group(1)) > 20, ident
    assert (out / "forest.png").stat().st_size > 0


def test_roc_curves_in_metrics_are_the_tables_bootstrap(out):
    metrics = read_metrics(out)
    assert set(metrics.roc) == set(metrics.attacks)
    for name, curve in metrics.roc.items():
        assert isinstance(curve, RocCurve) and curve.resamples == "texts"
        assert curve.fpr[0] == pytest.approx(1 / (N // 2))  # 1/n_nonmembers: the curve starts there
        i = int(np.argmin(np.abs(np.array(curve.fpr) - 0.1)))
        table = metrics.attacks[name].tpr(0.1)
        assert table is not None
        assert (curve.tpr[i], curve.low[i], curve.high[i]) == (
            table.estimate,
            table.low,
            table.high,
        )
    assert metrics.blind_roc is not None  # the strongest blind baseline's, drawn dashed
    # its band is a plain bootstrap of the classifier picked as the best: the record says so
    assert "not selection-adjusted" in metrics.blind_roc.band_label()


def test_model_provenance_of_a_game_and_an_api():
    api = model_provenance({"model": "openai:gpt-4o-mini", "provider": "openai"})
    assert "served by openai" in api["resolved"] and api["fingerprint"] is None
    folder = model_provenance(_entry("/models/pythia-160m", "f"))
    assert folder["kind"] == "not stated in its name" and folder["quantisation"] == "none stated"
    assert model_provenance({"model": "x"})["kind"] == "not recorded by its backend"
    assert safe_command(["x", "--model-arg", "api_key=sk-1"]) == "x --model-arg 'api_key=***'"
