"""Each warning of a run is said once on the terminal, and listings fit 80 columns when piped
(issue 36's hostile tester).

A warning found while scoring (a reference model that is the target itself) was said when
found (a Python warning, shown as a ``warning:`` line) and again with the run's results, where
every warning of metrics.json is listed: twice in the same output. It is now said once, with
the results, and stays in metrics.json and the report. ``imprint backends`` printed lines of up
to 240 columns into a pipe; it now wraps them at 80, as a run's piped output.
"""

from __future__ import annotations

import json

from attack_listing import attack_entries, said
from conftest import WIKIMIA
from piped_cli import imprint_piped

from imprint.diagnostics.blind_verdict import BlindVerdict

WIDTH = 80


def test_a_warning_found_while_scoring_is_said_once(tiny_model_dir, tmp_path) -> None:
    data = tmp_path / "d.jsonl"
    rows = [{"text": f"Some text {i} about things {i * 3}", "label": i % 2} for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "same"
    done = imprint_piped("run", "--model", tiny_model_dir, "--data", data, "--attacks", "ref",
                         "--ref", f"twin={tiny_model_dir}", "--n-bootstrap", 20, "--no-blind",
                         "--out", out, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert said.count("reference model 'twin' is the target itself") == 1, said
    assert said.count("warning:") == len(json.loads((out / "metrics.json").read_text())["warnings"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert "reference_is_target" in metrics["warning_kinds"]
    assert "is the target itself" in (out / "report.html").read_text()


def test_backends_fits_80_columns_when_piped(tmp_path) -> None:
    done = imprint_piped("backends", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > WIDTH]
    assert wide == [], wide
    lines = done.stdout.splitlines()
    # an entry's wrapped lines start after the names' column; the options line under it
    vllm = next(i for i, line in enumerate(lines) if line.startswith("vllm:"))
    entry = " ".join(" ".join(lines[vllm : vllm + 9]).split())
    assert (
        "sampling,token_logprobs vLLM engine" in entry and "options: tensor_parallel_size" in entry
    )
    column = lines[vllm].index("sampling")
    assert all(line[:column].strip() == "" for line in lines[vllm + 1 : vllm + 4])
    assert "--model vllm:meta-llama/Llama-3.2-1B" in entry  # an example kept whole, never cut


def test_attacks_fits_80_columns_when_piped(tmp_path) -> None:
    """``imprint attacks`` wraps as ``imprint backends``: nothing wider than 80 columns, an
    entry's lines under its text, every deviation still said in full."""
    from imprint.attacks import available_attacks

    done = imprint_piped("attacks", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    wide = [line for line in lines if len(line) > WIDTH]
    assert wide == [], wide
    entries = attack_entries(done.stdout)
    attacks = available_attacks()
    assert entries.keys() == attacks.keys()
    for name, cls in attacks.items():
        assert said(f"{cls.summary}  [{cls.paper}]") in entries[name], name
        for deviation in cls.deviations:
            assert said(f"differs: {deviation}") in entries[name], name
    # wrapped lines start under the access column; a deviation's under its own text
    camia = next(i for i, line in enumerate(lines) if line.startswith("camia "))
    column = lines[camia].index("gray-box")
    assert lines[camia + 1][:column].strip() == "" and lines[camia + 1][column] != " "
    differs = next(i for i in range(camia, len(lines)) if "differs:" in lines[i])
    assert lines[differs + 1].index(lines[differs + 1].split()[0]) > lines[differs].index("d")


def test_the_blind_verdict_is_said_once(tiny_model_dir, tmp_path) -> None:
    """WikiMIA's blind baseline shows a shift: the verdict's line is printed, and the shift
    warning under it says what follows without repeating the line's words (metrics.json and the
    report keep the whole sentence, where it stands alone)."""
    out = tmp_path / "run"
    done = imprint_piped("run", "--model", tiny_model_dir, "--data",
                         WIKIMIA / "WikiMIA_length32.jsonl", "--n-per-label", 20, "--attacks",
                         "loss", "--device", "cpu", "--n-bootstrap", 200, "--out", out,
                         cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    verdict = BlindVerdict.from_dict(metrics["blind_verdict"])
    assert verdict.state == "shift"
    stdout = " ".join(done.stdout.split())
    assert stdout.count(verdict.summary) == 1, stdout
    assert stdout.count("distribution shift shown") == 1, stdout
    warned = stdout.split(verdict.summary, 1)[1].lstrip()
    assert warned.startswith("warning: its interval lies above 0.5: members and non-members")
    (message,) = [m for m, k in zip(metrics["warnings"], metrics["warning_kinds"], strict=True)
                  if k == "blind_not_at_chance"]  # fmt: skip
    assert message.startswith(verdict.summary + "; its interval lies above 0.5")
    assert stdout.count("warning:") == len(metrics["warnings"])


def test_imprint_blind_says_its_verdict_once(tmp_path) -> None:
    """``imprint blind`` prints the same verdict line, and the shift warning under it without
    its words; ``--out`` keeps the whole sentence."""
    out = tmp_path / "blind.json"
    done = imprint_piped("blind", "--data", WIKIMIA / "WikiMIA_length32.jsonl", "--bootstrap",
                         50, "--out", out, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    stdout = " ".join(done.stdout.split())
    assert stdout.count("blind baseline: distribution shift shown:") == 1, stdout
    assert "(Bonferroni 98.75 %, strongest of 4) warning: its interval lies above 0.5" in stdout
    assert "blind baseline: distribution shift shown:" in out.read_text()
