"""Regression tests from a hostile test of experiment grids: one model (or data set) under two
names keeps both columns (tables) and runs once; sweep values that give the same row, game names
that give the same folder, table titles that give the same file name, a YAML alias bomb and an
--out that is a file are refused or kept apart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from test_study_grid import write_data, write_spec

from imprint.errors import ConfigError
from imprint.study.grid import run_grid
from imprint.study.spec import load_spec
from imprint.study.table_render import slug, write_outputs
from imprint.study.tables import build_tables


def test_one_model_and_one_data_set_under_two_names_keep_every_column(
    tmp_path: Path, tiny_model_dir: Path, one_torch_thread: None
) -> None:
    data = write_data(tmp_path / "d.jsonl", 6)
    spec = load_spec(
        write_spec(
            tmp_path / "g.yaml",
            models=[
                {"name": "a", "model": str(tiny_model_dir)},
                {"name": "b", "model": str(tiny_model_dir)},
            ],
            benchmarks=[{"name": "B1", "data": str(data)}, {"name": "B2", "data": str(data)}],
            attacks=["loss"],
            out=str(tmp_path / "study"),
        )  # fmt: skip
    )
    result = run_grid(spec, None, progress=False)
    places = sorted((c.model, c.benchmark) for c in result.cells)
    assert places == [("a", "B1"), ("a", "B2"), ("b", "B1"), ("b", "B2")]
    assert result.models_loaded == ["a"]  # b's cells have a's keys: nothing to run twice
    assert result.computed == 1
    tables = build_tables(result)
    assert [t.title for t in tables] == ["B1", "B2"]
    assert all(t.columns == ("a", "b") for t in tables)
    auc = {(t.title, c): t.entries[("loss", c)].auc.estimate for t in tables for c in t.columns}
    assert len(set(auc.values())) == 1  # one computation, shown in four places


@pytest.mark.parametrize("values", [[0.1, 0.1], [1, 1.0], [0.1, 0.1000001]])
def test_sweep_values_that_give_the_same_row_are_refused(tmp_path: Path, values: list) -> None:
    path = write_spec(
        tmp_path / "s.yaml", models=["m"], benchmarks=["x.jsonl"], attacks=["min_k"],
        sweep={"min_k.k": values},
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"sweep: 'min_k \(k=.*\)' comes out twice"):
        load_spec(path)


def test_games_whose_names_give_one_folder_are_refused(tmp_path: Path) -> None:
    games = [{"name": "a/b", "epochs": [1]}, {"name": "a-b", "epochs": [1]}]
    path = write_spec(tmp_path / "g.yaml", games=games, attacks=["loss"])
    with pytest.raises(ConfigError, match=r"games \['a/b', 'a-b'\] would share one folder"):
        load_spec(path)


def test_table_files_never_overwrite_each_other_and_fit_a_file_name(tmp_path: Path) -> None:
    long_4_byte = "𝐀" * 100  # a letter (\w) of 4 UTF-8 bytes: 80 of them exceed 255 bytes
    assert len(slug(long_4_byte).encode()) <= 200
    from imprint.study.grid import GridResult
    from imprint.study.tables import Table

    titles = ["a/b", "a-b", long_4_byte + "1", long_4_byte + "2"]
    tables = [Table(t, (), (), {}) for t in titles]
    spec = load_spec(write_spec(tmp_path / "t.yaml", models=["m"], benchmarks=["x"],
                                attacks=["loss"]))  # fmt: skip
    written = write_outputs(GridResult(spec, []), tables, tmp_path / "out")
    csvs = [p for p in written if p.suffix == ".csv"]
    assert len(csvs) == len(set(csvs)) == 4 and all(p.is_file() for p in csvs)


def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["models: [m]", "benchmarks: [x]", "attacks: [loss]", "settings:", "  seed:"]
    lines.append('    - &l0 ["xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx"]')
    lines += [f"    - &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert yaml.safe_load(path.read_text())  # valid YAML: 4 x 9^8 strings once expanded
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="expands to more than 100,000 values"):
        load_spec(path)
    assert time.perf_counter() - started < 10  # was: minutes and gigabytes (repr of it all)


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    path = write_spec(tmp_path / "o.yaml", models=["m"], benchmarks=["x"], attacks=["loss"])
    with pytest.raises(ConfigError, match="afile is a file; set 'out'"):
        load_spec(path, out=tmp_path / "afile")
