"""The evaluation package's contracts: metrics.json written by earlier code reads back and
writes out byte for byte, and the report stage imports nothing from the stages before the
evaluation (it only renders typed results)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from imprint.evaluation import RunMetrics, read_metrics
from imprint.report.writer import to_jsonable

FIXTURES = Path(__file__).parent / "fixtures"
PACKAGE = Path(__file__).parents[1] / "src" / "imprint"
# Written by `imprint run` at commit 2df37b6 (before evaluation/ existed):
#   --model smollm2-135m --data wikimia:32 --n-per-label 15 --attacks loss,zlib,min_k
#   --model smollm2-135m --data wikimia:128 --n-per-label 12 --unit document --seq-words 32
#     --max-seqs 4 --meeus-features both --attacks loss,zlib
STORED = ["metrics_head_sequence.json", "metrics_head_document.json"]
# what the report stage may not import: every stage up to the evaluation's inputs
UPSTREAM = ("signals", "requests", "backends", "executors", "scoring", "attacks", "run",
            "documents", "diagnostics", "study", "game")  # fmt: skip


@pytest.mark.parametrize("name", STORED)
def test_stored_metrics_json_round_trips_byte_for_byte(name: str) -> None:
    """Byte for byte, except the one line the writer adds since outputs are versioned: the
    stored files predate ``format_version`` and read as they are (imprint.formats)."""
    from imprint.formats import FORMAT_VERSION

    file = FIXTURES / name
    metrics = read_metrics(file)
    assert isinstance(metrics, RunMetrics)
    written = json.dumps(to_jsonable(metrics.to_dict()), indent=2) + "\n"
    stored = file.read_text(encoding="utf-8")
    assert "format_version" not in stored and stored.startswith("{\n")
    versioned = f'{{\n  "format_version": "{FORMAT_VERSION}",\n' + stored[2:]
    assert written == versioned


def test_stored_document_run_keeps_its_document_rows() -> None:
    metrics = read_metrics(FIXTURES / "metrics_head_document.json")
    assert metrics.documents is not None
    rows = metrics.documents.rows
    assert any(r.aggregation == "meeus" for r in rows.values())
    assert {r.aggregation for r in rows.values()} >= {"mean", "shi (per fold, averaged)", "blind"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_report_imports_nothing_upstream_of_the_evaluation() -> None:
    found = {
        f"{path.name}: {name}"
        for path in sorted((PACKAGE / "report").glob("*.py"))
        for name in _imports(path)
        if name.startswith("imprint.") and name.split(".")[1] in UPSTREAM
    }
    assert not found, f"report/ imports upstream stages: {sorted(found)}"


def test_evaluation_never_imports_the_report() -> None:
    found = {
        f"{path.name}: {name}"
        for path in sorted((PACKAGE / "evaluation").glob("*.py"))
        for name in _imports(path)
        if name.startswith("imprint.report")
    }
    assert not found, f"evaluation/ imports the report stage: {sorted(found)}"
