"""Helpers shared by the command-line tests: invoke ``imprint`` in-process and a tiny data file."""

from __future__ import annotations

from pathlib import Path

__all__ = ["cli", "small_data"]


def cli(*args: object) -> tuple[int, str]:
    """``imprint ARGS`` in-process: (exit code, output with whitespace runs folded to one space,
    so messages that the terminal wrapped can be matched whole)."""
    from typer.testing import CliRunner

    from imprint.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def small_data(tmp_path: Path) -> Path:
    """``tmp_path/d.jsonl``: 8 short texts, labels alternating 0/1 (for refusals that must
    come before any model is loaded)."""
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(f'{{"text": "text number {i} here", "label": {i % 2}}}\n' for i in range(8)),
        encoding="utf-8",
    )
    return path
