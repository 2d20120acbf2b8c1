"""The pandas-first Python API (issue 35): ``imprint.run``, ``imprint.load_run`` /
``load_study`` / ``load_audit``, ``RunMetrics.to_frame``, ``float(Interval)``, attack lists given
as one string, ``RunConfig`` without ``out``, and ``import imprint`` staying lazy. The Python
guide's examples run here, on a tiny random model at the sizes the guide names."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_docs_recipes import python_blocks
from typer.testing import CliRunner

import imprint
from imprint.cli import app
from imprint.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide" / "python-api.md"
runner = CliRunner()


def _cli(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _data(path: Path, n: int = 8) -> Path:
    """``n`` members and ``n`` non-members with a ``source`` and a ``year`` field (meta)."""
    rows = [
        {"id": f"{label}-{i}", "label": label, "source": ["wiki", "news"][i % 2], "year": 2000 + i,
         "text": f"note {i + n * label} from the {['river', 'hill', 'port'][i % 3]} desk"}
        for label in (1, 0) for i in range(n)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tiny_model_dir) -> Path:
    """A run of two attacks (loss, zlib; zlib writes zlib and zlib_char) on 8 + 8 texts."""
    folder = tmp_path_factory.mktemp("api")
    run = imprint.run(model=str(tiny_model_dir), data=str(_data(folder / "d.jsonl")),
                      attacks="loss, zlib", out=folder / "run", n_bootstrap=20, blind=False,
                      shot_holdout=0, shared_args={"device": "cpu"})  # fmt: skip
    return run.path


def test_a_run_loads_with_scores_metrics_and_manifest(small_run: Path) -> None:
    run = imprint.load_run(small_run)
    assert run.attacks == ("loss", "zlib", "zlib_char")
    assert run.manifest["config"]["attacks"] == ["loss", "zlib"]  # the string, split on commas
    scores = run.scores
    assert isinstance(scores, pd.DataFrame) and len(scores) == 16
    # meta expanded into columns (the file keeps it as JSON text), before the attack columns;
    # a data file's own id is meta (the run's id names the file and line)
    assert list(scores.columns) == ["id", "label", "text", "meta.id", "meta.source",
                                    "meta.year", "loss", "zlib", "zlib_char"]  # fmt: skip
    assert set(scores["meta.source"]) == {"wiki", "news"} and scores["meta.year"].max() == 2007
    assert scores["meta.id"].iloc[0] == "1-0" and scores["id"].iloc[0] != "1-0"
    assert sorted(scores["label"].tolist()) == [0] * 8 + [1] * 8
    assert run.format_version == "1.0" and repr(run).startswith("Run(")


def test_metrics_to_frame_has_a_row_per_attack_and_figure(small_run: Path) -> None:
    metrics = imprint.load_run(small_run).metrics
    frame = metrics.to_frame()
    assert list(frame.columns) == ["attack", "metric", "estimate", "low", "high", "method",
                                   "unit", "n_members", "n_nonmembers", "not_measurable",
                                   "basis"]  # fmt: skip
    assert len(frame) == 3 * (1 + 4)  # three columns x (AUC + four TPR bounds)
    auc = frame[(frame.attack == "loss") & (frame.metric == "auc")].iloc[0]
    interval = metrics.attacks["loss"].auc
    assert (auc.estimate, auc.low, auc.high) == (interval.estimate, interval.low, interval.high)
    assert auc.unit == "texts" and auc.method == metrics.attacks["loss"].method == "bca"
    assert auc.basis is None  # an interval read from the resamples
    assert float(interval) == interval.estimate  # Interval.__float__ is the estimate
    tpr = frame[(frame.attack == "loss") & (frame.metric == "tpr@1%")].iloc[0]
    assert math.isnan(tpr.estimate) and "400 non-members" in tpr.not_measurable  # 8 here


def test_older_files_read_and_a_newer_major_version_is_refused(small_run, tmp_path) -> None:
    old = tmp_path / "old"
    shutil.copytree(small_run, old)
    for name in ("metrics.json", "manifest.json", ".imprint-output.json"):  # as before versions
        data = json.loads((old / name).read_text())
        assert data.pop("format_version") == "1.0"
        (old / name).write_text(json.dumps(data))
    run = imprint.load_run(old)
    assert run.format_version is None and set(run.metrics.attacks) == set(run.attacks)
    assert run.scores.shape == (16, 9)
    for name in ("metrics.json", "manifest.json", ".imprint-output.json"):
        newer = tmp_path / f"newer-{name}"
        shutil.copytree(small_run, newer)
        data = json.loads((newer / name).read_text())
        (newer / name).write_text(json.dumps({**data, "format_version": "2.0"}))
        with pytest.raises(DataError, match=r"format_version 2\.0.*reads format 1\.x.*2\.x"):
            imprint.load_run(newer)
    (newer / ".imprint-output.json").write_text('{"kind": "run", "format_version": "1.7"}')
    assert imprint.load_run(newer).attacks  # a newer minor adds fields: read


def test_the_wrong_kind_of_folder_is_refused_naming_its_loader(small_run, tmp_path) -> None:
    with pytest.raises(DataError, match="not a study folder"):
        imprint.load_study(small_run)
    with pytest.raises(DataError, match="not an audit folder"):
        imprint.load_audit(small_run)
    study = tmp_path / "s"
    (study / "cells").mkdir(parents=True)
    (study / ".imprint-output.json").write_text('{"kind": "study"}')
    with pytest.raises(DataError, match=r"lacks manifest\.json.*\(study\) folder: read it "
                       r"with imprint\.load_study"):  # fmt: skip
        imprint.load_run(study)


def test_attack_lists_given_as_one_string_are_split_everywhere() -> None:
    from imprint.audit.audit import check_attacks
    from imprint.run import RunConfig

    assert RunConfig(model="m", data="d", attacks="loss,zlib").attacks == ("loss", "zlib")
    assert RunConfig(model="m", data="d", attacks=" loss , zlib ").attacks == ("loss", "zlib")
    assert RunConfig(model="m", data="d", attacks=["loss"]).attacks == ("loss",)
    assert RunConfig(model="m", data="d").out is None  # out is optional, as --out
    # as --attacks reads it: empty items skipped, an empty list item refused
    assert RunConfig(model="m", data="d", attacks="loss,,zlib,").attacks == ("loss", "zlib")
    with pytest.raises(ConfigError, match=r"attacks \['loss', ' '\] has an empty name"):
        RunConfig(model="m", data="d", attacks=["loss", " "])
    with pytest.raises(ConfigError, match="not int"):
        RunConfig(model="m", data="d", attacks=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="names no attack"):
        RunConfig(model="m", data="d", attacks="")
    assert check_attacks("loss,zlib") == ("loss", "zlib")  # imprint audit's Python entry
    with pytest.raises(ConfigError, match="unknown attack 'nope'|nope"):
        check_attacks("loss,nope")


def test_imprint_run_refuses_an_unknown_option_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"no option n_per_lable \(did you mean n_per_label\?\)"):
        imprint.run(model="m", data="d", attacks="loss", n_per_lable=5)


def test_import_imprint_imports_nothing_else() -> None:
    code = ("import sys, imprint; print(sorted(m for m in sys.modules if m.startswith("
            "('imprint.', 'pandas', 'numpy', 'torch', 'typing'))))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout  # the API's names load on first use
    code = "import imprint; print(imprint.load_run.__module__, callable(imprint.run))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["imprint.run.folder", "True"]
    assert imprint.run.RunConfig is imprint.RunConfig  # the package stays a package
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        imprint.nope  # noqa: B018


#: the substitutions that make the guide's examples tiny (the guide names these sizes)
def _tiny(code: str, model: Path) -> str:
    code = code.replace('"smollm2-135m"', repr(str(model)))
    return re.sub(r"n_per_label=\d+", "n_per_label=6, n_bootstrap=20, progress=False", code)


def _make_study_and_audit(model: Path) -> None:
    """The folders the guide's study and audit example reads, made by the commands it names
    (`imprint experiment quick.yaml --out studies/quick`, `imprint canaries make ...`,
    `imprint audit ...`), with the tiny model."""
    data = _data(Path("quick.jsonl"), n=6)
    spec = {"models": [{"name": "tiny", "model": str(model)}],
            "benchmarks": [{"name": "quick", "data": str(data)}], "attacks": ["loss", "zlib"],
            "settings": {"n_bootstrap": 20, "device": "cpu", "blind": False}}  # fmt: skip
    Path("quick.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    _cli("experiment", "quick.yaml", "--out", "studies/quick", "--no-progress")
    _cli("canaries", "make", "--n", 40, "--out", "canaries/demo", "--model", model,
         "--words", 6, "--seed", 2)  # fmt: skip
    _cli("audit", "--model", model, "--canaries", "canaries/demo", "--attack", "loss,zlib",
         "--out", "audits/demo", "--device", "cpu")  # fmt: skip


def test_the_python_guide_runs(tiny_model_dir, tmp_path, monkeypatch, one_torch_thread) -> None:
    page = GUIDE.read_text(encoding="utf-8")
    for command in ("imprint experiment quick.yaml --out studies/quick",
                    "imprint canaries make --n 40 --out canaries/demo --model smollm2-135m",
                    "--canaries canaries/demo --attack loss,zlib --out audits/demo"):  # fmt: skip
        assert command in " ".join(page.split()), command  # the commands this test runs
    assert "`n_per_label=6`, `n_bootstrap=20`" in page  # the sizes this test uses, named
    monkeypatch.chdir(tmp_path)
    _make_study_and_audit(tiny_model_dir)
    blocks = python_blocks(GUIDE)
    assert len(blocks) >= 6
    for block in blocks:
        exec(compile(_tiny(block, tiny_model_dir), str(GUIDE), "exec"), {"__name__": "guide"})
    # what the examples read is what the commands wrote
    study = imprint.load_study("studies/quick")
    cells = study.metrics.to_frame()
    assert set(cells.attack) == {"loss", "zlib"} and set(cells.metric) >= {"auc", "tpr@1%"}
    assert len(study.scores) == 12 and set(study.scores.columns) >= {"run", "loss", "meta.year"}
    assert study.tables and all(isinstance(t, pd.DataFrame) for t in study.tables.values())
    audit = imprint.load_audit("audits/demo")
    assert len(audit.scores) == 40 and audit.scores.label.sum() == 16
    assert set(audit.curves.attack) == {"loss", "zlib", "zlib_char"}
    assert audit.epsilon_lower_bound >= 0 and audit.manifest["format_version"] == "1.0"
    latest = imprint.load_run("runs/latest")  # imprint.run without out: runs/<time>-..., linked
    assert latest.path.parent.name == "runs" and latest.path.name.endswith("-wikimia-32")
    assert latest.attacks[:2] == ("loss", "zlib") and "min_k" in latest.attacks
    from jsonschema import validate

    from imprint.formats import schema

    for folder in (Path("studies/quick"), Path("audits/demo"), Path("canaries/demo")):
        validate(json.loads((folder / ".imprint-output.json").read_text()), schema("marker"))
    # every run these commands wrote (the study's cells', the audit's, imprint.run's, the
    # document-free execute_run's) validates against the schemas
    assert len(study.runs()) == 1  # one run scored both attacks of the grid's one benchmark
    runs = [*(r.path for r in study.runs().values()), audit.run.path, latest.path,
            Path("runs/wikimia32")]  # fmt: skip
    for folder in runs:
        validate(json.loads((folder / "metrics.json").read_text()), schema("metrics"))
        validate(json.loads((folder / "manifest.json").read_text()), schema("manifest"))
    for folder, load in ((Path("studies/quick"), imprint.load_study),
                         (Path("audits/demo"), imprint.load_audit)):  # fmt: skip
        marker = folder / ".imprint-output.json"
        marker.write_text(marker.read_text().replace('"1.0"', '"2.0"'))
        with pytest.raises(DataError, match=r"format_version 2\.0.*reads format 1\.x"):
            load(folder)


def test_scores_parquet_meta_json_becomes_columns_whatever_a_row_holds(tmp_path) -> None:
    """The parquet keeps ``meta`` as JSON text (every imprint wrote it so); a row with no
    meta, ``null`` or a nested value reads without failing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from imprint.run.folder import scores_frame

    metas = ['{"k": 1, "nested": {"a": [1, 2]}}', "null", "", "{}"]
    table = {"id": list("abcd"), "label": [1, 0, 1, 0], "text": list("wxyz"), "meta": metas,
             "loss": [0.1, 0.2, 0.3, 0.4]}  # fmt: skip
    pq.write_table(pa.table(table), tmp_path / "scores.parquet")
    frame = scores_frame(tmp_path / "scores.parquet")
    assert list(frame.columns) == ["id", "label", "text", "meta.k", "meta.nested", "loss"]
    assert frame["meta.k"].iloc[0] == 1 and frame["meta.k"].iloc[1:].isna().all()
    assert frame["meta.nested"].iloc[0] == {"a": [1, 2]}
