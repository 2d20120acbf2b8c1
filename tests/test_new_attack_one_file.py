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

import numpy as np
import pandas as pd
from conftest import WIKIMIA

ROOT = Path(__file__).resolve().parents[1]


def _example_from_readme() -> str:
    page = (ROOT / "docs" / "extending.md").read_text()
    match = re.search(r"```python\n# src/imprint/attacks/median_ll\.py\n(.*?)```", page, re.S)
    assert match, "docs/extending.md's worked example (src/imprint/attacks/median_ll.py) is missing"
    return match.group(1)


def _package_with(tmp_path: Path, name: str, code: str) -> tuple[dict[str, str], Path, list]:
    """A copy of the package with one new attack file ``name``, 16 WikiMIA texts to score, and
    the environment that runs the copy."""
    tree = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "imprint", tree / "imprint")
    (tree / "imprint" / "attacks" / name).write_text(code)
    rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()][:16]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(tree), "IMPRINT_CACHE_DIR": str(tmp_path / "c")}
    return env, data, rows


def test_the_worked_example_is_one_file_and_runs(tiny_model_dir, tmp_path):
    env, data, rows = _package_with(tmp_path, "median_ll.py", _example_from_readme())
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


def _model_call_example() -> str:
    page = (ROOT / "docs" / "extending.md").read_text()
    match = re.search(r"```python\n# src/imprint/attacks/echo_sim\.py\n(.*?)```", page, re.S)
    assert match, "docs/extending.md's model-call example (src/imprint/attacks/echo_sim.py) is gone"
    return match.group(1)


def test_a_model_call_attack_is_one_file_planned_counted_and_stored(tiny_model_dir, tmp_path):
    """The docs' second example samples text and embeds it: one new file, and the run plans its
    calls (read off its planned_requests), executes what it planned, stores the answers, and runs
    on Ray unchanged."""
    env, data, rows = _package_with(tmp_path, "echo_sim.py", _model_call_example())
    args = ["--model", str(tiny_model_dir), "--data", str(data), "--attacks", "loss,echo_sim"]
    args += ["--device", "cpu", "--no-blind", "--bootstrap", "20"]
    args += ["--cache", str(tmp_path / "s.sqlite"), "--param", "echo_sim.max_tokens=4"]
    manifests = []
    for out in (tmp_path / "r1", tmp_path / "r2"):
        ran = subprocess.run(
            [sys.executable, "-m", "imprint", "run", *args, "--out", str(out)],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-2000:]
        manifests.append(json.loads((out / "manifest.json").read_text()))
    first, again = manifests
    planned = {(c["role"], c["kind"]): c["count"] for c in first["plan"]["calls"]}
    executed = first["requests"]
    assert planned[("target", "greedy")] == executed["target"]["greedy"]["executed"] == len(rows)
    # the suffixes' embeddings are planned; the continuations' are known only from the answers
    words = [r["input"].split() for r in rows]
    suffixes = {" ".join(w[max(1, len(w) // 2) :]).strip() for w in words}
    assert planned[("embedder", "embed")] == len(suffixes)
    assert executed["embedder"]["embed"]["executed"] >= len(suffixes)
    assert first["plan"]["uncounted"]["echo_sim"] == ["embed (of the continuations)"]
    assert again["requests"]["target"]["greedy"]["executed"] == 0  # stored: asked nothing
    assert again["requests"]["embedder"]["embed"]["executed"] == 0
    metrics = json.loads((tmp_path / "r2" / "metrics.json").read_text())
    assert 0 <= metrics["attacks"]["echo_sim"]["auc"]["estimate"] <= 1

    # the same file runs on Ray as it is: a fresh store, one worker, the plan's calls executed there
    # and the scores those of the local run
    fresh = {str(tmp_path / "s.sqlite"): str(tmp_path / "ray.sqlite")}
    ray_args = [fresh.get(a, a) for a in args]
    on_ray = subprocess.run(
        [sys.executable, "-m", "imprint", "run", *ray_args, "--out", str(tmp_path / "r3"),
         "--executor", "ray", "--workers", "1"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]
    ray_manifest = json.loads((tmp_path / "r3" / "manifest.json").read_text())
    where = ray_manifest["executor"]["where"]
    assert ray_manifest["executor"]["kind"] == "ray", ray_manifest["executor"]
    assert "driver" not in where["target"]["greedy"] and "driver" not in where["embedder"]["embed"]
    assert ray_manifest["requests"]["target"]["greedy"]["executed"] == len(rows)
    assert ray_manifest["requests"]["embedder"]["embed"]["executed"] >= len(suffixes)
    local = pd.read_parquet(tmp_path / "r1" / "scores.parquet")
    remote = pd.read_parquet(tmp_path / "r3" / "scores.parquet")
    for column in ("loss", "echo_sim"):
        np.testing.assert_allclose(remote[column], local[column], rtol=1e-5, atol=1e-6)
