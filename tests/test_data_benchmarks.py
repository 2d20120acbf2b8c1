"""Benchmarks and data specs: the real WikiMIA files, IMPRINT_DATA_DIR, schemes, suggestions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import force_hub_offline

from imprint.data import (
    BenchmarkInfo,
    LoadedData,
    data_dirs,
    list_benchmarks,
    register_data_scheme,
    resolve_data,
)
from imprint.data import benchmarks as bench_mod
from imprint.errors import ConfigError, DataError

# The shared benchmark files live next to the repository, <repo>/../shared/data (maybe a link).
SHARED_DATA = (Path(__file__).resolve().parents[2] / "shared" / "data").resolve()
WIKIMIA_ROWS = {32: 776, 64: 542, 128: 250, 256: 82}


def test_shared_data_present() -> None:
    assert (SHARED_DATA / "wikimia" / "WikiMIA_length32.jsonl").is_file(), SHARED_DATA


def test_wikimia_32_from_shared_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMPRINT_DATA_DIR", raising=False)
    data = resolve_data("wikimia:32")
    assert isinstance(data, LoadedData)
    assert len(data) == 776
    assert set(data.labels) == {0, 1}
    assert data.samples[0].id == "WikiMIA_length32:1"
    assert Path(data.source).resolve() == (SHARED_DATA / "wikimia" / "WikiMIA_length32.jsonl")
    assert data.dropped == {}


@pytest.mark.parametrize("n", [64, 128, 256])
def test_other_wikimia_lengths(n: int) -> None:
    data = resolve_data(f"wikimia:{n}")
    assert len(data) == WIKIMIA_ROWS[n] and set(data.labels) == {0, 1}


def test_resolve_from_other_working_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repo-sibling lookup works wherever the process runs."""
    monkeypatch.delenv("IMPRINT_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert len(resolve_data("wikimia:32")) == 776


def test_list_benchmarks() -> None:
    infos = list_benchmarks()
    assert all(isinstance(i, BenchmarkInfo) for i in infos)
    names = [i.name for i in infos]
    assert names[:4] == ["wikimia:32", "wikimia:64", "wikimia:128", "wikimia:256"]
    by_name = {i.name: i for i in infos}
    local = by_name["wikimia:64"].local_path
    assert local is not None and local.resolve() == SHARED_DATA / "wikimia/WikiMIA_length64.jsonl"
    assert "WikiMIA" in by_name["wikimia:64"].description


def test_imprint_data_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "wikimia").mkdir()
    rows = [{"input": "tiny member", "label": 1}, {"input": "tiny non-member", "label": 0}]
    (tmp_path / "wikimia" / "WikiMIA_length32.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    monkeypatch.setenv("IMPRINT_DATA_DIR", str(tmp_path))
    assert data_dirs()[0] == tmp_path.resolve()
    data = resolve_data("wikimia:32")
    assert len(data) == 2 and data.samples[0].text == "tiny member"
    info = {i.name: i for i in list_benchmarks()}["wikimia:32"]
    assert info.local_path == tmp_path / "wikimia" / "WikiMIA_length32.jsonl"
    # lengths absent from the override still come from the shared data
    assert len(resolve_data("wikimia:64")) == 542


def test_field_kwargs_pass_through(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("body,y\nhello there,member\nbye now,non-member\n")
    data = resolve_data(str(path), text_field="body", label_field="y")
    assert [s.label for s in data.samples] == [1, 0]
    dropped = resolve_data("wikimia:32", on_bad="drop")
    assert dropped.dropped == {} and len(dropped) == 776


def test_file_path_spec(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n')
    assert len(resolve_data(str(path))) == 2
    with pytest.raises(DataError, match="does not exist"):
        resolve_data(str(tmp_path / "missing.jsonl"))


@pytest.mark.parametrize(
    ("spec", "suggestion"),
    [("wikimia:31", "wikimia:32"), ("wikmia:64", "wikimia:64"), ("wikimia", "wikimia:")],
)
def test_unknown_name_suggests(spec: str, suggestion: str) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data(spec)
    msg = str(exc.value)
    assert "did you mean" in msg.lower() and suggestion in msg and repr(spec) in msg


def test_hf_spec_offline_gives_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    force_hub_offline(monkeypatch)
    with pytest.raises(DataError) as exc:
        resolve_data("hf:imprint-nonexistent-owner/no-such-dataset:test")
    assert "unreachable" in str(exc.value) and "IMPRINT_DATA_DIR" in str(exc.value)


def test_hf_spec_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake(name: str, **kw):
        calls.append((name, kw))
        return "sentinel"

    monkeypatch.setattr(bench_mod, "load_hf_dataset", fake)
    assert resolve_data("hf:o/n:valid", text_field="t") == "sentinel"
    resolve_data("hf:o/n")
    assert calls == [("o/n", {"split": "valid", "text_field": "t"}), ("o/n", {"split": "train"})]
    with pytest.raises(DataError, match="needs a dataset name"):
        resolve_data("hf:")


def test_benchmark_offline_names_the_file_and_never_calls_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named benchmarks read hub data files directly (no `datasets` loading); offline, the error
    names the file to place, its full path and the hub URL (more in test_data_registry.py)."""
    import imprint.data.benchmark_files as files_mod

    monkeypatch.setattr(files_mod, "data_dirs", lambda: [tmp_path])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_datasets(name: str, **kw):
        raise AssertionError("a named benchmark must not go through datasets.load_dataset")

    monkeypatch.setattr(bench_mod, "load_hf_dataset", no_datasets)
    with pytest.raises(DataError) as exc:
        resolve_data("wikimia:128")
    msg = str(exc.value)
    assert str(tmp_path / "wikimia" / "WikiMIA_length128.jsonl") in msg
    assert "huggingface.co/datasets/swj0419/WikiMIA/resolve/main/data/WikiMIA_length128" in msg
    assert "IMPRINT_DATA_DIR" in msg


def test_register_data_scheme(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bench_mod, "_SCHEMES", bench_mod._SCHEMES.copy())
    seen = []

    def game(rest: str, **kw) -> LoadedData:
        seen.append((rest, kw))
        return LoadedData((), "game", "fp", {})

    register_data_scheme("toy", game)
    out = resolve_data(f"toy:{tmp_path}", on_bad="drop")
    assert out.source == "game" and seen == [(str(tmp_path), {"on_bad": "drop"})]
    with pytest.raises(ConfigError, match="already registered"):
        register_data_scheme("toy", game)
    register_data_scheme("toy", game, force=True)
    for bad in ("g", "a:b", ""):
        with pytest.raises(ConfigError):
            register_data_scheme(bad, game)
    with pytest.raises(DataError, match="toy:"):  # listed among known specs
        resolve_data("tyo:x")


def test_windows_style_drive_is_a_path() -> None:
    with pytest.raises(DataError, match="does not exist"):
        resolve_data("C:" + os.sep + "nowhere" + os.sep + "x.jsonl")
