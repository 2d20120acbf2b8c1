"""Loaders: formats, field mapping, label spellings, and errors that name file, line and fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import force_hub_offline

from imprint.data import MEMBER, NON_MEMBER, LoadedData, Sample, fingerprint_samples, load_file
from imprint.data.loaders import parse_label
from imprint.errors import DataError, MissingDependencyError

ROWS = [
    {"text": "the cat sat on the mat", "label": 1, "source": "a"},
    {"text": "a dog ran in the park", "label": 0, "source": "b"},
    {"text": "birds sing, loudly; at dawn", "label": 1, "source": "c"},
    {"text": "line one\nline two", "label": 0, "source": "d"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def assert_names(exc: pytest.ExceptionInfo[DataError], path: Path, where: str) -> None:
    msg = str(exc.value)
    assert str(path) in msg, msg
    assert where in msg, msg


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("writer", "suffix"),
    [(write_jsonl, ".jsonl"), (write_csv, ".csv"), (write_parquet, ".parquet")],
)
def test_round_trip(tmp_path: Path, writer, suffix: str) -> None:
    path = writer(tmp_path / f"set{suffix}", ROWS)
    data = load_file(path)
    assert isinstance(data, LoadedData)
    assert [s.text for s in data.samples] == [r["text"] for r in ROWS]
    assert list(data.labels) == [1, 0, 1, 0]
    assert [s.meta for s in data.samples] == [{"source": r["source"]} for r in ROWS]
    assert data.source == str(path)
    assert data.dropped == {}
    assert len(data) == 4
    assert data.fingerprint == fingerprint_samples(data.samples)


def test_ids_default_to_stem_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + json.dumps(ROWS[1]) + "\n")
    data = load_file(path)
    assert [s.id for s in data.samples] == ["mine:1", "mine:3"]  # blank line skipped, not a row


def test_csv_ids_are_file_lines(tmp_path: Path) -> None:
    data = load_file(write_csv(tmp_path / "c.csv", ROWS))
    # header is line 1; the 4th row spans two physical lines (quoted newline)
    assert [s.id for s in data.samples] == ["c:2", "c:3", "c:4", "c:6"]


def test_parquet_ids_are_rows(tmp_path: Path) -> None:
    data = load_file(write_parquet(tmp_path / "p.parquet", ROWS))
    assert [s.id for s in data.samples] == ["p:1", "p:2", "p:3", "p:4"]


def test_same_samples_same_fingerprint_across_formats(tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    (tmp_path / "p").mkdir()
    a = load_file(write_jsonl(tmp_path / "j" / "x.jsonl", ROWS))
    b = load_file(write_parquet(tmp_path / "p" / "x.parquet", ROWS))  # rows 1..4 == lines 1..4
    assert a.fingerprint == b.fingerprint
    c = load_file(write_jsonl(tmp_path / "z.jsonl", ROWS))  # other ids -> other fingerprint
    assert c.fingerprint != a.fingerprint


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "arr.json"
    path.write_text(json.dumps(ROWS))
    data = load_file(path)
    assert len(data) == 4 and [s.id for s in data.samples][0] == "arr:1"


def test_json_extension_with_json_lines(tmp_path: Path) -> None:
    data = load_file(write_jsonl(tmp_path / "lines.json", ROWS))
    assert len(data) == 4


def test_wikimia_fields_need_no_flags(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "w.jsonl", [{"input": "some text here", "label": 1}, {"input": "b", "label": 0}]
    )
    data = load_file(path)
    assert [s.text for s in data.samples] == ["some text here", "b"]
    assert data.samples[0].meta == {}


def test_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + write_jsonl(tmp_path / "tmp.jsonl", ROWS).read_bytes())
    assert len(load_file(path)) == 4


# --- field mapping -----------------------------------------------------------------------------


def test_field_mapping_flags(tmp_path: Path) -> None:
    rows = [
        {"doc": "alpha beta", "is_member": "member", "key": "k1", "text": "decoy", "x": 1},
        {"doc": "gamma delta", "is_member": "nonmember", "key": "k2", "text": "decoy2", "x": 2},
    ]
    data = load_file(
        write_jsonl(tmp_path / "m.jsonl", rows),
        text_field="doc",
        label_field="is_member",
        id_field="key",
    )
    assert [(s.id, s.text, s.label) for s in data.samples] == [
        ("k1", "alpha beta", 1),
        ("k2", "gamma delta", 0),
    ]
    assert data.samples[0].meta == {"text": "decoy", "x": 1}


def test_auto_detect_order_and_alternatives(tmp_path: Path) -> None:
    rows = [{"content": "c one", "member": True}, {"content": "c two", "member": False}]
    data = load_file(write_jsonl(tmp_path / "alt.jsonl", rows))
    assert [s.text for s in data.samples] == ["c one", "c two"]
    assert list(data.labels) == [1, 0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, MEMBER),
        (0, NON_MEMBER),
        (True, MEMBER),
        (False, NON_MEMBER),
        (1.0, MEMBER),
        ("1", MEMBER),
        ("0", NON_MEMBER),
        ("member", MEMBER),
        (" Member ", MEMBER),
        ("nonmember", NON_MEMBER),
        ("non-member", NON_MEMBER),
        ("NON-MEMBER", NON_MEMBER),
        ("true", MEMBER),
        ("false", NON_MEMBER),
    ],
)
def test_label_spellings(value, expected: int) -> None:
    assert parse_label(value) == expected


@pytest.mark.parametrize("value", [2, -1, 0.5, "yes", "2", "members", None, [1]])
def test_non_binary_labels_rejected(value) -> None:
    with pytest.raises(ValueError, match="not binary"):
        parse_label(value)


def test_label_spellings_in_csv(tmp_path: Path) -> None:
    rows = [
        {"text": "a", "label": "member"},
        {"text": "b", "label": "non-member"},
        {"text": "c", "label": "1"},
        {"text": "d", "label": "0"},
        {"text": "e", "label": "True"},
    ]
    data = load_file(write_csv(tmp_path / "lab.csv", rows))
    assert list(data.labels) == [1, 0, 1, 0, 1]


# --- bad input: file, line and fix -------------------------------------------------------------


def _jsonl_with_bad_line(tmp_path: Path, bad: str, name: str = "bad.jsonl") -> Path:
    """Good line 1 and 2, bad line 3, good line 4."""
    lines = [json.dumps(ROWS[0]), json.dumps(ROWS[1]), bad, json.dumps(ROWS[2])]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (json.dumps({"text": "", "label": 1}), "empty"),
        (json.dumps({"text": "   \t ", "label": 1}), "whitespace"),
        (json.dumps({"body": "x", "label": 1}), "missing text field 'text'"),
        (json.dumps({"text": "x"}), "missing label"),
        (json.dumps({"text": "x", "label": None}), "missing label"),
        (json.dumps({"text": "x", "label": 2}), "not binary"),
        (json.dumps({"text": "x", "label": "maybe"}), "not binary"),
        (json.dumps({"text": 42, "label": 1}), "not a string"),
        ('{"text": "x", "label": 1', "invalid JSON"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_jsonl_row_names_file_and_line(tmp_path: Path, bad: str, needle: str) -> None:
    path = _jsonl_with_bad_line(tmp_path, bad)
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, "line 3")
    assert needle in str(exc.value)
    assert "on_bad='drop'" in str(exc.value)  # the fix


def test_missing_text_field_lists_fields(tmp_path: Path) -> None:
    path = _jsonl_with_bad_line(tmp_path, json.dumps({"body": "x", "label": 1, "zz": 0}))
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert "['body', 'label', 'zz']" in str(exc.value)


def test_no_text_field_anywhere_lists_fields_and_flag(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "nf.jsonl", [{"body": "x", "label": 1}, {"body": "y", "label": 0}]
    )
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, "line 1")
    assert "['body', 'label']" in str(exc.value) and "text_field" in str(exc.value)


def test_no_label_field_names_flag(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "nl.jsonl", [{"text": "x", "y": 1}])
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, "line 1")
    assert "label_field" in str(exc.value)


def test_explicit_missing_field_in_csv_header(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "h.csv", ROWS)
    with pytest.raises(DataError) as exc:
        load_file(path, text_field="body")
    assert str(path) in str(exc.value)
    assert "'body'" in str(exc.value) and "['label', 'source', 'text']" in str(exc.value)


GOOD_LINE = json.dumps(ROWS[0]).encode()


@pytest.mark.parametrize(
    ("name", "data", "line"),
    [
        (
            "enc.jsonl",
            GOOD_LINE + b"\n" + b'{"text": "caf\xe9", "label": 0}\n' + GOOD_LINE + b"\n",
            2,
        ),
        ("enc.csv", b"text,label\nfine,1\nna\xefve,0\nok,0\n", 3),
        ("enc.json", b'[\n{"text": "a", "label": 1},\n{"text": "\xff", "label": 0}\n]', 3),
    ],
)
def test_invalid_utf8_reports_line(tmp_path: Path, name: str, data: bytes, line: int) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, f"line {line}")
    assert "UTF-8" in str(exc.value)


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("b.csv", "text,label\nfine,1\n,0\nok,0\n", "empty"),  # an empty text
        ("shape.csv", "text,label\nfine,1\nsplit, by comma,0\nok,0\n", "quote"),  # 3 fields
    ],
)
def test_bad_csv_row_names_line(tmp_path: Path, name: str, content: str, why: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, "line 3")
    assert why in str(exc.value)


def test_bad_parquet_row_names_row(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": 1}, {"text": "b", "label": 0}, {"text": " ", "label": 0}]
    path = write_parquet(tmp_path / "b.parquet", rows)
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert_names(exc, path, "row 3")


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and "Parquet" in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and "does not exist" in str(exc.value)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    path = tmp_path / "dir.jsonl"
    path.mkdir()
    with pytest.raises(DataError, match="not a file"):
        load_file(path)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_jsonl(tmp_path / "locked.jsonl", ROWS)

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)  # chmod does not stop root, so simulate it
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and "Permission denied" in str(exc.value)


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("hello")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and ".txt" in str(exc.value) and ".jsonl" in str(exc.value)


@pytest.mark.parametrize(
    ("label", "missing"),
    [(1, "non-members (label 0) are missing"), (0, "members (label 1) are missing")],
)
def test_single_class_says_which_is_missing(tmp_path: Path, label: int, missing: str) -> None:
    path = write_jsonl(tmp_path / "one.jsonl", [{"text": t, "label": label} for t in "abc"])
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and missing in str(exc.value)


def test_single_class_allowed_when_asked(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pool.jsonl", [{"text": t, "label": 1} for t in "abc"])
    assert len(load_file(path, require_both_classes=False)) == 3


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert str(path) in str(exc.value) and "no usable samples" in str(exc.value)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": 1, "id": "x"}, {"text": "b", "label": 0, "id": "x"}]
    path = write_jsonl(tmp_path / "dup.jsonl", rows)
    with pytest.raises(DataError) as exc:
        load_file(path, id_field="id")
    assert_names(exc, path, "line 2")
    assert "line 1" in str(exc.value)


def test_bad_on_bad_value(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="on_bad"):
        load_file(write_jsonl(tmp_path / "x.jsonl", ROWS), on_bad="skip")  # type: ignore[arg-type]


# --- on_bad="drop" -----------------------------------------------------------------------------


def test_drop_counts_every_reason(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps({"text": "good one", "label": 1}).encode(),
        json.dumps({"text": "", "label": 1}).encode(),
        json.dumps({"text": "  ", "label": 0}).encode(),
        json.dumps({"text": "no label"}).encode(),
        json.dumps({"text": "bad label", "label": 7}).encode(),
        b"{not json",
        b'{"text": "\xff\xfe", "label": 1}',
        json.dumps({"label": 0, "other": "x"}).encode(),
        json.dumps({"text": "good two", "label": 0}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    data = load_file(path, on_bad="drop")
    assert [s.id for s in data.samples] == ["mixed:1", "mixed:9"]
    assert data.dropped == {
        "empty text": 2,
        "missing label": 1,
        "non-binary label": 1,
        "invalid JSON": 1,
        "invalid UTF-8": 1,
        "missing text": 1,
    }
    assert len(data) + sum(data.dropped.values()) == len(lines)


def test_drop_then_single_class_still_raises(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": 1}, {"text": "", "label": 0}]
    with pytest.raises(DataError) as exc:
        load_file(write_jsonl(tmp_path / "d.jsonl", rows), on_bad="drop")
    assert "non-members (label 0) are missing" in str(exc.value)
    assert "1 rows dropped" in str(exc.value)


def test_drop_in_csv_and_parquet(tmp_path: Path) -> None:
    csv_path = tmp_path / "d.csv"
    csv_path.write_bytes(b"text,label\na,1\n,0\nb,0\nc,9\nd\xff,1\n")
    data = load_file(csv_path, on_bad="drop")
    assert len(data) == 2
    assert data.dropped == {"empty text": 1, "non-binary label": 1, "invalid UTF-8": 1}
    rows = [{"text": "a", "label": 1}, {"text": None, "label": 0}, {"text": "b", "label": 0}]
    pq_data = load_file(write_parquet(tmp_path / "d.parquet", rows), on_bad="drop")
    assert pq_data.dropped == {"missing text": 1} and len(pq_data) == 2


def test_samples_are_frozen(tmp_path: Path) -> None:
    data = load_file(write_jsonl(tmp_path / "f.jsonl", ROWS))
    assert isinstance(data.samples, tuple) and isinstance(data.samples[0], Sample)
    with pytest.raises(AttributeError):
        data.samples[0].text = "x"  # type: ignore[misc]


# --- hub ---------------------------------------------------------------------------------------


def test_hf_offline_gives_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from imprint.data import load_hf_dataset

    force_hub_offline(monkeypatch)
    with pytest.raises(DataError) as exc:
        load_hf_dataset("imprint-nonexistent-owner/no-such-dataset-xyz")
    msg = str(exc.value)
    assert "imprint-nonexistent-owner/no-such-dataset-xyz" in msg
    assert "unreachable" in msg and "IMPRINT_DATA_DIR" in msg and "local" in msg


def test_hf_missing_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from imprint.data import load_hf_dataset

    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(MissingDependencyError, match=r"llm-imprint\[hub\]"):
        load_hf_dataset("owner/name")


def test_hf_rows_from_a_fake_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub path shares the row logic; a stand-in for datasets.load_dataset checks the glue."""
    datasets = pytest.importorskip("datasets")
    from imprint.data import load_hf_dataset

    fake = datasets.Dataset.from_list([{"input": "x y", "label": 1}, {"input": "z", "label": 0}])
    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return fake

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    data = load_hf_dataset("o/n", split="s1")
    assert calls == [("o/n", None, "s1")]
    assert [s.id for s in data.samples] == ["o/n:s1:1", "o/n:s1:2"]
    assert data.source == "hf:o/n:s1"
