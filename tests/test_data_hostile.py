"""Regression tests from a hostile review of the benchmark registry and the temporal builder:
dates that leave datetime's range in UTC, RDD windows past year 9999, broken .gz/.bz2 dumps,
JSONL documents over 1 MiB, stale bucket files after --overwrite, the short-text count on huge
texts, one download attempt per benchmark on an unreachable hub, and a built set run by name."""

from __future__ import annotations

import bz2
import gzip
import http.server
import json
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import imprint.data.benchmark_files as files_mod
from imprint.cli import app
from imprint.data import resolve_data
from imprint.data.defects import short_counts
from imprint.data.dumps import parse_date, read_dump
from imprint.data.sample import Sample
from imprint.data.temporal import make_design
from imprint.data.words import split_units
from imprint.errors import ConfigError, DataError

CUT = "2020-07-01"


def _rows(n: int, *, words: int = 40, tag: str = "w") -> list[dict]:
    """``n`` documents alternating 2019 (members) and 2022 (non-members), distinct texts."""
    return [
        {
            "id": f"{tag}{i}",
            "date": "2019-01-01" if i % 2 else "2022-06-01",
            "text": " ".join(f"{tag}{i}x{j}" for j in range(words)),
        }
        for i in range(n)
    ]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _build(*args: str) -> tuple[int, str]:
    cli = ["data", "build-temporal", "--no-blind", "--member-before", CUT]
    result = CliRunner().invoke(app, [*cli, "--nonmember-after", CUT, *args])
    return result.exit_code, result.output


# --- dates and windows at the edges of datetime -------------------------------------------------


@pytest.mark.parametrize("value", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00"])
def test_date_leaving_datetime_range_in_utc_is_a_data_error(value: str) -> None:
    with pytest.raises(DataError, match="outside years 1-9999"):
        parse_date(value, where="x")
    assert parse_date("9999-12-31T23:00:00Z", where="x").year == 9999  # in range: kept


def test_out_of_range_dates_in_a_dump_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[1]["date"] = "9999-12-31T23:59:59-05:00"
    dump = _jsonl(tmp_path / "d.jsonl", rows)
    dropped: Counter[str] = Counter()
    docs = list(read_dump(dump, on_bad="skip", dropped=dropped))
    assert len(docs) == 3 and dropped == {"unparsable date": 1}
    code, out = _build("--dump", str(dump), "--out", str(tmp_path / "o"))
    assert code == 2 and "outside years 1-9999" in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("cutoff", "bandwidth"), [(CUT, "inf"), (CUT, "3000000"), ("0001-01-02", "5")]
)
def test_rdd_window_past_datetime_range_is_a_config_error(cutoff: str, bandwidth: str) -> None:
    with pytest.raises(ConfigError, match="outside years 1-9999"):
        make_design(
            member_before=None,
            nonmember_after=None,
            design="rdd",
            cutoff=parse_date(cutoff, where="c"),
            bandwidth_days=float(bandwidth),
        )


# --- damaged compressed dumps, long documents ----------------------------------------------------


def _broken_dumps(folder: Path) -> list[Path]:
    text = "".join(json.dumps(r) + "\n" for r in _rows(200)).encode()
    xml = b"<mediawiki><page><title>A</title><ns>0</ns><revision><timestamp>2019-01-01"
    gz, bz = gzip.compress(text), bz2.compress(text)
    out = {
        "trunc.jsonl.gz": gz[: len(gz) // 2],
        "trunc.jsonl.bz2": bz[: len(bz) // 2],
        "trunc.xml.gz": gzip.compress(xml * 50)[:40],
        "plain.jsonl.gz": b'{"not": "gzip"}\n',
        "plain.jsonl.bz2": b'{"not": "bz2"}\n',
    }
    for name, data in out.items():
        (folder / name).write_bytes(data)
    return [folder / name for name in out]


def test_truncated_or_fake_compressed_dump_is_a_data_error(tmp_path: Path) -> None:
    for dump in _broken_dumps(tmp_path):
        for on_bad in ("error", "skip"):
            with pytest.raises(DataError, match="cannot decompress it") as exc:
                list(read_dump(dump, on_bad=on_bad, dropped=Counter()))  # type: ignore[arg-type]
            assert str(dump) in str(exc.value)
        code, out = _build("--dump", str(dump), "--out", str(tmp_path / "o"))
        assert code == 2 and "cannot decompress" in out, out


def test_jsonl_document_over_one_mebibyte_is_read_whole(tmp_path: Path) -> None:
    rows = _rows(40)
    # 3-byte characters (an odd count of ASCII bytes first) so 1 MiB chunk ends split one
    big = "a " + "東京 " * 400_000
    rows.insert(3, {"id": "big", "date": "2019-01-01", "text": big})
    dump = _jsonl(tmp_path / "d.jsonl", rows)
    assert dump.stat().st_size > 2 * (1 << 20)
    docs = list(read_dump(dump, id_field="id", dropped=Counter()))
    assert [d.id for d in docs] == [r["id"] for r in rows]
    assert docs[3].text == big and docs[4].source.endswith("line 5")
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(gzip.compress(dump.read_bytes()))
    assert [d.text for d in read_dump(gz, dropped=Counter())] == [d.text for d in docs]


# --- --overwrite leaves no stale bucket behind; the built set by name through a run -------------


def test_overwrite_removes_bucket_files_the_new_build_does_not_write(tmp_path: Path) -> None:
    out = tmp_path / "o"
    long = _jsonl(tmp_path / "long.jsonl", _rows(60, words=80))
    short = _jsonl(tmp_path / "short.jsonl", _rows(60, words=40, tag="s"))
    assert _build("--dump", str(long), "--buckets", "32,64,128", "--out", str(out))[0] == 0
    assert {p.name for p in out.glob("wikimia_*.jsonl")} == {"wikimia_32.jsonl", "wikimia_64.jsonl"}
    # bucket 64 cannot be drawn from the short texts: its old file must not stay behind
    again = ("--buckets", "32,64", "--out", str(out), "--overwrite")
    code, text = _build("--dump", str(short), *again)
    assert code == 0, text
    assert {p.name for p in out.glob("wikimia_*.jsonl")} == {"wikimia_32.jsonl"}
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert list(manifest["buckets"]) == ["32"] and "64" in manifest["skipped_buckets"]
    # a bucket listed by the earlier manifest but not asked for now goes as well
    assert _build("--dump", str(long), "--buckets", "64", "--out", str(out), "--overwrite")[0] == 0
    assert {p.name for p in out.glob("wikimia_*.jsonl")} == {"wikimia_64.jsonl"}
    assert not list(out.glob("*.tmp"))


def test_bootstrap_below_one_is_refused_before_reading(tmp_path: Path) -> None:
    missing = tmp_path / "never-read.jsonl"  # a read would fail with another message
    code, out = _build("--dump", str(missing), "--bootstrap", "0", "--blind", "--out", "o")
    assert code == 2 and "--bootstrap must be >= 1" in out


def test_built_non_latin_set_runs_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
) -> None:
    zh = "东京会议数据模型训练语言记忆成员推断攻击文本"
    ar = ["مرحبا", "بكم", "في", "النص", "العربي", "عن", "الأحداث"]
    rows = []
    for i in range(24):
        text = f"{i} " + "".join(zh[(i * 7 + j * j) % len(zh)] for j in range(40))
        if i % 3 == 2:
            text = f"{i} " + " ".join(ar[(i + j * j) % len(ar)] for j in range(40))
        rows.append({"date": "2019-03-01T01:00:00+08:00" if i % 2 else "2023-03-01", "text": text})
    dump = tmp_path / "intl.jsonl"
    dump.write_bytes(b"\xef\xbb\xbf" + _jsonl(dump, rows).read_bytes().replace(b"\n", b"\r\n"))
    data_dir = tmp_path / "data"
    code, out = _build("--dump", str(dump), "--buckets", "32", "--out", str(data_dir / "wikimia25"))
    assert code == 0, out
    monkeypatch.setattr(files_mod, "data_dirs", lambda: [data_dir])
    loaded = resolve_data("wikimia25:32")
    assert loaded.labels.count(1) == loaded.labels.count(0) == 12
    assert all(len(split_units(s.text)) == 32 for s in loaded.samples)
    run = tmp_path / "run"
    args = ["run", "--model", str(tiny_model_dir), "--data", "wikimia25:32", "--attacks", "loss"]
    result = CliRunner().invoke(app, [*args, "--no-blind", "--bootstrap", "10", "--out", str(run)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((run / "manifest.json").read_text("utf-8"))
    assert manifest["data"]["defects"]["total"] == 0
    assert manifest["data"]["defects"]["short_texts"]["bucket_words"] == 32


# --- defects on huge texts ------------------------------------------------------------------------


def test_short_count_matches_a_full_split_on_odd_texts() -> None:
    texts = [
        "",
        "   ",
        "\u200b\u200b",
        "one two",
        "東京で開かれた会議",
        "a " * 15,
        "a " * 16,
        "สวัสดีครับ นี่คือ",
        "x" * 10_000,
        " ".join(["word"] * 2_000_000),  # 10 MB: counted without splitting it all
    ]
    samples = [Sample(f"s{i}", t or "-", i % 2) for i, t in enumerate(texts)]
    for bucket in (2, 16, 32, 64):
        below = max(1, round(0.5 * bucket))
        want = {"members": 0, "non-members": 0}
        for s in samples:
            if len(split_units(s.text)) < below:
                want["members" if s.label else "non-members"] += 1
        assert short_counts(samples, bucket) == want, bucket


# --- an unreachable hub is asked once per benchmark, not once per file --------------------------


class _NotFound(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        _NotFound.seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def empty_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    hub = pytest.importorskip("huggingface_hub", reason="the download path needs huggingface_hub")
    import huggingface_hub.constants

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _NotFound.seen = []
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(files_mod, "data_dirs", lambda: [tmp_path / "data"])
    yield _NotFound.seen
    server.shutdown()
    server.server_close()


def test_failed_download_is_not_repeated_for_the_other_file(empty_hub: list[str]) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data("mimir:arxiv/ngram_13_0.8")
    message = str(exc.value)
    assert "the hub download failed" in message
    assert "train/arxiv_ngram_13_0.8.jsonl (member file)" in message
    assert "test/arxiv_ngram_13_0.8.jsonl (non-member file)" in message
    assert empty_hub and all("/train/" in r for r in empty_hub), empty_hub


def test_dates_compare_in_utc_across_the_cutoff(tmp_path: Path) -> None:
    rows = _rows(40)
    for i, r in enumerate(rows):  # 23:00Z on 30 June (member) vs 01:30Z on 1 July (non-member)
        r["date"] = "2020-07-01T01:00:00+02:00" if i % 2 else "2020-06-30T23:30:00-02:00"
    out = tmp_path / "o"
    code, text = _build("--dump", str(_jsonl(tmp_path / "tz.jsonl", rows)), "--out", str(out))
    assert code == 0, text
    drawn = [json.loads(line) for line in (out / "drawn.jsonl").read_text("utf-8").splitlines()]
    cut = datetime(2020, 7, 1, tzinfo=UTC)
    assert len(drawn) == 40
    assert all((datetime.fromisoformat(d["date"]) < cut) == (d["label"] == 1) for d in drawn)


def test_imprint_run_drops_and_counts_bad_rows_with_on_bad_drop(tmp_path, tiny_model_dir):
    """A benchmark file with one bad row: the default stops naming the option; --on-bad drop
    runs and counts the drop in the manifest."""
    import json as _json

    from typer.testing import CliRunner

    from imprint.cli import app

    rows = [{"text": f"Kraków text number {i} 北京", "label": i % 2} for i in range(8)]
    rows.append({"text": "bad label row", "label": "maybe"})
    data = tmp_path / "d.jsonl"
    data.write_text("".join(_json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    base = ["run", "--model", str(tiny_model_dir), "--data", str(data), "--attacks", "loss"]
    base += ["--no-blind", "--bootstrap", "20", "--cache", str(tmp_path / "c.sqlite")]
    stopped = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a")])
    assert stopped.exit_code == 2 and "--on-bad drop" in stopped.output
    ran = CliRunner().invoke(app, [*base, "--on-bad", "drop", "--out", str(tmp_path / "b")])
    assert ran.exit_code == 0, ran.output
    manifest = _json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["data"]["dropped"] == {"non-binary label": 1}
    assert manifest["data"]["evaluated"] == 8
    wrong = CliRunner().invoke(app, [*base, "--on-bad", "skip", "--out", str(tmp_path / "c")])
    assert wrong.exit_code == 2 and "raise or drop" in wrong.output
