"""Run and report robustness (review items 10, 11, 14, 18): the output folder, typed --param
values, Parquet meta types, lone surrogates in JSONL, report escaping, measurable TPR@FPR."""

from __future__ import annotations

import datetime
import decimal
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from imprint.attacks import build_attacks
from imprint.attacks.params import check_params
from imprint.cli.flags import config_from_flags
from imprint.data import Sample, load_file
from imprint.errors import ConfigError, DataError
from imprint.evaluation.evaluate import evaluate_scores, min_nonmembers
from imprint.outdir import publish, staging_dir
from imprint.report.render import rich_table
from imprint.report.writer import to_jsonable, write_run
from imprint.run import RunConfig, execute_run

runner = CliRunner()


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def _small_data(tmp_path: Path) -> Path:
    rows = [
        {"text": f"Kraków tekst numer {i} о городе 東京 {i}", "label": i % 2} for i in range(12)
    ]
    return _jsonl(tmp_path / "small.jsonl", rows)


def _quick(model: Path, data: Path | str, out: Path, **kw: object) -> RunConfig:
    base: dict = dict(attacks=("loss",), n_bootstrap=20, progress=False, blind=False)
    return config_from_flags(model=str(model), data=str(data), out=out, **{**base, **kw})


# -- item 10: --out ---------------------------------------------------------------------------


def test_out_naming_a_file_fails_before_any_work(tmp_path):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    # the model does not exist: only a check made before loading anything names --out
    with pytest.raises(ConfigError, match=r"--out .*results\.txt is a file"):
        execute_run(_quick(tmp_path / "no-such-model", _small_data(tmp_path), target))
    assert target.read_text() == "keep me"


def test_non_run_folder_refused_unless_overwrite(tiny_model_dir, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    data = _small_data(tmp_path)
    with pytest.raises(ConfigError, match=r"not an imprint run.*thesis\.tex.*--overwrite"):
        execute_run(_quick(tmp_path / "no-such-model", data, out))
    assert (out / "thesis.tex").read_text() == "years of work"
    execute_run(_quick(tiny_model_dir, data, out, overwrite=True))
    assert not (out / "thesis.tex").exists() and (out / "report.md").is_file()
    # an earlier run is replaced only with --overwrite (issue 24), and nothing is left beside it
    with pytest.raises(ConfigError, match="already holds an earlier imprint run"):
        execute_run(_quick(tiny_model_dir, data, out, attacks=("zlib",)))
    execute_run(_quick(tiny_model_dir, data, out, attacks=("zlib",), overwrite=True))
    assert "zlib" in pq.read_table(out / "scores.parquet").column_names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imprint-cache", "mine", "small.jsonl"]


def test_failed_write_leaves_no_half_folder(monkeypatch, tmp_path):
    import imprint.report.writer as writer

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer, "write_plots", broken)
    samples, scores, metrics, manifest = _report_inputs(tmp_path, n=20)
    with pytest.raises(RuntimeError, match="disk full"):
        write_run(tmp_path / "run", samples, scores, metrics, manifest)
    assert [p.name for p in tmp_path.iterdir() if p.name != "imprint-cache"] == []


def test_concurrent_publishers_never_interleave(tmp_path):
    out = tmp_path / "run"
    names = [f"f{i}.txt" for i in range(20)]

    def one_run(tag: int) -> None:
        staged = staging_dir(out)
        for name in names:  # a slow writer: files appear one by one
            (staged / name).write_text(str(tag))
        manifest = {"config": {"tag": tag}, "versions": {"python": "3"}}
        for name in ("metrics.json", "scores.parquet"):  # what a run folder holds
            (staged / name).write_text(str(tag))
        (staged / "manifest.json").write_text(json.dumps(manifest))
        publish(staged, out, overwrite=True)  # replacing an earlier run needs it (issue 24)

    threads = [threading.Thread(target=one_run, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = json.loads((out / "manifest.json").read_text())["config"]["tag"]
    assert {(out / n).read_text() for n in names} == {str(winner)}
    assert [p.name for p in tmp_path.iterdir() if p.name != "imprint-cache"] == ["run"]


# -- item 11: --param types -------------------------------------------------------------------


def test_param_values_coerced_to_declared_types():
    typed = check_params(
        {
            "min_k": {"k": "0.3", "sweep": "0.1, 0.5"},
            "pac": {"n_aug": "4"},
            "simmia": {"exact_numbers": "yes"},
            "dc_pdd": {"corpus": "none"},
            "recall": {"separator": "5"},  # from the command line "5" is text
        }
    )
    assert typed["min_k"] == {"k": 0.3, "sweep": (0.1, 0.5)}
    assert typed["pac"] == {"n_aug": 4} and isinstance(typed["pac"]["n_aug"], int)
    assert typed["simmia"] == {"exact_numbers": True}
    assert typed["dc_pdd"] == {"corpus": None}
    assert typed["recall"] == {"separator": "5"}


@pytest.mark.parametrize(
    ("attack", "param", "value", "expected"),
    [
        ("pac", "n_aug", "2.5", "an integer"),
        ("pac", "n_aug", 2.5, "an integer"),
        ("min_k", "k", "abc", "a finite number"),
        ("min_k", "k", "nan", "a finite number"),
        ("recall", "separator", 5, "a string"),
        ("min_k", "sweep", "0.1,x", "comma-separated list"),
        ("simmia", "exact_numbers", "maybe", "true or false"),
        ("samia", "top_k", True, "an integer"),
    ],
)
def test_wrong_param_type_names_attack_param_type_and_example(attack, param, value, expected):
    with pytest.raises(ConfigError) as err:
        build_attacks([attack], params={attack: {param: value}})
    message = str(err.value)
    assert f"attack {attack!r}, parameter {param!r}" in message
    assert expected in message and f"e.g. --param {attack}.{param}=" in message


def test_cli_bad_param_fails_without_torch_or_model(tmp_path):
    """The check runs with torch unimportable and a model that does not exist: it must be the
    first thing to fail, and it must need no torch."""
    code = f"""
import sys
sys.modules["torch"] = None  # any import of torch now raises ImportError
from typer.testing import CliRunner
from imprint.cli import app
res = CliRunner().invoke(app, ["run", "--model", "no-such-model", "--data", {str(tmp_path)!r},
                               "--param", "pac.n_aug=2.5", "--out", {str(tmp_path / "o")!r}])
print(res.exit_code, res.output)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flat = " ".join(proc.stdout.split())
    assert flat.startswith("2 ") and "'pac', parameter 'n_aug'" in flat and "integer" in flat


# -- item 11: Parquet meta types, lone surrogates ---------------------------------------------


def test_parquet_meta_of_any_type_is_written(tiny_model_dir, tmp_path):
    n = 12
    when = [datetime.datetime(2024, 1, i + 1, 12, 30, tzinfo=datetime.UTC) for i in range(n)]
    table = pa.table(
        {
            "text": [f"Σύντομο κείμενο {i} about 東京 and more words" for i in range(n)],
            "label": [i % 2 for i in range(n)],
            "when": pa.array(when, pa.timestamp("us", tz="UTC")),
            "day": pa.array([w.date() for w in when], pa.date32()),
            "blob": pa.array([bytes([0xFF, i]) if i % 3 else b"ok" for i in range(n)]),
            "price": pa.array([decimal.Decimal(f"{i}.10") for i in range(n)], pa.decimal128(9, 2)),
            "wait": pa.array([datetime.timedelta(seconds=i) for i in range(n)]),
        }
    )
    path = tmp_path / "typed.parquet"
    pq.write_table(table, path)
    out = tmp_path / "run"
    execute_run(_quick(tiny_model_dir, path, out, breakdown="day"))
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    meta = {r["id"]: json.loads(r["meta"]) for r in rows}
    first = meta["typed:1"]
    assert first["when"] == "2024-01-01T12:30:00+00:00" and first["day"] == "2024-01-01"
    assert first["price"] == "0.10" and first["wait"] == 0.0 and first["blob"] == "ok"
    assert meta["typed:2"]["blob"] == "base64:/wE="  # bytes 0xff 0x01 are not UTF-8
    assert "2024-01-01" in (out / "report.md").read_text()


def test_to_jsonable_never_leaves_a_type_json_cannot_write():
    value = {
        "d": decimal.Decimal("1.2300"),
        "t": datetime.time(7, 5),
        "b": "naïve".encode(),
        "a": np.arange(3),
        "o": object(),
    }
    out = json.loads(json.dumps(to_jsonable(value)))
    assert out["d"] == "1.2300" and out["t"] == "07:05:00" and out["b"] == "naïve"
    assert out["a"] == [0, 1, 2] and out["o"].startswith("<object")


def test_jsonl_lone_surrogate_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [
        '{"text": "fine \\ud83d\\ude00 пара", "label": 0}',  # a valid pair: one emoji
        '{"text": "also fine", "label": 1}',
        '{"text": "broken \\ud800 half", "label": 1}',
        '{"text": "ok text", "label": 0, "src": {"name": "x\\udfff"}}',
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load_file(path)
    message = str(err.value)
    assert str(path) in message and "line 3" in message and "'text'" in message
    assert "surrogate" in message and "character 7" in message
    loaded = load_file(path, on_bad="drop")
    assert loaded.dropped == {"lone surrogate": 2}
    assert loaded.samples[0].text == "fine \U0001f600 пара"


# -- item 14: escaping ------------------------------------------------------------------------

HOSTILE = ["<script>alert(1)</script>", "a|b", "<img src=x onerror=alert(1)>", "two\nlines", "*x*"]


def _report_inputs(
    tmp_path: Path, *, n: int, groups: list[str] | None = None
) -> tuple[list[Sample], dict[str, np.ndarray], dict, dict]:
    groups = groups or ["g"]
    samples = [
        Sample(f"s{i}", f"text {i}", i % 2, {"grp": groups[(i // 2) % len(groups)]})
        for i in range(n)
    ]
    labels = np.array([s.label for s in samples])
    scores = {"loss": np.random.default_rng(0).normal(size=n) + labels}
    config = RunConfig(
        model="<img src=x onerror=alert(1)>",
        data="<script>alert(1)</script>|evil.jsonl",
        out=tmp_path / "unused",
        n_bootstrap=20,
        blind=False,
        breakdown="grp",
    )
    metrics = evaluate_scores(samples, scores, config=config)
    manifest = {
        "config": config,
        "data": {"evaluated": n, "dropped": {"<b>bold</b> | reason": 1}},
    }
    return samples, scores, metrics, manifest


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_report_escapes_hostile_names_and_groups(tmp_path):
    samples, scores, metrics, manifest = _report_inputs(tmp_path, n=40, groups=HOSTILE)
    out = tmp_path / "run"
    write_run(out, samples, scores, metrics, manifest)
    md = (out / "report.md").read_text()
    assert not re.search(r"<(script|img|b)\b", md), md
    assert "&lt;script&gt;" in md and "a\\|b" in md
    tables = [b for b in md.split("\n\n") if b.startswith("|")]
    heads = [block.splitlines()[0] for block in tables]
    # provenance, attacks, breakdown, most exposed texts, dropped (every one escaped alike)
    assert len(tables) == 5 and heads[0].startswith("| what |") and "reason" in heads[-1], heads
    for block in tables:
        widths = {_cells(line) for line in block.splitlines()}
        assert len(widths) == 1, block  # a '|' or newline in a value shifts no column
    page = (out / "report.html").read_text()
    body = page.split("<body>")[1]
    assert not re.search(r"<(script|img src=x|b>bold)", body)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|evil.jsonl" in body
    for table in re.findall(r"<table>.*?</table>", body):
        heads = table.count("<th>")
        rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
        assert rows and all(r.count("<td>") == heads for r in rows)


# -- item 18: TPR@FPR only where measurable ---------------------------------------------------


def test_min_nonmembers_allows_four_false_positives():
    """Issue 37: k = floor(t n) >= 4 false positives, so 4/t non-members (1/t before)."""
    assert [min_nonmembers(t) for t in (0.001, 0.01, 0.05, 0.1)] == [4000, 400, 80, 40]


def test_tpr_at_unresolvable_fpr_is_not_measurable(tmp_path):
    samples, scores, metrics, manifest = _report_inputs(tmp_path, n=124)  # 62 non-members
    row = metrics.to_dict()["attacks"]["loss"]
    assert row["n_nonmembers"] == 62
    for key in ("tpr@0.1%", "tpr@1%", "tpr@5%"):
        assert row[key]["estimate"] is None and "needs at least" in row[key]["not_measurable"]
    assert "4000 non-members" in row["tpr@0.1%"]["not_measurable"]
    assert row["tpr@10%"]["estimate"] is not None and "not_measurable" not in row["tpr@10%"]
    out = tmp_path / "run"
    write_run(out, samples, scores, metrics, manifest)
    saved = json.loads((out / "metrics.json").read_text())["attacks"]["loss"]
    assert "62" in saved["tpr@1%"]["not_measurable"]
    # no row can measure 0.1, 1 or 5 %: the columns are left out (report and terminal alike),
    # one line says why, and 10 % is labelled as the lowest measurable FPR
    md = (out / "report.md").read_text()
    loss_row = next(line for line in md.splitlines() if line.startswith("| loss"))
    assert loss_row.count("|") == 4 and "not measurable" not in loss_row
    note = ("TPR at 0.1%, 1% and 5% FPR not shown: no row can measure them (an FPR bound must "
            "allow 4 false positives: 4,000, 400 and 80 non-members needed, 62 here); TPR@10% "
            "is the lowest measurable FPR")  # fmt: skip
    assert note in md.replace("\\", "") and "TPR@10% (lowest measurable FPR)" in md
    assert note in (out / "report.html").read_text()
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(rich_table(metrics))
    terminal = " ".join(console.export_text().split())
    assert note in terminal and "TPR@10% (lowest measurable FPR)" in terminal
    assert "TPR@1%FPR" not in terminal


def test_tpr_measurable_from_exactly_four_over_fpr(tmp_path):
    _, _, metrics, _ = _report_inputs(tmp_path, n=800)  # 400 non-members: 1 % resolvable
    row = metrics.to_dict()["attacks"]["loss"]
    assert row["tpr@1%"]["estimate"] is not None and "not_measurable" in row["tpr@0.1%"]
