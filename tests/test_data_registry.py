"""The benchmark registry by name: every name of the issue, each loader on a small local copy
written in the benchmark's real file layout and schema, the offline error, `imprint datasets`.

Each copy goes into a temporary $IMPRINT_DATA_DIR at the path the catalog names (the hub's own
layout under a folder per family), with the columns the hub's files have.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import imprint.data.benchmark_files as files_mod
from imprint.cli import app
from imprint.data import MEMBER, NON_MEMBER, list_benchmarks, resolve_data
from imprint.data.catalog import BenchmarkEntry, DataFile, get_benchmark, iter_benchmarks
from imprint.data.catalog import register_benchmark as register_entry
from imprint.data.catalog_entries import MIMIR_DOMAINS, MIMIR_SPLITS, MIMIR_TEMPORAL_ARXIV
from imprint.errors import ConfigError, DataError

NON_LATIN = ["東京で開かれた会議について", "Москва приняла закон о данных", "हिन्दी में एक वाक्य है"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data dir searched alone (the shared WikiMIA copy is not seen), hub off."""
    folder = tmp_path / "data ü"
    folder.mkdir()
    monkeypatch.setattr(files_mod, "data_dirs", lambda: [folder])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder


def _jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _parquet(path: Path, columns: dict[str, list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


# --- registry lookups --------------------------------------------------------------------------


def test_every_name_of_the_issue_is_registered() -> None:
    names = {e.name for e in iter_benchmarks()}
    for n in (32, 64, 128, 256):
        assert {f"wikimia:{n}", f"wikimia24:{n}", f"wikimia25:{n}"} <= names
    mimir = {f"mimir:{d}/{s}" for d in MIMIR_DOMAINS for s in MIMIR_SPLITS}
    assert len(mimir) == 21 and mimir <= names
    assert "mimir:wikipedia_(en)/ngram_13_0.8" in names
    assert {"mimir:temporal_wiki", "arxivmia", "bookmia", "gutenberg"} <= names
    assert {f"mimir:temporal_arxiv/{m}" for m in MIMIR_TEMPORAL_ARXIV} <= names
    assert {"copyright_traps:10", "copyright_traps:100", "copyright_traps:1000"} <= names
    assert len(names) == 55


def test_every_entry_documents_itself() -> None:
    for e in iter_benchmarks():
        assert e.provenance and e.licence and e.size and e.fields and e.caveats, e.name
        assert e.hub_repo or e.web_url or e.build_hint, e.name
    assert "0.99" in " ".join(get_benchmark("wikimia:64").caveats)
    assert "Das et al. 2024" in " ".join(get_benchmark("wikimia:64").caveats)
    assert "80 % 13-grams" in " ".join(get_benchmark("mimir:arxiv/ngram_13_0.8").caveats)
    assert get_benchmark("wikimia25:64").build_hint.startswith("imprint data build-temporal")
    assert get_benchmark("mimir:pile_cc/ngram_7_0.2").siblings == (
        "mimir:pile_cc/ngram_13_0.2",
        "mimir:pile_cc/ngram_13_0.8",
    )


def test_catalog_order_is_the_issue_order() -> None:
    families = list(dict.fromkeys(e.family for e in iter_benchmarks()))
    assert families == [
        "wikimia",
        "wikimia24",
        "wikimia25",
        "mimir",
        "arxivmia",
        "bookmia",
        "gutenberg",
        "copyright_traps",
    ]
    assert [i.name for i in list_benchmarks("wikimia")][:2] == ["wikimia:32", "wikimia:64"]


@pytest.mark.parametrize(
    ("spec", "suggestion"),
    [
        ("mimir:arxiv/ngram_13_08", "mimir:arxiv/ngram_13_0.8"),
        ("mimr:temporal_wiki", "mimir:temporal_wiki"),
        ("bookmai", "bookmia"),
        ("copyright_traps:1001", "copyright_traps:1000"),
        ("WikiMIA24:64", "wikimia24:64"),
    ],
)
def test_unknown_names_suggest(spec: str, suggestion: str) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data(spec)
    msg = str(exc.value)
    assert "Did you mean" in msg and suggestion in msg and repr(spec) in msg
    assert "imprint datasets" in msg


def test_registry_refuses_bad_entries() -> None:
    entry = get_benchmark("bookmia")
    with pytest.raises(ConfigError, match="already registered"):
        register_entry(entry)
    fields = dict(provenance="p", licence="l", size="s", fields="f", caveats=("c",))
    with pytest.raises(ConfigError, match="needs files"):
        BenchmarkEntry("x", "x", "d", files=(DataFile("x/m", role="member"),), **fields)
    with pytest.raises(ConfigError, match="need hub_repo"):
        BenchmarkEntry("x", "x", "d", files=(DataFile("x/a.jsonl", hub_path="a.jsonl"),), **fields)


# --- each loader on a local copy in the real layout ---------------------------------------------


def test_wikimia_from_the_hub_parquet_layout(data_dir: Path) -> None:
    texts = ["Hurricane Ana was the second tropical cyclone " * 4, *NON_LATIN]
    _parquet(
        data_dir / "wikimia" / "WikiMIA_length64.parquet",
        {"input": texts, "label": [1, 0, 1, 0]},
    )
    data = resolve_data("wikimia:64")
    assert [s.label for s in data.samples] == [1, 0, 1, 0]
    assert [s.text for s in data.samples] == texts
    # the same ids as the shared JSONL copy: the benchmark's, not the file name's
    assert [s.id for s in data.samples][:2] == ["WikiMIA_length64:1", "WikiMIA_length64:2"]


def test_wikimia24_and_wikimia25_layouts(data_dir: Path) -> None:
    _parquet(
        data_dir / "wikimia24" / "WikiMIA_length32.parquet",
        {"input": NON_LATIN[:2], "label": [1, 0]},
    )
    assert resolve_data("wikimia24:32").samples[1].text == NON_LATIN[1]
    # the temporal builder's output: one {"input", "label"} JSONL per bucket
    rows = [{"input": t, "label": i % 2} for i, t in enumerate(NON_LATIN + ["extra text"])]
    _jsonl(data_dir / "wikimia25" / "wikimia_128.jsonl", rows)
    data = resolve_data("wikimia25:128")
    assert data.labels == (0, 1, 0, 1) and data.samples[0].id == "wikimia25_128:1"


def _mimir_files(root: Path, stem: str, members: list[str], nonmembers: list[str]) -> None:
    base = root / "mimir" / "cache_100_200_1000_512"
    for folder, texts in (("train", members), ("test", nonmembers)):
        # the hub's files: one JSON string per line (json.dumps of the text)
        path = base / folder / f"{stem}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(t) + "\n" for t in texts), "utf-8")


def test_mimir_member_and_nonmember_files(data_dir: Path) -> None:
    long_text = "word " * 5000 + "終わり"
    members = ["def f(x):\n    return x  # code\n", long_text, NON_LATIN[0]]
    nonmembers = ["\\begin{theorem} $x^2$ \\end{theorem}", NON_LATIN[1]]
    _mimir_files(data_dir, "arxiv_ngram_13_0.8", members, nonmembers)
    data = resolve_data("mimir:arxiv/ngram_13_0.8")
    assert data.labels == (MEMBER,) * 3 + (NON_MEMBER,) * 2
    assert [s.text for s in data.samples] == members + nonmembers
    assert data.samples[0].id == "mimir_arxiv/ngram_13_0.8:member:1"
    assert data.samples[3].meta == {"role": "nonmember"}
    assert "train" in data.source and "test" in data.source
    # the temporal sets share the layout
    _mimir_files(data_dir, "temporal_wiki", ["a 2016 page"], ["a 2024 page"])
    assert resolve_data("mimir:temporal_wiki").labels == (1, 0)
    _mimir_files(data_dir, "temporal_arxiv_2021_06", ["old paper"], ["new paper"])
    assert len(resolve_data("mimir:temporal_arxiv/2021_06")) == 2


def test_mimir_bad_lines_raise_or_are_counted(data_dir: Path) -> None:
    base = data_dir / "mimir" / "cache_100_200_1000_512"
    _mimir_files(data_dir, "github_ngram_7_0.2", ["ok member"], ["ok non-member"])
    bad = base / "test" / "github_ngram_7_0.2.jsonl"
    bad.write_bytes(b'"ok non-member"\n{not json\n42\n"   "\n"\\ud83d alone"\n\xff\xfe\n')
    with pytest.raises(DataError, match=r"test/github_ngram_7_0\.2\.jsonl: line 2: invalid JSON"):
        resolve_data("mimir:github/ngram_7_0.2")
    data = resolve_data("mimir:github/ngram_7_0.2", on_bad="drop")
    assert len(data) == 2
    assert data.dropped == {
        "invalid JSON": 1,
        "text is not a string": 1,
        "empty text": 1,
        "lone surrogate": 1,
        "invalid UTF-8": 1,
    }
    with pytest.raises(DataError, match="do not apply"):
        resolve_data("mimir:github/ngram_7_0.2", text_field="text")


def test_arxivmia_jsonl_with_its_fields(data_dir: Path) -> None:
    rows = [
        {"text": "We prove a bound on $\\epsilon$.", "label": 1, "field": "math"},
        {"text": "A transformer for 中文 retrieval.", "label": 0, "field": "cs"},
    ]
    _jsonl(data_dir / "arxivmia" / "data" / "arxiv_mia_test.jsonl", rows)
    data = resolve_data("arxivmia:test")
    assert data.labels == (1, 0) and data.samples[1].meta == {"field": "cs"}
    assert data.samples[0].id == "arxiv_mia_test:1"
    # an earlier hub revision kept the files at the repository root: also accepted
    _jsonl(data_dir / "arxivmia" / "arxiv_mia.jsonl", rows)
    assert len(resolve_data("arxivmia")) == 2


def test_bookmia_maps_snippet_to_text(data_dir: Path) -> None:
    rows = [
        {
            "book_id": 0,
            "book": "Old.txt",
            "snippet_id": 0,
            "snippet": "It was a dark night.",
            "label": 1,
        },
        {"book_id": 1, "book": "New.txt", "snippet_id": 0, "snippet": NON_LATIN[2], "label": 0},
    ]
    _jsonl(data_dir / "bookmia" / "book_data.jsonl", rows)
    data = resolve_data("bookmia")
    assert [s.text for s in data.samples] == ["It was a dark night.", NON_LATIN[2]]
    assert data.samples[0].meta["book"] == "Old.txt" and "snippet" not in data.samples[0].meta
    assert data.samples[0].id == "bookmia:1"


def test_gutenberg_text_folders(data_dir: Path) -> None:
    root = data_dir / "gutenberg"
    for role, texts in (
        ("member", ["Vain Fortune", "Chapter I", "Ten"]),
        ("nonmember", ["Новая книга"]),
    ):
        (root / role).mkdir(parents=True)
        for i, text in enumerate(texts):
            name = {0: "0", 1: "2", 2: "10"}[i]
            (root / role / f"{name}.txt").write_bytes(b"\xef\xbb\xbf" * (i == 1) + text.encode())
    data = resolve_data("gutenberg")
    # natural order of file names (2 before 10), the byte-order mark removed
    assert [s.text for s in data.samples] == ["Vain Fortune", "Chapter I", "Ten", "Новая книга"]
    assert [s.id for s in data.samples][:3] == [
        "gutenberg:member:0",
        "gutenberg:member:2",
        "gutenberg:member:10",
    ]
    (root / "nonmember" / "7.txt").write_bytes(b"caf\xe9 latin-1")
    with pytest.raises(DataError, match=r"nonmember: 7: invalid UTF-8"):
        resolve_data("gutenberg")
    assert resolve_data("gutenberg", on_bad="drop").dropped == {"invalid UTF-8": 1}


def test_copyright_traps_parquet(data_dir: Path) -> None:
    _parquet(
        data_dir / "copyright_traps" / "data" / "seq_len_100_n_rep_1000-00000-of-00001.parquet",
        {"text": ["a trap sequence", "an unseen sequence"], "label": [1, 0]},
    )
    data = resolve_data("copyright_traps:1000")
    assert data.labels == (1, 0) and data.samples[0].id == "seq_len_100_n_rep_1000:1"
    _parquet(
        data_dir / "copyright_traps" / "seq_len_25_n_rep_10.parquet",
        {"text": ["x", "y"], "label": [0, 1]},
    )
    assert resolve_data("copyright_traps:10/25").labels == (0, 1)


def test_local_copy_flat_in_the_data_dir(data_dir: Path) -> None:
    """A labelled table may sit directly in a data dir under its own file name."""
    _jsonl(
        data_dir / "book_data.jsonl", [{"snippet": "s", "label": 1}, {"snippet": "t", "label": 0}]
    )
    assert len(resolve_data("bookmia")) == 2


def test_a_file_name_two_benchmarks_use_is_never_looked_up_flat(data_dir: Path) -> None:
    """WikiMIA-24's Parquet is named like WikiMIA's: dropped flat in the data dir, it must not
    be read as wikimia:64 (nor as wikimia24:64: the name says nothing about which it is)."""
    _parquet(data_dir / "WikiMIA_length64.parquet", {"input": ["a", "b"], "label": [1, 0]})
    for name in ("wikimia:64", "wikimia24:64"):
        with pytest.raises(DataError, match="not available here"):
            resolve_data(name)


# --- the offline error ----------------------------------------------------------------------------


def test_offline_error_names_every_file_its_path_and_url(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data("mimir:pubmed_central/ngram_13_0.2")
    msg = str(exc.value)
    base = data_dir / "mimir" / "cache_100_200_1000_512"
    assert str(base / "train" / "pubmed_central_ngram_13_0.2.jsonl") in msg
    assert str(base / "test" / "pubmed_central_ngram_13_0.2.jsonl") in msg
    url = "https://huggingface.co/datasets/iamgroot42/mimir/resolve/main/cache_100_200_1000_512"
    assert f"{url}/train/pubmed_central_ngram_13_0.2.jsonl" in msg
    assert "HF_HUB_OFFLINE" in msg and "IMPRINT_DATA_DIR" in msg


def test_offline_error_for_a_pattern_file_and_a_web_set(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data("wikimia24:256")
    msg = str(exc.value)
    assert str(data_dir / "wikimia24" / "WikiMIA_length256.parquet") in msg
    assert "wjfu99/WikiMIA-24/tree/main/data (the file matching data/WikiMIA_length256-*" in msg
    with pytest.raises(DataError) as exc:
        resolve_data("gutenberg")
    msg = str(exc.value)
    assert str(data_dir / "gutenberg" / "member") in msg
    assert "github.com/ethz-spylab/Blind-MIA/tree/main/data/gutenberg/nonmember" in msg


def test_offline_error_for_a_set_built_locally(data_dir: Path) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data("wikimia25:32")
    msg = str(exc.value)
    assert "imprint data build-temporal" in msg
    assert str(data_dir / "wikimia25" / "wikimia_32.jsonl") in msg


def test_error_when_huggingface_hub_is_missing(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if uninstalled
    with pytest.raises(DataError) as exc:
        resolve_data("bookmia")
    msg = str(exc.value)
    assert "huggingface_hub is not installed" in msg
    assert str(data_dir / "bookmia" / "book_data.jsonl") in msg
    assert "swj0419/BookMIA/resolve/main/book_data.jsonl" in msg


# --- imprint datasets ----------------------------------------------------------------------------


def test_cli_datasets_table_and_json(data_dir: Path) -> None:
    _jsonl(data_dir / "bookmia" / "book_data.jsonl", [{"snippet": "s", "label": 1}])
    runner = CliRunner()
    result = runner.invoke(app, ["datasets", "--json"])
    assert result.exit_code == 0, result.output
    listed = {d["name"]: d for d in json.loads(result.output)}
    assert len(listed) == 55
    assert listed["bookmia"]["local_copy"] == str(data_dir / "bookmia" / "book_data.jsonl")
    assert listed["mimir:arxiv/ngram_13_0.8"]["local_copy"] is None
    assert listed["mimir:arxiv/ngram_13_0.8"]["files"][0]["hub_path"].endswith(
        "train/arxiv_ngram_13_0.8.jsonl"
    )
    table = runner.invoke(app, ["datasets", "mimir:temporal"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "mimir:temporal_arxiv/2023_06" in table.output and "mimir:arxiv/" not in table.output
    assert "Das et al. 2024" in table.output
    unknown = runner.invoke(app, ["datasets", "bookmai"])
    assert unknown.exit_code == 2 and "Did you mean bookmia" in unknown.output


def test_an_empty_file_is_not_a_local_copy(data_dir: Path) -> None:
    """A 0-byte file (an interrupted download, a placeholder) is not listed as a local copy by
    `imprint datasets`, and loading says the file is empty rather than 'no usable texts'."""
    name = "mimir:pubmed_central/ngram_13_0.2"
    base = data_dir / "mimir" / "cache_100_200_1000_512"
    for folder in ("train", "test"):
        (base / folder).mkdir(parents=True, exist_ok=True)
        (base / folder / "pubmed_central_ngram_13_0.2.jsonl").write_bytes(b"")
    (info,) = [i for i in list_benchmarks("mimir") if i.name == name]
    assert info.local_path is None and not info.available
    listed = CliRunner().invoke(app, ["datasets", "--json", "mimir"])
    (row,) = [r for r in json.loads(listed.output) if r["name"] == name]
    assert row["local_copy"] is None
    with pytest.raises(DataError) as exc:
        resolve_data(name)
    message = str(exc.value)
    assert "not available here" in message and "is empty (0 bytes)" in message
    assert str(base / "train" / "pubmed_central_ngram_13_0.2.jsonl") in message
