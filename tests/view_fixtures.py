"""A real runs/ folder for ``imprint view`` tests, made through the commands a user types on the
tiny random models (tests/conftest.py): two runs of one data set on two models (comparable; the
first with its blind baseline), a document run, a privacy game, an audit of that game (with its
run), a study (with its run), and three odd folders (a half-written run, a run whose
metrics.json is cut short, a folder imprint did not write)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_game import write_pool
from typer.testing import CliRunner

from imprint.cli import app
from imprint.diagnostics import blind

#: the folder names the set holds, by the kind the index shows
KINDS = {
    "r-tiny": "run",
    "r-ref": "run",
    "docs": "document run",
    "game": "game",
    "audit": "audit",
    "study": "study",
    "r-cut": "run",
    "r-new": "folder",
    "notes": "folder",
}


def _invoke(*args: object) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, f"{result.exception!r}: {result.output[-600:]}"


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def build_runs(root: Path, model: Path, ref: Path) -> Path:
    """``root/runs`` holding every kind of folder (see the module docstring)."""
    runs = root / "runs"
    cache = root / "cache.sqlite"
    topics = ["the council met by the river", "a storm crossed the bay", "the team won a cup",
              "a probe landed on a moon", "the bridge opened today"]  # fmt: skip
    data = _write_jsonl(root / "texts.jsonl", [
        {"id": f"{label}-{i}", "label": label,
         "text": f"{topics[(i + label) % 5]} {i} and {topics[(3 * i + 1) % 5]}"}
        for label in (1, 0) for i in range(24)
    ])  # fmt: skip
    common = ["--data", data, "--bootstrap", 50, "--device", "cpu", "--cache", cache]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blind, "N_ESTIMATORS", 30)  # the SoK forest, smaller for speed
        _invoke("run", "--model", model, *common, "--attacks", "loss,zlib,min_k",
                "--out", runs / "r-tiny")  # fmt: skip
    _invoke("run", "--model", ref, *common, "--attacks", "loss,zlib,min_k", "--no-blind",
            "--out", runs / "r-ref")  # fmt: skip
    docs = _write_jsonl(root / "docs.jsonl", [
        {"text": f"plain words about book {d} part {p} and {topics[(d + p) % 5]}",
         "label": d % 2, "book": f"b{d}"}
        for d in range(8) for p in range(3)
    ])  # fmt: skip
    _invoke("run", "--model", model, "--data", docs, "--attacks", "loss", "--unit", "document",
            "--doc-field", "book", "--seq-words", 4, "--bootstrap", 50, "--no-blind",
            "--device", "cpu", "--cache", cache, "--out", runs / "docs")  # fmt: skip
    _invoke("game", "build", "--model", model, "--pool", write_pool(root / "pool.txt"),
            "--pool-size", 20, "--words", 8, "--epochs", 1, "--max-length", 64,
            "--repetitions", "1", "--canaries", 16, "--canary-generator", "random",
            "--canary-words", 6, "--heldout", 0, "--canary-inclusion", "bernoulli",
            "--device", "cpu", "--out", runs / "game")  # fmt: skip
    _invoke("audit", "--game", runs / "game", "--attack", "loss", "--device", "cpu",
            "--out", runs / "audit")  # fmt: skip
    spec = {"settings": {"n_bootstrap": 20, "device": "cpu", "blind": False},
            "models": [{"name": "tiny", "model": str(model)}],
            "benchmarks": [{"name": "texts", "data": str(data)}],
            "attacks": ["loss", "min_k"], "out": str(runs / "study")}  # fmt: skip
    (root / "study.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    _invoke("experiment", root / "study.yaml", "--no-progress")
    # the odd ones: a copy of a run with metrics.json cut short, a run still being written,
    # and a folder of the user's own
    cut = runs / "r-cut"
    cut.mkdir()
    for name in ("manifest.json", "scores.parquet", "report.html"):
        (cut / name).write_bytes((runs / "r-tiny" / name).read_bytes())
    (cut / "metrics.json").write_text((runs / "r-tiny" / "metrics.json").read_text()[:200])
    (runs / ".r-new.partial-123-0123abcd").mkdir()
    (runs / "notes").mkdir()
    (runs / "notes" / "todo.txt").write_text("try gpt2\n")
    return runs
