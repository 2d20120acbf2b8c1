"""Issue 24, one evaluation set per run: the ReCaLL family's shots are held out of every attack's
evaluation alike, so an attack's figures do not depend on which other attacks run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imprint.attacks.shots import HELDOUT_KEY, hold_out
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.run import RunConfig, execute_run

WORDS = [
    "river",
    "stone",
    "quiet",
    "lamp",
    "orbit",
    "velvet",
    "candle",
    "meadow",
    "signal",
    "harbor",
]


def _data(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"d{n}.jsonl"
    rows = [
        {"text": f"The {WORDS[i % 10]} of day {i} met a {WORDS[(i * 3) % 10]} near {i * 11}.",
         "label": i % 2}
        for i in range(n)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(model: Path, data: Path, out: Path, attacks: tuple[str, ...], **kw: object):
    config = RunConfig(model=str(model), data=str(data), out=out, attacks=attacks,
                       n_bootstrap=50, blind=False, progress=False, **kw)  # fmt: skip
    return execute_run(config)


def test_loss_reads_the_same_with_and_without_recall(tiny_model_dir, tmp_path):
    data = _data(tmp_path, 48)  # 24 natural non-members: 10 held out, 14 evaluated
    alone = _run(tiny_model_dir, data, tmp_path / "alone", ("loss",))
    # two shots: the tiny model's context is 128 tokens; the run still holds out 10
    both = _run(tiny_model_dir, data, tmp_path / "both", ("loss", "recall"),
                params={"recall": {"n_shots": 2}})  # fmt: skip
    assert [s.id for s in alone.samples] == [s.id for s in both.samples]
    assert len(alone.samples) == 38
    a, b = alone.metrics.to_dict()["attacks"]["loss"], both.metrics.to_dict()["attacks"]["loss"]
    assert a["auc"] == b["auc"]  # the same figure, interval too, not merely close
    assert alone.manifest["shots"] == both.manifest["shots"]
    shots = alone.manifest["shots"]
    assert shots["held_out"] == 10 and shots["same_for_every_attack"] is True
    assert not set(shots["ids"]) & {s.id for s in alone.samples}


def test_recall_takes_the_first_shots_of_the_held_out_draw(tiny_model_dir, tmp_path):
    data = _data(tmp_path, 48)
    run = _run(tiny_model_dir, data, tmp_path / "r", ("recall",), params={"recall": {"n_shots": 2}})
    held = run.manifest["shots"]["ids"]
    assert len(held) == 10 and len(run.samples) == 38  # n_shots 2 still holds 10 out
    assert "held-out shots" in run.manifest["data"]["dropped"] or any(
        "held out" in k for k in run.manifest["data"]["dropped"]
    )
    with pytest.raises(ConfigError, match=r"--shot-holdout 12"):
        _run(tiny_model_dir, data, tmp_path / "r2", ("recall",),
             params={"recall": {"n_shots": 12}})  # fmt: skip


def test_small_data_holds_out_nothing_and_says_why(tiny_model_dir, tmp_path):
    data = _data(tmp_path, 12)  # 6 natural non-members: fewer than 2 x 10
    run = _run(tiny_model_dir, data, tmp_path / "s", ("loss",))
    assert len(run.samples) == 12
    assert run.manifest["shots"]["held_out"] == 0
    assert "fewer than 2 x 10" in run.manifest["shots"]["why_none"]
    with pytest.raises(ConfigError, match=r"holds out 0.*--pool nonmembers"):
        _run(tiny_model_dir, data, tmp_path / "s2", ("loss", "recall"),
             params={"recall": {"n_shots": 2}})  # fmt: skip
    small = _run(tiny_model_dir, data, tmp_path / "s3", ("loss", "recall"), shot_holdout=2,
                 params={"recall": {"n_shots": 2}})  # fmt: skip
    assert len(small.samples) == 10 and small.manifest["shots"]["held_out"] == 2


def test_hold_out_from_a_pool_removes_evaluation_rows_with_a_pool_text():
    evaluation = [Sample(f"e{i}", f"text {i}", i % 2) for i in range(6)]
    pool = tuple(Sample(f"p{i}", f"text {i}" if i == 1 else f"pool {i}", 0) for i in range(5))
    held = hold_out(evaluation, pool, 10, seed=0)
    assert len(held.shots) == 5 and held.removed_ids == {"e1"}
    assert HELDOUT_KEY.startswith("_")  # never a name a user's --pool can take


def test_n_per_label_still_evaluates_n_per_label(tiny_model_dir, tmp_path):
    data = _data(tmp_path, 48)  # shots are held out before the N per label are drawn
    run = _run(tiny_model_dir, data, tmp_path / "n", ("loss",), n_per_label=12)
    labels = [s.label for s in run.samples]
    assert labels.count(1) == 12 and labels.count(0) == 12
    assert run.manifest["shots"]["held_out"] == 10
    assert not set(run.manifest["shots"]["ids"]) & {s.id for s in run.samples}
