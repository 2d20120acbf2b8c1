"""The docs' worked example (docs/extending.md): an attack that uses existing request kinds is one
new file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import WIKIMIA

ROOT = Path(__file__).resolve().parents[1]


def _example_from_readme() -> str:
    page = (ROOT / "docs" / "extending.md").read_text()
    match = re.search(r"```python\n# src/imprint/attacks/median_ll\.py\n(.*?)```", page, re.S)
    assert match, "docs/extending.md's worked example (src/imprint/attacks/median_ll.py) is missing"
    return match.group(1)


def test_the_worked_example_is_one_file_and_runs(tiny_model_dir, tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "imprint", tree / "imprint")
    (tree / "imprint" / "attacks" / "median_ll.py").write_text(_example_from_readme())
    rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()][:16]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(tree), "IMPRINT_CACHE_DIR": str(tmp_path / "c")}
    listed = subprocess.run(
        [sys.executable, "-m", "imprint", "attacks"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0 and "median_ll" in listed.stdout, listed.stderr
    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--data", str(data), "--attacks", "loss,median_ll"]
    args += ["--device", "cpu", "--no-blind", "--bootstrap", "20", "--out", str(out)]
    args += ["--cache", str(tmp_path / "s.sqlite")]
    ran = subprocess.run(
        [sys.executable, "-m", "imprint", "run", *args], env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    # one forward pass per text served both attacks
    assert manifest["requests"]["target"]["logprobs"]["executed"] == len(rows)
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["attacks"]["median_ll"]["auc"]["estimate"] <= 1
