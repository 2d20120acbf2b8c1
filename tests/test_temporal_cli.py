"""``imprint data build-temporal`` end to end: files, manifest, the blind baseline per bucket,
and the RDD design removing a topic drift that the plain design's blind baseline detects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporal_fixtures import Page, drifting_rows, words, write_export, write_jsonl
from typer.testing import CliRunner

from imprint.cli import app
from imprint.data.benchmarks import resolve_data

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["data", "build-temporal", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def _plain(
    dump: Path, out: Path, member_before: str, nonmember_after: str, *more: str
) -> tuple[int, str]:
    """A plain-design build: members dated before one day, non-members after another."""
    return _invoke(
        *("--dump", str(dump), "--out", str(out), "--member-before", member_before),
        *("--nonmember-after", nonmember_after, *more),
    )


def test_rdd_sample_removes_the_drift_the_plain_design_shows(tmp_path: Path) -> None:
    """Topic words drift slowly over 2016-2025. Members before / non-members after mid-2020
    drawn from all years differ in topic mix, and the SoK forest sees it; within 30 days of
    the cutoff the mix is nearly equal, and the forest is at chance."""
    dump = write_jsonl(tmp_path / "drift.jsonl", drifting_rows())
    out = tmp_path / "rdd"
    code, output = _invoke(
        "--dump",
        str(dump),
        "--out",
        str(out),
        "--design",
        "rdd",
        "--cutoff",
        "2020-07-01",
        "--bandwidth",
        "30",
        "--buckets",
        "32,64",
        "--per-label",
        "150",
        "--bootstrap",
        "200",
        "--id-field",
        "id",
    )
    assert code == 0, output
    saved = json.loads((out / "manifest.json").read_text("utf-8"))
    for words_ in ("32", "64"):
        rdd = saved["buckets"][words_]["blind"]
        plain = saved["plain_comparison"]["buckets"][words_]["blind"]
        assert rdd["n_members"] == rdd["n_nonmembers"] == plain["n_members"] == 150
        # the run report's rule, per bucket: the interval contains 0.5 (no shift shown), but at
        # 150 per side it reaches above 0.6, so a shift is not ruled out: inconclusive
        assert rdd["low"] < 0.5 < rdd["high"], rdd
        assert rdd["verdict"]["state"] == ("no_shift" if rdd["high"] <= 0.6 else "inconclusive")
        assert rdd["near_chance"] == (rdd["verdict"]["state"] == "no_shift")
        # two buckets, one family: each interval at 1 - 0.05/2 (Bonferroni), the plain design's too
        for entry in (rdd, plain):
            assert entry["correction"] == "bonferroni" and entry["n_buckets"] == 2
            assert entry["confidence"] == pytest.approx(0.975)
        assert plain["auc"] > 0.85 and plain["low"] > 0.75, plain
        assert not plain["near_chance"]
        assert all(f.startswith(("old", "new", "n")) for f, _ in plain["top_features"])
    assert "plain: blind AUC" in output and "the SoK blind baseline shows no shift" in output
    assert "97.5 % CI, Bonferroni over 2 buckets" in " ".join(output.split())
    dates = saved["buckets"]["32"]
    assert dates["member_dates"][0] >= "2020-06-01" and dates["member_dates"][1] < "2020-07-01"
    assert (
        "2020-07-01" <= dates["nonmember_dates"][0] <= dates["nonmember_dates"][1] <= "2020-07-31"
    )


def test_plain_design_prints_and_records_its_blind_baseline(tmp_path: Path) -> None:
    dump = write_jsonl(tmp_path / "drift.jsonl", drifting_rows(n_near=0, n_spread=400))
    out = tmp_path / "plain"
    code, output = _plain(
        dump, out, "2019-01-01", "2022-01-01", "--buckets", "32", "--bootstrap", "200"
    )
    assert code == 0, output
    saved = json.loads((out / "manifest.json").read_text("utf-8"))
    blind = saved["buckets"]["32"]["blind"]
    assert blind["auc"] > 0.9 and not blind["near_chance"]
    assert blind["verdict"]["state"] == "shift"
    assert "plain_comparison" not in saved
    assert "without any model" in output and f"{blind['auc']:.3f}" in output
    loaded = resolve_data(str(out / "wikimia_32.jsonl"))  # what `imprint run --data` reads
    assert len(loaded.samples) == 2 * saved["buckets"]["32"]["members"]
    # a second build into the same folder is refused unless --overwrite
    code, output = _plain(dump, out, "2019-01-01", "2022-01-01", "--buckets", "32", "--no-blind")
    assert code == 2 and "--overwrite" in output


def test_mediawiki_export_through_the_cli(tmp_path: Path) -> None:
    pages = [
        Page(
            f"記事{i}",
            [
                (f"{2018 + 4 * (i % 2)}-05-05T00:00:00Z", words(40, "página", i)),
                ("2024-01-01T00:00:00Z", words(70, "página", i)),
            ],
            page_id=i + 1,
        )
        for i in range(10)
    ]
    dump = write_export(tmp_path / "export.xml.gz", pages)
    out = tmp_path / "wiki"
    more = ("--buckets", "32,64,128", "--no-blind", "--revision", "first")
    code, output = _plain(dump, out, "2020-01-01", "2021-01-01", *more)
    assert code == 0, output
    assert sorted(p.name for p in out.iterdir()) == [
        "drawn.jsonl",
        "manifest.json",
        "wikimia_32.jsonl",
    ]
    saved = json.loads((out / "manifest.json").read_text("utf-8"))
    assert saved["source"]["format"] == "mediawiki" and saved["read"]["documents"] == 10
    assert saved["skipped_buckets"] == {
        "64": "no balanced draw: 0 members and 0 non-members have at least 64 words",
        "128": "no balanced draw: 0 members and 0 non-members have at least 128 words",
    }  # the first revisions have 40 words
    assert "bucket 64 left out" in output
    drawn = [json.loads(x) for x in (out / "drawn.jsonl").read_text("utf-8").splitlines()]
    assert {d["source"] for d in drawn} == {f"page '記事{i}'" for i in range(10)}


def test_cli_errors_teach(tmp_path: Path) -> None:
    dump = tmp_path / "d.jsonl"
    dump.write_text(
        json.dumps({"date": "2019-01-01", "text": "a"})
        + "\n"
        + json.dumps({"date": "2019-01-01", "text": "b"})
        + "\n"
        + json.dumps({"date": "01.02.2023", "text": "c"})
        + "\n",
        "utf-8",
    )
    base = ["--dump", str(dump), "--out", str(tmp_path / "o")]
    code, output = _plain(dump, tmp_path / "o", "2020-01-01", "2021")
    assert code == 2 and "--nonmember-after" in output and "'2021'" in output
    code, output = _plain(dump, tmp_path / "o", "2020-01-01", "2021-01-01")
    assert code == 2 and "line 3" in output and "'01.02.2023'" in output
    code, output = _invoke(*base, "--design", "rdd", "--cutoff", "2020-01-01")
    assert code == 2 and "--bandwidth DAYS" in output
    code, output = _plain(dump, tmp_path / "o", "2020-01-01", "2021-01-01", "--on-bad", "skip")
    assert code == 2 and "no non-members" in output and "dated 2019-01-01 to 2019-01-01" in output
    assert not (tmp_path / "o").exists()  # nothing written on failure
