"""Issue 24, grids: --plan lists every missing model and data set at once; the grid's store is
a run's ($IMPRINT_CACHE_DIR)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from imprint.backends.models import default_cache_path
from imprint.cli import app
from imprint.study.spec import load_spec


def _grid(tmp_path: Path, models: list[str], data: list[str]) -> Path:
    path = tmp_path / "grid.yaml"
    lines = ["models:", *(f"  - {{name: m{i}, model: '{m}'}}" for i, m in enumerate(models))]
    lines += ["benchmarks:", *(f"  - {{name: b{i}, data: '{d}'}}" for i, d in enumerate(data))]
    lines += ["attacks: [loss]", "settings: {n_bootstrap: 20}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plan_lists_every_missing_model_and_data_set(tiny_model_dir, tmp_path):
    here = tmp_path / "here.jsonl"
    here.write_text(
        "".join(json.dumps({"text": f"t {i}", "label": i % 2}) + "\n" for i in range(6))
    )
    gone = [str(tmp_path / f"missing-{i}.jsonl") for i in range(3)]
    grid = _grid(tmp_path, [str(tiny_model_dir), str(tmp_path / "no-model")],
                 [gone[0], str(here), gone[1], gone[2]])  # fmt: skip
    result = CliRunner().invoke(app, ["experiment", str(grid), "--plan",
                                      "--out", str(tmp_path / "study")])  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "4 problems" in lines[0]
    for name in ("'b0'", "'b2'", "'b3'", "no-model"):
        assert name in lines[0], name
    assert "'b1'" not in lines[0]  # the data set that is here is not listed


def test_grid_store_defaults_to_the_runs_store(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(tmp_path / "shared-cache"))
    spec = load_spec(_grid(tmp_path, ["smollm2-135m"], ["wikimia:32"]))
    assert spec.cache == default_cache_path() == tmp_path / "shared-cache" / "signals.sqlite"
