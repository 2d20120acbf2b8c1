"""Constant and rank-identical score columns are said, with why (issue 37 item 8): qmia equalled
loss exactly in the demo and the frontier table (same AUC, same interval, paired difference
+0.000 [0, 0]) with no word about it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from imprint.evaluation.degenerate import degenerate_warnings, rank_key


def test_a_monotone_function_of_a_column_and_a_constant_column_are_warned_about() -> None:
    rng = np.random.default_rng(0)
    loss = rng.normal(size=40)
    scores = {"loss": loss, "qmia": loss - 3.7, "zlib": np.exp(loss) * 2, "noise": rng.normal(
        size=40), "flat": np.full(40, 0.25), "ok": -loss}  # fmt: skip
    found = degenerate_warnings(scores)
    assert [w.kind for w in found] == ["degenerate_scores"] * 2
    flat, same = (w.message for w in found)
    assert flat.startswith("flat: every text has the same score") and "0.5 by construction" in flat
    assert same.startswith("qmia, zlib rank every text exactly as loss") and "0 [0, 0]" in same
    assert "noise" not in same and "ok" not in same  # reversed order is a different ranking


def test_nan_positions_and_ties_count_in_the_ranking() -> None:
    a = np.array([1.0, 2.0, 2.0, np.nan, 5.0])
    assert rank_key(a) == rank_key(a * 10) != rank_key(np.array([1.0, 2.0, 3.0, np.nan, 5.0]))
    assert rank_key(np.array([np.nan, 1.0, 2.0, 2.0, 5.0])) != rank_key(a)
    assert rank_key(np.array([3.0, 3.0, np.nan])) is None
    assert degenerate_warnings({"a": np.array([np.nan, 1.0]), "b": np.array([np.nan] * 2)}) == []


def test_a_run_says_it_in_the_terminal_the_report_and_metrics_json(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """min_k at k = 1 is the mean of every token's log p: loss itself."""
    from imprint.cli import app

    data = tmp_path / "d.jsonl"
    rows = [{"text": f"Some text {i} about things {i * 7} and more", "label": i % 2} for i in
            range(12)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--attacks",
            "loss,min_k,zlib", "--param", "min_k.k=1.0", "--bootstrap", "20", "--no-blind",
            "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = "min_k ranks every text exactly as loss"
    assert said in " ".join(result.output.split())
    metrics = json.loads((out / "metrics.json").read_text())
    (i,) = [i for i, k in enumerate(metrics["warning_kinds"]) if k == "degenerate_scores"]
    assert metrics["warnings"][i].startswith(said)
    assert said in (out / "report.html").read_text()


def test_attacks_that_all_skips_are_named_with_why() -> None:
    """qmia now needs 20 held-out texts; with the default 10, 'all' leaves it out, and the run
    says so (an attacks_left_out warning) instead of dropping it silently."""
    from types import SimpleNamespace

    from imprint.attacks import RunContext
    from imprint.attacks.shots import HELDOUT_KEY
    from imprint.data import Sample
    from imprint.run.score import _left_out

    held = tuple(Sample(f"h{i}", f"held out text {i}", 0) for i in range(10))
    run = RunContext(pools={HELDOUT_KEY: held})
    plan = SimpleNamespace(config=SimpleNamespace(attacks=("all",)))
    ((kind, message),) = _left_out(plan, run, [])  # type: ignore[arg-type]
    assert kind == "attacks_left_out" and message.startswith("'all' left out ")
    assert "; qmia: qmia fits on 20 held-out non-members and the run holds out 10" in message
    assert "--shot-holdout 20" in message and "loss" not in message
    named = SimpleNamespace(config=SimpleNamespace(attacks=("loss",)))
    assert _left_out(named, run, []) == ()  # type: ignore[arg-type]
