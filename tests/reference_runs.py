"""A CLI run with a training manifest that must be refused before any model work (shared by the
reference-model tests), and the count that shows no forward pass ran."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner, Result

from imprint.cli import app


def run_with_references(tmp_path: Path, model: Path, data: Path, manifest: Path) -> Result:
    """``imprint run`` of loss and rmia with ``manifest`` as --references, its cache at
    ``tmp_path/c.sqlite`` and its output at ``tmp_path/out``."""
    return CliRunner().invoke(
        app,
        ["run", "--model", str(model), "--data", str(data), "--attacks", "loss,rmia",
         "--references", str(manifest), "--no-blind", "--device", "cpu",
         "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out")],
    )  # fmt: skip


def logprob_rows(cache: Path) -> int:
    """Log-prob results stored in ``cache`` (0 where the run made no cache at all)."""
    if not cache.exists():
        return 0
    with sqlite3.connect(cache) as db:
        query = "SELECT COUNT(*) FROM request_results WHERE kind = 'logprobs'"
        return int(db.execute(query).fetchone()[0])
