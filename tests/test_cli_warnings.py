"""imprint's own warnings reach the terminal as one clean ``warning:`` line, never as Python's
raw ``path:line: Category: message`` form (issue 19: LabelConflictWarning before an error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.cli import app


@pytest.mark.parametrize("command", ["run", "blind"])
def test_label_conflict_is_a_clean_warning_before_the_clean_error(
    command: str, tmp_path: Path, tiny_model_dir: Path
) -> None:
    data = tmp_path / "conflict.jsonl"
    data.write_text('{"text": "a b c", "label": 1}\n{"text": "a b c", "label": 0}\n')
    args = [command, "--data", str(data)]
    if command == "run":
        args += ["--model", str(tiny_model_dir), "--attacks", "loss", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    output = result.output
    assert result.exit_code == 2, output
    assert "LabelConflictWarning" not in output and "transforms.py" not in output
    assert "warning: 1 text(s) appear as both member and non-member" in output
    assert "error: every sample was dropped" in output
    assert output.index("warning:") < output.index("error:")
