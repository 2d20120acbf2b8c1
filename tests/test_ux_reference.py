"""Issue 24: a reference model identical to the target is said, not silently read as 0.500."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from imprint.cli import app


def test_a_reference_that_is_the_target_is_warned_about(tiny_model_dir, tiny_ref_dir, tmp_path):
    data = tmp_path / "d.jsonl"
    rows = [{"text": f"Some text {i} about things {i * 3}", "label": i % 2} for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--attacks", "ref",
            "--bootstrap", "20", "--no-blind"]  # fmt: skip
    same = CliRunner().invoke(app, [*base, "--ref", f"twin={tiny_model_dir}",
                                    "--out", str(tmp_path / "same")])  # fmt: skip
    assert same.exit_code == 0, same.output
    assert "warning: reference model 'twin' is the target itself" in same.output
    metrics = json.loads((tmp_path / "same" / "metrics.json").read_text())
    assert "reference_is_target" in metrics["warning_kinds"]  # in the report too
    assert "is the target itself" in (tmp_path / "same" / "report.html").read_text()
    other = CliRunner().invoke(app, [*base, "--ref", f"small={tiny_ref_dir}",
                                     "--out", str(tmp_path / "other")])  # fmt: skip
    assert other.exit_code == 0, other.output
    assert "is the target itself" not in other.output
