"""Every model call of a run goes through the request layer: a rerun executes nothing, and a
SimMIA run killed half-way resumes without drawing its samples again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from conftest import HashEmbedder, wikimia_subset

from imprint.cli.flags import config_from_flags
from imprint.run import execute_run


def test_rerun_of_every_attack_makes_no_model_call(
    tiny_model_dir, tiny_ref_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr("imprint.requests.embed.default_embedder", HashEmbedder)
    config = dict(
        model=str(tiny_model_dir),
        data=str(wikimia_subset(tmp_path, 8)),
        attacks=("all", "samia", "simmia", "petal"),
        params={
            "samia": {"n_samples": 2, "max_tokens": 6},
            "simmia": {"n_samples": 4, "n_shots": 1, "max_word_tokens": 2},
            "petal": {"surrogate": str(tiny_ref_dir)},
            "recall": {"n_shots": 1},
        },
        truncate_words=8,  # the tiny model's context is 128 tokens: shot prefix + text fit
        shot_holdout=1,  # 8 non-members: the default 10 held-out shots need 20 (issue 24)
        device="cpu",
        cache=tmp_path / "signals.sqlite",
        progress=False,
        n_bootstrap=20,
        blind=False,
    )
    first = execute_run(config_from_flags(out=tmp_path / "first", **config))
    second = execute_run(config_from_flags(out=tmp_path / "second", **config))
    done = first.manifest["requests"]
    kinds = {kind for role in done.values() for kind in role}
    assert {"logprobs", "sample", "next_word", "embed"} <= kinds, done
    assert all(c["executed"] > 0 for role in done.values() for c in role.values()), done
    again = second.manifest["requests"]
    assert again.keys() == done.keys()
    for role, by_kind in again.items():
        for kind, counts in by_kind.items():
            assert counts["executed"] == 0, (role, kind, counts)
            assert counts["cache_hits"] == counts["requests"] == done[role][kind]["requests"]
    assert first.scores.keys() == second.scores.keys()
    for column, values in first.scores.items():
        np.testing.assert_array_equal(second.scores[column], values, err_msg=column)
    on_disk = json.loads((tmp_path / "second" / "manifest.json").read_text())
    assert on_disk["requests"] == again


def _stored(path: Path, kind: str) -> int:
    try:
        with sqlite3.connect(path) as conn:
            row = conn.execute("SELECT COUNT(*) FROM request_results WHERE kind=?", (kind,))
            return int(row.fetchone()[0])
    except sqlite3.Error:
        return 0


def test_sigkill_half_way_through_simmia_resumes_without_redrawing(tiny_model_dir, tmp_path):
    data = wikimia_subset(tmp_path, 12)
    cache = tmp_path / "killed.sqlite"
    params = ["simmia.n_samples=8", "simmia.n_shots=2", "simmia.max_word_tokens=3"]
    args = [sys.executable, "-m", "imprint", "run", "--model", str(tiny_model_dir)]
    args += ["--data", str(data), "--attacks", "simmia", "--bootstrap", "20", "--no-blind"]
    args += ["--device", "cpu", "--cache", str(cache), "--out", str(tmp_path / "killed")]
    args += ["--shot-holdout", "2"]  # 12 non-members: the default 10 need 20 (issue 24)
    for p in params:
        args += ["--param", p]
    env = {**os.environ, "IMPRINT_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while _stored(cache, "next_word") < 8 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    drawn = _stored(cache, "next_word")
    total = 2 * 22  # 22 evaluated texts (2 shots left), with and without the prefix
    assert 0 < drawn < total, f"the run must be killed half-way ({drawn}); {err.decode()[-800:]}"
    resumed = execute_run(
        config_from_flags(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / "resumed",
            attacks=("simmia",),
            params={"simmia": {"n_samples": 8, "n_shots": 2, "max_word_tokens": 3}},
            shot_holdout=2,
            device="cpu",
            cache=cache,
            progress=False,
            n_bootstrap=20,
            blind=False,
        )
    )
    counts = resumed.manifest["requests"]["target"]["next_word"]
    assert counts["requests"] == total
    assert counts["cache_hits"] == drawn  # nothing drawn before the kill is drawn again
    assert counts["executed"] == total - drawn
    assert np.isfinite(resumed.scores["simmia"]).all()
