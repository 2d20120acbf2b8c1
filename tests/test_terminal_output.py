"""Issue 35, terminal: output laid out for 80 columns when piped (tables wrap, nothing cut, TPR
columns no row can measure left out with one line), progress bars only on a terminal, --quiet,
--log-format jsonl, and Ctrl-C's line and exit code 130 on a real run."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from piped_cli import imprint_piped
from typer.testing import CliRunner

from imprint.cli import app

WIDTH = 80


def _too_wide(text: str) -> list[str]:
    """Lines over 80 characters, except a line that is one path or URL (kept whole to copy)."""
    return [
        line
        for line in text.splitlines()
        if len(line) > WIDTH and not (len(line.split()) == 1 and "/" in line)
    ]


def _joined(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """100 texts, 50 members and 50 non-members whose words differ (the blind suite sees it):
    40+ non-members make TPR@10% measurable, and no lower bound."""
    rng = np.random.default_rng(3)
    a = ["river", "stone", "cloud", "seven", "market", "garden", "signal", "harbour"]
    b = ["orbit", "violet", "copper", "lantern", "meadow", "thunder", "canyon", "pepper"]
    rows = [{"text": " ".join(rng.choice(a if i % 2 else b, 12)) + f" n{i}", "label": i % 2}
            for i in range(100)]  # fmt: skip
    path = tmp_path_factory.mktemp("terminal") / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run_args(model: Path, data: Path, out: Path) -> list[object]:
    # no blind suite: test_blind_output_fits_80_columns renders it (and it takes a minute)
    return ["run", "--model", model, "--data", data, "--attacks", "loss,zlib", "--shot-holdout",
            0, "--n-bootstrap", 50, "--no-blind", "--out", out, "--cache",
            out.parent / "cache.sqlite"]  # fmt: skip


def test_piped_run_fits_80_columns_and_leaves_out_unmeasurable_columns(
    tiny_model_dir, data, tmp_path
):
    done = imprint_piped(*_run_args(tiny_model_dir, data, tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert _too_wide(out) == [], out
    assert "…" not in out and "\r" not in out + done.stderr  # nothing cut, no bar redrawn
    text = _joined(out)
    # 50 non-members: only 10 % can be measured; the three others are one line, said once
    assert "TPR@10% (lowest" in out and "measurable FPR)" in out  # a header wrapped, not cut
    assert text.count("not shown: no row can measure") == 1
    assert "TPR at 0.1%, 1% and 5% FPR not shown" in text and "50 here" in text
    assert "TPR@1%FPR" not in text and "not measurable" not in text
    assert re.search(r"scoring with target: [\d,]+/[\d,]+ in [\d.]+ s", text)  # a stage line
    assert f"report: {tmp_path / 'run' / 'report.html'}" in text
    report = (tmp_path / "run" / "report.md").read_text()
    assert "TPR@10% (lowest measurable FPR)" in report  # one rule: the report's table too
    assert "TPR at 0.1%, 1% and 5% FPR not shown" in report


def test_quiet_prints_results_and_no_progress(tiny_model_dir, data, tmp_path):
    args = [str(a) for a in _run_args(tiny_model_dir, data, tmp_path / "run")]
    result = CliRunner().invoke(app, ["--quiet", *args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "membership inference" in out and "report:" in out  # the results
    for chatter in ("plan:", "scoring with", "done:", "model calls"):
        assert chatter not in out, out
    assert _too_wide(out) == []


def test_jsonl_events_parse_and_name_stages_and_results(tiny_model_dir, data, tmp_path):
    out = tmp_path / "run"
    done = imprint_piped(
        "--log-format", "jsonl", *_run_args(tiny_model_dir, data, out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    kinds = [e["event"] for e in events]
    assert {"info", "stage_start", "stage_end", "result"} <= set(kinds), kinds
    assert all(isinstance(e["time"], float | int) for e in events)
    ended = {e["stage"] for e in events if e["event"] == "stage_end"}
    assert {"data", "evaluate", "report"} <= ended, ended
    start = next(e for e in events if e["event"] == "stage_start" and "total" in e)
    end = next(e for e in events if e["event"] == "stage_end" and e["stage"] == start["stage"])
    assert end["done"] == end["total"] == start["total"] and end["status"] == "done"
    result = next(e for e in events if e["event"] == "result")
    assert result["path"] == str(out) and result["report"] == str(out / "report.html")
    assert any(e["event"] == "info" and e["message"].startswith("plan:") for e in events)
    assert "plan:" not in done.stdout and "membership inference" in done.stdout  # results stay


def test_a_bad_log_format_is_a_usage_error():
    result = CliRunner().invoke(app, ["--log-format", "xml", "attacks"])
    assert result.exit_code == 2 and "--log-format" in result.output and "jsonl" in result.output


def test_blind_output_fits_80_columns(data):
    result = CliRunner().invoke(
        app, ["blind", "--data", str(data), "--bootstrap", "50"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert _too_wide(result.output) == [], result.output
    text = _joined(result.output)
    # 50 non-members: neither 1 % nor 5 % is measurable by any classifier: left out, one line
    assert "TPR at 1% and 5% FPR not shown" in text and "TPR@5%FPR" not in text
    assert "strongest:" in text


def test_datasets_fits_80_columns_and_says_shared_caveats_once():
    result = CliRunner().invoke(app, ["datasets"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert _too_wide(result.output) == [], result.output
    assert "…" not in result.output
    caveat = "run the blind baseline (`imprint blind`) before reading any attack's AUC"
    wikimia = result.output.split("\nwikimia24")[0]
    assert _joined(wikimia).count(caveat) == 1  # said once for the family, not per name


def test_audit_output_fits_80_columns(tiny_model_dir, tmp_path, one_torch_thread):
    runner = CliRunner()
    made = runner.invoke(app, ["canaries", "make", "--n", "24", "--out", str(tmp_path / "c"),
                               "--model", str(tiny_model_dir), "--words", "6"])  # fmt: skip
    assert made.exit_code == 0, made.output
    result = runner.invoke(
        app,
        ["audit", "--model", str(tiny_model_dir), "--canaries", str(tmp_path / "c"),
         "--attack", "loss,zlib", "--out", str(tmp_path / "audit"), "--device", "cpu"],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _too_wide(result.output) == [], result.output
    assert "epsilon >=" in result.output and "…" not in result.output


def test_progress_bars_only_on_a_terminal(monkeypatch):
    import tqdm

    from imprint.report import terminal
    from imprint.report.progress import ProgressFactory, silence_third_party_bars

    monkeypatch.setattr(tqdm.std.tqdm, "__init__", tqdm.std.tqdm.__init__)  # restored after
    monkeypatch.setattr(tqdm.std.tqdm, "_imprint_disabled", False, raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    terminal.configure()
    lines: list[str] = []

    class Log:  # a console in a log: what it prints
        width = 80

        def print(self, text, **kwargs):
            lines.append(str(text))

    logged = ProgressFactory(Log())
    assert logged._progress is None  # pytest's stderr is not a terminal: no bar
    advance = logged("scoring with target", 10)
    advance(4)
    advance(6)
    logged.close()
    assert len(lines) == 1 and re.fullmatch(r"scoring with target: 10/10 in [\d.]+ s", lines[0])
    silence_third_party_bars()  # other libraries' tqdm bars (the GGUF conversion) off too
    assert os.environ["TQDM_DISABLE"] == "1"
    assert tqdm.tqdm(range(3)).disable

    monkeypatch.setattr(terminal, "stderr_is_terminal", lambda: True)
    drawn = ProgressFactory(Log())
    assert drawn._progress is not None  # a terminal: a rich bar
    drawn.close()
    terminal.configure(quiet=True)
    try:
        assert ProgressFactory(Log())._progress is None  # --quiet: none, even on a terminal
        quiet = ProgressFactory(Log())
        quiet("scoring", 2)(2)
        assert len(lines) == 1  # and no stage line
    finally:
        terminal.configure()


def _stored(cache: Path) -> int:
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM request_results").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_ctrl_c_on_a_real_run_says_what_was_kept_and_exits_130(tmp_path):
    """SIGINT to a real ``imprint run`` on smollm2-135m mid-scoring (tens of seconds on a
    loaded CPU: the model loads, then it is stopped after its first stored batches)."""
    cache = tmp_path / "cache.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "imprint", "run", "--model", "smollm2-135m", "--data",
         "wikimia:64", "--attacks", "loss", "--no-blind", "--device", "cpu", "--token-budget",
         "512", "--cache", str(cache), "--out", str(tmp_path / "run")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        # as a terminal has it: a suite started in the background (`cmd &` in a script) runs
        # with SIGINT ignored, which children inherit, and Python then installs no Ctrl-C handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.time() + 300
    while _stored(cache) < 8 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    said = re.search(
        r"interrupted: ([\d,]+) requests kept in the store; rerun the same command to resume",
        _joined(stdout),
    )
    assert said is not None, stdout + stderr
    assert int(said[1].replace(",", "")) == _stored(cache) > 0
    assert "Traceback" not in stderr


def test_jsonl_turns_other_libraries_warnings_into_events(capsys):
    """With jsonl, stderr stays one JSON object per line: a library's Python warning (which
    would print ``path:line: FutureWarning: ...``) becomes a ``warning`` event."""
    from imprint.cli.common import _show_warning
    from imprint.report import terminal

    shown: list[str] = []
    terminal.configure(log_format="jsonl")
    try:
        _show_warning(lambda *a, **k: shown.append("printed"), "old API", FutureWarning,
                      "/site-packages/lib.py", 3)  # fmt: skip
    finally:
        terminal.configure()
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["event"] == "warning" and record["category"] == "FutureWarning"
    assert record["message"] == "old API" and shown == []


def test_quiet_game_build_prints_the_game_and_not_the_work(
    tmp_path, tiny_model_dir, one_torch_thread
):
    from test_game import write_pool

    pool = write_pool(tmp_path / "pool.txt")
    args = ["game", "build", "--model", tiny_model_dir, "--pool", pool, "--pool-size", 20,
            "--words", 8, "--epochs", 1, "--max-length", 64, "--repetitions", "1", "--canaries",
            4, "--canary-generator", "random", "--canary-words", 6, "--heldout", 0, "--device",
            "cpu", "--out", tmp_path / "g"]  # fmt: skip
    result = CliRunner().invoke(app, ["--quiet", *map(str, args)])
    assert result.exit_code == 0, result.output
    assert "loading base model" not in result.output  # the work: not with --quiet
    assert f"game: 1 epoch(s) written to {tmp_path / 'g'}" in result.output  # the result


def test_ctrl_c_in_a_game_build_says_what_it_keeps(monkeypatch, tmp_path):
    import imprint.game.build as build

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_game", interrupted)
    result = CliRunner().invoke(app, ["game", "build", "--out", str(tmp_path / "g")])
    assert result.exit_code == 130, result.output
    assert _joined(result.output) == (
        "interrupted: finished games and reference models are kept, the one in training is "
        "not; rerun the same command to resume"
    )


def test_the_document_table_follows_the_same_column_rule():
    """--unit document's table: 60 non-member documents measure only 10 %, so 0.1, 1 and 5 %
    are left out with one line, as in the Attacks table (bootstrap_metrics sets the rule)."""
    from imprint.evaluation.document_results import DocumentMetrics, DocumentRow
    from imprint.metrics import bootstrap_metrics
    from imprint.report.documents import document_blocks, document_rows

    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(60), np.zeros(60)]
    summary = bootstrap_metrics(labels, labels + rng.normal(0, 1, 120), n_resamples=50)
    rows = {"loss (mean)": DocumentRow("loss", "mean", summary)}
    header, cells = document_rows(DocumentMetrics(120, 60, 60, 600, rows))
    assert header[2:-2] == ["TPR@10% (lowest measurable FPR)"] and len(cells[0]) == 5
    blocks = document_blocks(DocumentMetrics(120, 60, 60, 600, rows))
    notes = [text for kind, text in blocks if kind == "p" and "not shown" in text]
    assert notes == [
        "TPR at 0.1%, 1% and 5% FPR not shown: no row can measure them (an FPR bound must "
        "allow 4 false positives: 4,000, 400 and 80 non-members needed, 60 here); TPR@10% is "
        "the lowest measurable FPR"
    ]
