"""A document flag typed with ``--unit sequence`` is refused in one line naming both flags,
before any model is looked at (issue 37 item 16: ``game build --doc-sequences 3`` with the
default ``--unit sequence`` built a game of single texts and said nothing; ``run --max-seqs 25``,
the default value typed, passed silently)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.cli.game import _doc_sequences

runner = CliRunner()
MISSING = "no-such-model-dir"  # a model that cannot load: the flag check must come first


@pytest.mark.parametrize("k", ["3", "10", "0"])
def test_game_build_refuses_doc_sequences_with_unit_sequence(tmp_path: Path, k: str) -> None:
    for unit in ([], ["--unit", "sequence"]):  # the default unit and the typed one
        args = ["game", "build", "--model", MISSING, *unit, "--doc-sequences", k]
        result = runner.invoke(app, [*args, "--out", str(tmp_path / "g")])
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())  # click boxes and wraps the line
        assert "--doc-sequences applies to documents but --unit is sequence" in text, text
        assert "add --unit document" in text and MISSING not in text
        assert not (tmp_path / "g").exists()


def test_game_build_doc_sequences_default_and_typed() -> None:
    assert _doc_sequences("sequence", None) == 0
    assert _doc_sequences("document", None) == 10
    assert _doc_sequences("document", 3) == 3


@pytest.mark.parametrize(
    "flag,value",
    [("--max-seqs", "25"), ("--seq-words", "200"), ("--di-power", "0.8"),
     ("--di-effect-auc", "0.6"), ("--meeus-features", "agg"), ("--doc-field", "doc")],
)  # fmt: skip
def test_run_refuses_a_document_flag_with_unit_sequence_even_at_its_default(
    tmp_path: Path, flag: str, value: str
) -> None:
    args = ["run", "--model", MISSING, "--data", "wikimia:32", "--unit", "sequence"]
    result = runner.invoke(app, [*args, flag, value, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert f"{flag} applies to documents but --unit is sequence" in lines[0]
    assert "add --unit document" in lines[0] and not (tmp_path / "o").exists()


def test_run_names_every_document_flag_given_with_unit_sequence(tmp_path: Path) -> None:
    args = ["run", "--model", MISSING, "--data", "wikimia:32", "--max-seqs", "25"]
    result = runner.invoke(app, [*args, "--di-power", "0.8", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "error: --max-seqs, --di-power apply to documents but --unit is sequence" in (
        result.output
    )
