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


def test_the_twin_reference_warning_names_which_attacks_read_0_5_and_which_do_not():
    """Issue 37 item 19: the warning said every reference attack reads 0.5 "by construction"
    while rmia_offline read 0.694 (its offline scaling a keeps the target's own probability in
    the score). It now names the constant columns and the ones that still vary."""
    from dataclasses import dataclass

    import numpy as np

    from imprint.attacks import Attack
    from imprint.run.score import reference_is_target_warnings
    from imprint.signals.needs import Need

    @dataclass(frozen=True)
    class Twin(Attack):
        def needs(self):
            return (Need(), Need(model="twin"))

        def columns(self):
            return ("ref[twin]", "mixed_offline")

    class Fingerprinted:
        fingerprint = "abcdef0123456789"

    scores = {"ref[twin]": np.zeros(6), "mixed_offline": np.arange(6.0), "loss": np.arange(6.0)}
    backends = {"target": Fingerprinted(), "twin": Fingerprinted()}
    ((kind, message),) = reference_is_target_warnings(backends, [Twin()], scores)
    assert kind == "reference_is_target" and "'twin' is the target itself" in message
    constant, _, varying = message.partition("still vary")
    assert "constant, AUC 0.5 by construction: ref[twin]" in constant
    assert "mixed_offline" in varying and "ref[twin]" not in varying and "loss" not in message
    assert reference_is_target_warnings({"target": Fingerprinted()}, [Twin()], scores) == ()
