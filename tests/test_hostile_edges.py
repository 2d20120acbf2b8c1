"""Regression tests from the round-3 hostile test (issue 19, items 6-8, 10-12 and two of 15):
repeated YAML keys, output folders of another kind, unwritable --out, an unreachable Ray address,
and what ``imprint experiment --plan`` checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imprint.errors import ConfigError
from imprint.strict_yaml import DuplicateKeyError, safe_load

SRC = Path(__file__).resolve().parents[1] / "src" / "imprint"


# -- item 8: a YAML key given twice ---------------------------------------------------------------


def test_strict_yaml_names_both_lines_of_a_repeated_key() -> None:
    with pytest.raises(DuplicateKeyError, match=r"'attacks' is given twice \(first at line 1, "
                       r"again at line 3\)"):  # fmt: skip
        safe_load("attacks: [loss, zlib]\nmodels: [m]\nattacks: [min_k]\n")
    nested = "models:\n  - {name: a, model: x, name: b}\n"
    with pytest.raises(DuplicateKeyError, match="'name' is given twice"):
        safe_load(nested)


def test_strict_yaml_still_reads_merge_keys_and_plain_files() -> None:
    text = "base: &b {k: 1, m: 2}\nuse:\n  <<: *b\n  k: 3\n"
    assert safe_load(text) == {"base": {"k": 1, "m": 2}, "use": {"k": 3, "m": 2}}
    assert safe_load("a: [1, 2]\nb: {c: d}\n") == {"a": [1, 2], "b": {"c": "d"}}


def test_a_grid_file_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    from imprint.study.spec import load_spec

    path = tmp_path / "g.yaml"
    path.write_text("models: [m]\nbenchmarks: [x.jsonl]\nattacks: [loss, zlib]\n"
                    "attacks: [min_k]\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError, match=r"g.yaml: not valid YAML at line 4.*'attacks' is "
                       r"given twice \(first at line 3, again at line 4\)"):  # fmt: skip
        load_spec(path)


def test_a_training_manifest_listing_a_model_twice_is_refused(tmp_path: Path) -> None:
    from imprint.training_manifest import load_reference_set

    path = tmp_path / "refs.yaml"
    path.write_text("m1: [a, b]\nm1: [c]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"refs.yaml.*'m1' is given twice \(first at line 1"):
        load_reference_set(str(path))


def test_every_yaml_read_goes_through_the_strict_loader() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        if path.name != "strict_yaml.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\byaml\.(safe_load|load|full_load|unsafe_load)\(", line)
    ]
    assert offenders == []


# -- items 6, 7, 10: output folders ---------------------------------------------------------------


def _cli(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from imprint.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def _fake_run(folder: Path) -> Path:
    """A folder with a run's signature (as :func:`is_run_folder` reads it), no model needed."""
    import json

    folder.mkdir(parents=True)
    manifest = {"config": {"model": "m"}, "versions": {"python": "3"}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name in ("metrics.json", "scores.parquet"):
        (folder / name).write_text("{}", encoding="utf-8")
    return folder


def _small_data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(f'{{"text": "text number {i} here", "label": {i % 2}}}\n' for i in range(8)),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("out", ["/sys/imprint-no/run", "/proc/imprint-no/run"])
def test_a_run_out_where_no_folder_can_be_made_is_refused_before_any_work(
    tmp_path: Path, out: str
) -> None:
    from imprint.run import RunConfig, execute_run

    # the model does not exist: only a check made before any work can name --out
    config = RunConfig(model=str(tmp_path / "no-such-model"), data=str(_small_data(tmp_path)),
                       out=Path(out), attacks=("loss",), progress=False, blind=False)  # fmt: skip
    with pytest.raises(ConfigError, match=rf"--out {out}: cannot create a folder in /"):
        execute_run(config)


def test_file_and_folder_outputs_where_nothing_can_be_made_are_refused() -> None:
    from imprint.cli.common import check_out_file, check_out_folder

    with pytest.raises(ConfigError, match="cannot create a folder in /sys"):
        check_out_file(Path("/sys/imprint-no/blind.json"))
    with pytest.raises(ConfigError, match="cannot create a folder in /proc"):
        check_out_folder(Path("/proc/imprint-no/out"), writes=("manifest.json",))


def test_build_temporal_overwrite_refuses_a_run_folder(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    before = (run / "manifest.json").read_text(encoding="utf-8")
    code, output = _cli("data", "build-temporal", "--dump", tmp_path / "dump.jsonl", "--out", run,
                        "--member-before", "2020-01-01", "--nonmember-after", "2021-01-01",
                        "--overwrite")  # fmt: skip
    assert code == 2, output
    assert "is an imprint run folder; this command writes a build-temporal benchmark" in output
    assert (run / "manifest.json").read_text(encoding="utf-8") == before


def test_overlap_build_overwrite_refuses_a_run_folder(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    before = (run / "manifest.json").read_text(encoding="utf-8")
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two three four five six seven eight\n", encoding="utf-8")
    code, output = _cli(
        "overlap", "build", "--corpus", corpus, "--out", run, "--overwrite", "--no-measure"
    )
    assert code == 2, output
    assert "is an imprint run folder, not an n-gram index" in output
    assert (run / "manifest.json").read_text(encoding="utf-8") == before


def test_perturb_and_run_refuse_an_output_of_another_kind_even_with_overwrite(
    tmp_path: Path,
) -> None:
    from imprint.report.outdir import check_out_dir, mark_output

    run = _fake_run(tmp_path / "run")
    code, output = _cli("perturb", "--data", _small_data(tmp_path), "--out", run, "--overwrite")
    assert (
        code == 2 and "is an imprint run folder; this command writes an imprint perturb" in output
    )
    temporal = tmp_path / "temporal"
    temporal.mkdir()
    (temporal / "manifest.json").write_text('{"kind": "imprint temporal benchmark"}', "utf-8")
    with pytest.raises(ConfigError, match="is a build-temporal benchmark folder; this command "
                       "writes an imprint run folder"):  # fmt: skip
        check_out_dir(temporal, overwrite=True)
    study = tmp_path / "study"
    mark_output(study, "study")
    with pytest.raises(ConfigError, match="is an imprint experiment"):
        check_out_dir(study, overwrite=True)
    assert check_out_dir(run) == run  # an earlier run is still replaced


def test_a_file_output_never_replaces_a_file_of_an_imprint_output(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    code, output = _cli("blind", "--data", _small_data(tmp_path), "--out", run / "metrics.json",
                        "--overwrite")  # fmt: skip
    assert code == 2, output
    assert "is a file of an imprint run folder; pass a file path outside it" in output
    assert (run / "metrics.json").read_text(encoding="utf-8") == "{}"
