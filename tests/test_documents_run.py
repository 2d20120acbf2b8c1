"""``imprint run --unit document`` on a tiny random model: documents split, scored through the
planner and cache, aggregated; the report section; the CLI flags."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import WIKIMIA
from typer.testing import CliRunner

from imprint.cli import app
from imprint.documents.run_hook import DocumentOptions, document_options
from imprint.errors import ConfigError
from imprint.evaluation import read_metrics
from imprint.metrics import auc
from imprint.run import RunConfig, execute_run

runner = CliRunner()


def _documents_file(folder: Path, per_doc: int = 3, n_docs: int = 10) -> Path:
    """Documents of ``per_doc`` WikiMIA-128 texts of one label (members with members)."""
    with (WIKIMIA / "WikiMIA_length128.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    docs = []
    for label in (1, 0):
        texts = [r["input"] for r in rows if r["label"] == label][: per_doc * n_docs]
        for d in range(n_docs):
            body = "\n\n".join(texts[d * per_doc : (d + 1) * per_doc])
            docs.append({"id": f"doc{label}-{d}", "input": body, "label": label})
    path = folder / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    return path


@pytest.fixture(scope="module")
def doc_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("docrun")
    config = RunConfig(
        model=str(tiny_model_dir),
        data=str(_documents_file(folder)),
        out=folder / "run",
        attacks=("loss", "zlib", "min_k"),
        documents=DocumentOptions(seq_words=40, max_seqs=6, n_splits=3),
        n_bootstrap=100,
        cache=folder / "cache.sqlite",
        progress=False,
    )
    return config, execute_run(config)


def test_documents_are_split_scored_and_aggregated(doc_run) -> None:
    config, result = doc_run
    docs = result.metrics.documents
    assert docs is not None
    assert (docs.n_documents, docs.n_members, docs.n_nonmembers) == (20, 10, 10)
    # every scored sample is a sequence carrying its document's id, at most 6 per document
    doc_ids = [s.meta["doc_id"] for s in result.samples]
    assert len(set(doc_ids)) == 20  # the loader's row ids name the documents
    assert max(doc_ids.count(d) for d in set(doc_ids)) <= 6
    assert docs.n_sequences == len(result.samples)
    for name in ("loss: mean", "loss: shi", "zlib: mean", "min_k: shi"):
        assert name in docs.rows, name
    assert any(r.aggregation == "meeus" for r in docs.rows.values())
    assert any(r.aggregation == "blind" for r in docs.rows.values())
    # the 'mean' row is the AUC of per-document means of the stored sequence scores
    table = pq.read_table(config.out / "scores.parquet").to_pandas()
    table["doc"] = [json.loads(m)["doc_id"] for m in table["meta"]]
    means = table.groupby("doc").agg(loss=("loss", "mean"), label=("label", "first"))
    assert docs.rows["loss: mean"].metrics.auc.estimate == pytest.approx(
        auc(means["label"].to_numpy(), means["loss"].to_numpy())
    )
    seq_auc = docs.rows["loss: mean"].sequence_auc
    assert seq_auc is not None
    assert seq_auc.estimate == pytest.approx(result.metrics.attacks["loss"].auc.estimate)


def test_meeus_reads_the_same_passes(doc_run) -> None:
    _, result = doc_run
    passes = result.manifest["requests"]["target"]["logprobs"]
    n = len({s.text for s in result.samples})
    # one forward pass per distinct sequence, shared by loss, zlib, min_k and the Meeus features:
    # Meeus asks the run's request client for the pass during scoring and every one of its n
    # requests is answered by the store (counted as a hit), never by the model
    assert passes["executed"] == n
    assert (passes["requests"], passes["cache_hits"]) == (2 * n, n)


def test_dataset_inference_and_report_section(doc_run) -> None:
    config, result = doc_run
    dataset = result.metrics.documents.dataset
    assert set(dataset["features"]) == {"loss", "zlib", "zlib_char", "min_k"}
    test = dataset["members_vs_nonmembers"]
    assert 0 <= test["p_value"] <= 1 and test["n_suspect_docs"] == 10
    assert dataset["false_positive_check"]["n_suspect_docs"] == 5
    assert [p["n_docs"] for p in dataset["curve"]] == [4, 6, 8, 10]
    # one verdict of three states, from the test, its false-positive check and its power table
    assert dataset["verdict"]["state"] in ("trained on", "not detected", "inconclusive")
    report = (config.out / "report.md").read_text(encoding="utf-8")
    assert "## Documents" in report and "document AUC" in report and "Dataset inference" in report
    assert f"Verdict: {dataset['verdict']['state']}" in report
    # the power against the stated effect at this size and the size it needs (issue 37)
    assert 0 < dataset["verdict"]["power_at_effect"] < 0.5
    needed = dataset["verdict"]["documents_needed_at_effect"]
    assert "Power: with 10 documents per set" in report and f"at least {needed}" in report
    # the document aggregations' settings and their differences from the authors' code
    manifest = json.loads((config.out / "manifest.json").read_text(encoding="utf-8"))
    documents = manifest["config"]["documents"]
    assert documents["meeus"] == {
        "features": "agg", "n_bins": 1000, "n_trees": 500, "max_depth": 5, "min_leaf": 3
    }  # fmt: skip
    assert documents["di_clip"] == 0.05 and documents["di_clip_from"] == "fit"
    assert set(documents["deviations"]) == {"meeus", "dataset_inference"}
    assert "Documents" in (config.out / "report.html").read_text(encoding="utf-8")
    # metrics.json reads back into the same typed document metrics
    assert read_metrics(config.out).documents == result.metrics.documents


def test_cli_doc_field_groups_rows_non_latin_included(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows = []
    words = [
        "北京天安门广场很大。",
        "Kraków leży nad Wisłą.",
        "हिन्दी एक भाषा है।",
        "plain words here",
    ]
    for d in range(8):
        for part in range(3):
            text = " ".join(words[(d + part) % 4] for _ in range(4))
            rows.append({"text": f"{text} {d}-{part}", "label": d % 2, "book": f"b{d}"})
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    out = tmp_path / "run"
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(out)]
    args += ["--attacks", "loss", "--unit", "document", "--doc-field", "book", "--seq-words", "12"]
    args += ["--bootstrap", "50", "--no-blind", "--cache", str(tmp_path / "c.sqlite")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    docs = read_metrics(out).documents
    assert docs is not None and docs.n_documents == 8
    table = pq.read_table(out / "scores.parquet").to_pydict()
    assert any("北京" in t for t in table["text"])
    assert len(table["text"]) > 8  # rows were split into sequences of 12 words


def test_document_flags_need_unit_document() -> None:
    with pytest.raises(ConfigError, match="add --unit document"):
        document_options("sequence", doc_field="book")
    with pytest.raises(ConfigError, match="choose one of"):
        document_options("book")
    assert document_options("sequence") is None
    assert document_options("document", seq_words=50) == DocumentOptions(seq_words=50)
    with pytest.raises(ConfigError, match="seq_words"):
        DocumentOptions(seq_words=0)
    assert np.isclose(DocumentOptions().alpha, 0.05)


def test_verdict_and_meeus_flags() -> None:
    options = document_options("document", di_power=0.9, di_effect_auc=0.7, meeus_features="hist")
    assert options is not None
    assert (options.di_power, options.di_effect_auc, options.meeus.features) == (0.9, 0.7, "hist")
    with pytest.raises(ConfigError, match="add --unit document"):
        document_options("sequence", di_power=0.9)
    with pytest.raises(ConfigError, match="power must be in"):
        document_options("document", di_power=1.5)
    with pytest.raises(ConfigError, match="effect AUC"):
        document_options("document", di_effect_auc=0.5)
    with pytest.raises(ConfigError, match="Meeus features"):
        document_options("document", meeus_features="all")
    result = runner.invoke(app, ["run", "--model", "x", "--data", "y", "--di-power", "0.9"])
    assert result.exit_code == 2 and "add --unit document" in result.output


def test_attacks_are_compared_pairwise_resampling_documents(doc_run) -> None:
    config, _ = doc_run
    data = json.loads((config.out / "metrics.json").read_text())
    compared = data["comparisons"]
    n_columns = len(data["attacks"])
    assert compared["n_pairs"] == n_columns * (n_columns - 1) // 2 and n_columns >= 3
    assert compared["resamples"] == "documents" and compared["clustered"]
    assert compared["correction"] == "bonferroni"
    pair = compared["pairs"][0]
    assert (pair["n_member_units"], pair["n_nonmember_units"]) == (10, 10)  # documents, not seqs
    report = (config.out / "report.md").read_text()
    assert "## Paired comparisons" in report and "same documents" in report
    assert read_metrics(config.out).comparisons.n_pairs == compared["n_pairs"]
