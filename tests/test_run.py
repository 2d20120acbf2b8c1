"""The run pipeline and CLI on a tiny random model: run folder contents, errors, kill-and-resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from typer.testing import CliRunner, Result

from imprint.cli import app
from imprint.cli.flags import config_from_flags
from imprint.run import RunConfig, execute_run

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"

runner = CliRunner()


def _cli_run(model: Path, data: str, out: Path, *more: str) -> Result:
    """``imprint run --model MODEL --data DATA [more] --out OUT`` in this process."""
    return runner.invoke(
        app, ["run", "--model", str(model), "--data", data, *more, "--out", str(out)]
    )


def test_run_folder_is_complete(tiny_model_dir, tiny_ref_dir, tmp_path):
    out = tmp_path / "run"
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data="wikimia:32",
            out=out,
            refs=(("small", str(tiny_ref_dir)),),
            attacks=("loss", "zlib", "lowercase", "min_k", "min_k_pp", "ref"),
            n_per_label=30,
            n_bootstrap=200,
            params={"min_k": {"sweep": (0.1, 0.5)}},
            progress=False,
        )
    )
    for name in (
        "manifest.json",
        "scores.parquet",
        "metrics.json",
        "report.md",
        "report.html",
        "roc.png",
        "histograms.png",
    ):
        assert (out / name).stat().st_size > 0, name
    table = pq.read_table(out / "scores.parquet").to_pydict()
    expected = {
        "loss",
        "zlib",
        "zlib_char",
        "lowercase",
        "min_k",
        "min_k@0.1",
        "min_k@0.5",
        "min_k_pp",
        "ref[small]",
        "ref_ratio[small]",
    }
    assert expected <= set(table)
    assert len(table["id"]) == 60 and sum(table["label"]) == 30
    metrics = json.loads((out / "metrics.json").read_text())
    for row in metrics["attacks"].values():
        assert row["auc"]["low"] <= row["auc"]["estimate"] <= row["auc"]["high"]
        assert {"tpr@0.1%", "tpr@1%", "tpr@5%", "tpr@10%"} <= set(row)
    # WikiMIA is temporally shifted: the blind baseline sees it and the report warns
    assert metrics["blind"]["auc"]["estimate"] > 0.8
    assert "blind_not_at_chance" in metrics["warning_kinds"]
    # every pair of score columns, compared on the same texts, with the Bonferroni count
    k = len(metrics["attacks"])
    assert metrics["comparisons"]["n_pairs"] == k * (k - 1) // 2
    assert metrics["comparisons"]["resamples"] == "texts"
    assert "## Paired comparisons" in (out / "report.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data"]["evaluated"] == 60
    # issue 24: 10 natural non-members are held out as shots (before the 30 per label are drawn)
    held = (
        "held out as the few-shot prefix of ReCaLL-family attacks (10 natural evaluation "
        "non-members), out of every attack's evaluation"
    )
    assert manifest["data"]["dropped"] == {held: 10, "not sampled (n_per_label=30)": 776 - 70}
    assert manifest["shots"]["held_out"] == 10
    assert (
        manifest["requests"]["target"]["logprobs"]["executed"] == 120
    )  # x and lower(x), once each
    assert manifest["requests"]["small"]["logprobs"]["executed"] == 60
    assert manifest["models"]["target"]["fingerprint"]
    assert manifest["versions"]["torch"]
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "http" not in html.split("<body>")[1]
    assert result.scores["loss"].shape == (60,)


def test_repeated_run_does_no_forward_pass(tiny_model_dir, tmp_path):
    cfg = dict(
        model=str(tiny_model_dir),
        data="wikimia:32",
        n_per_label=10,
        n_bootstrap=50,
        attacks=("loss", "min_k"),
        progress=False,
        blind=False,
        cache=tmp_path / "cache.sqlite",
    )
    first = execute_run(config_from_flags(out=tmp_path / "a", **cfg))
    second = execute_run(config_from_flags(out=tmp_path / "b", **cfg))
    assert second.manifest["requests"]["target"]["logprobs"]["executed"] == 0
    assert second.manifest["requests"]["target"]["logprobs"]["cache_hits"] == 20
    for name, values in first.scores.items():
        np.testing.assert_array_equal(values, second.scores[name])


def test_drops_are_counted_in_manifest_and_report(tiny_model_dir, tmp_path):
    data = tmp_path / "d.jsonl"
    rows = [{"text": f"member text number {i} here", "label": 1} for i in range(6)]
    rows += [{"text": f"other text number {i}", "label": 0} for i in range(6)]
    rows += [{"text": "short", "label": 0}, {"text": "member text number 0 here", "label": 1}]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / "r",
            attacks=("loss",),
            min_words=2,
            n_bootstrap=50,
            progress=False,
            blind=False,
        )
    )
    dropped = result.manifest["data"]["dropped"]
    assert sum(dropped.values()) == 2, dropped
    assert "Dropped samples" in (tmp_path / "r" / "report.md").read_text()


def test_cli_lists_and_errors(tiny_model_dir, tmp_path):
    listed = runner.invoke(app, ["attacks"])
    assert listed.exit_code == 0 and "min_k_pp" in listed.output
    assert all(len(line.split()) > 2 for line in listed.output.strip().splitlines())
    datasets = runner.invoke(app, ["datasets"])
    assert datasets.exit_code == 0 and "wikimia:32" in datasets.output
    bad = _cli_run(tiny_model_dir, "wikimia:32", tmp_path / "x", "--attacks", "lss")
    assert bad.exit_code == 2 and "did you mean loss" in bad.output
    missing = _cli_run(tiny_model_dir, str(tmp_path / "nope.jsonl"), tmp_path / "x")
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output
    badparam = _cli_run(tiny_model_dir, "wikimia:32", tmp_path / "x", "--param", "min_k.k=2")
    assert badparam.exit_code == 2 and "(0, 1]" in badparam.output


def test_cli_run_writes_report(tiny_model_dir, tmp_path):
    out = tmp_path / "cli-run"
    flags = ("--attacks", "loss,min_k", "--n-per-label", "10", "--bootstrap", "50")
    res = _cli_run(tiny_model_dir, "wikimia:32", out, *flags, "--param", "min_k.sweep=0.1,0.3")
    assert res.exit_code == 0, res.output
    assert "report:" in res.output
    assert {"loss", "min_k", "min_k@0.1", "min_k@0.3"} <= set(
        pq.read_table(out / "scores.parquet").column_names
    )


def _rows(path: Path) -> int:
    try:
        with sqlite3.connect(path) as conn:
            return int(
                conn.execute(
                    "SELECT COUNT(*) FROM request_results WHERE kind = 'logprobs'"
                ).fetchone()[0]
            )
    except sqlite3.Error:
        return 0


def test_sigkill_half_way_resumes_to_same_scores(tiny_model_dir, tmp_path):
    """Kill a real CLI run mid-way; the resumed run redoes nothing and matches a clean run."""
    assert (WIKIMIA / "WikiMIA_length64.jsonl").exists()
    cache = tmp_path / "killed.sqlite"
    args = [
        "--model",
        str(tiny_model_dir),
        "--data",
        "wikimia:64",
        "--attacks",
        "loss,min_k",
        "--token-budget",
        "256",
        "--bootstrap",
        "20",
        "--no-blind",
    ]
    env = {**os.environ, "IMPRINT_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "imprint",
            "run",
            *args,
            "--cache",
            str(cache),
            "--out",
            str(tmp_path / "killed"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while _rows(cache) < 20 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = _rows(cache)
    assert 0 < done_before < 542, "the run must be killed half-way"
    base = dict(
        model=str(tiny_model_dir),
        data="wikimia:64",
        attacks=("loss", "min_k"),
        token_budget=256,
        n_bootstrap=20,
        blind=False,
        progress=False,
    )
    resumed = execute_run(config_from_flags(out=tmp_path / "resumed", cache=cache, **base))
    clean = execute_run(
        config_from_flags(out=tmp_path / "clean", cache=tmp_path / "clean.sqlite", **base)
    )
    passes = resumed.manifest["requests"]["target"]["logprobs"]
    assert passes["cache_hits"] == done_before
    # 542 texts, less the 10 non-members held out of every attack's evaluation (--shot-holdout)
    assert passes["executed"] == 542 - 10 - done_before
    for name, values in clean.scores.items():
        # batch composition differs after the resume: float32 summation order only
        np.testing.assert_allclose(resumed.scores[name], values, rtol=0, atol=1e-5)
