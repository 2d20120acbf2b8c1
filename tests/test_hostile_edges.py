"""Regression tests from the round-3 hostile test (issue 19, items 6-8, 10-12 and two of 15):
repeated YAML keys, output folders of another kind, unwritable --out, an unreachable Ray address,
and what ``imprint experiment --plan`` checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import cli, small_data

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


def _fake_run(folder: Path) -> Path:
    """A folder with a run's signature (as :func:`is_run_folder` reads it), no model needed."""
    import json

    folder.mkdir(parents=True)
    manifest = {"config": {"model": "m"}, "versions": {"python": "3"}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name in ("metrics.json", "scores.parquet"):
        (folder / name).write_text("{}", encoding="utf-8")
    return folder


@pytest.mark.parametrize("out", ["/sys/imprint-no/run", "/proc/imprint-no/run"])
def test_a_run_out_where_no_folder_can_be_made_is_refused_before_any_work(
    tmp_path: Path, out: str
) -> None:
    from imprint.run import RunConfig, execute_run

    # the model does not exist: only a check made before any work can name --out
    config = RunConfig(model=str(tmp_path / "no-such-model"), data=str(small_data(tmp_path)),
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
    code, output = cli("data", "build-temporal", "--dump", tmp_path / "dump.jsonl", "--out", run,
                       "--member-before", "2020-01-01", "--nonmember-after", "2021-01-01",
                       "--overwrite")  # fmt: skip
    assert code == 2, output
    assert "is an imprint run folder; this command writes a build-temporal benchmark" in output
    assert (run / "manifest.json").read_text(encoding="utf-8") == before


def test_build_temporal_refuses_a_users_folder_without_overwrite(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    code, output = cli("data", "build-temporal", "--dump", tmp_path / "dump.jsonl",
                       "--out", mine, "--member-before", "2020-01-01",
                       "--nonmember-after", "2021-01-01")  # fmt: skip
    assert code == 2 and "imprint did not write" in output and "notes.txt" in output, output
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_run_out_that_is_a_symlink_is_refused_and_the_link_kept(tmp_path: Path) -> None:
    from imprint.outdir import check_out_dir

    run = _fake_run(tmp_path / "run-1")
    link = tmp_path / "latest"
    link.symlink_to(run)
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match=r"symbolic link .*Pass that folder itself"):
            check_out_dir(link, overwrite=overwrite)
    assert link.is_symlink() and link.resolve() == run.resolve()
    assert check_out_dir(run, overwrite=True) == run


def test_overlap_build_overwrite_refuses_a_run_folder(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    before = (run / "manifest.json").read_text(encoding="utf-8")
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two three four five six seven eight\n", encoding="utf-8")
    code, output = cli(
        "overlap", "build", "--corpus", corpus, "--out", run, "--overwrite", "--no-measure"
    )
    assert code == 2, output
    assert "is an imprint run folder, not an n-gram index" in output
    assert (run / "manifest.json").read_text(encoding="utf-8") == before


def test_perturb_and_run_refuse_an_output_of_another_kind_even_with_overwrite(
    tmp_path: Path,
) -> None:
    from imprint.outdir import check_out_dir, mark_output

    run = _fake_run(tmp_path / "run")
    code, output = cli("perturb", "--data", small_data(tmp_path), "--out", run, "--overwrite")
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
    assert check_out_dir(run, overwrite=True) == run  # an earlier run is replaced on request
    with pytest.raises(ConfigError, match="already holds an earlier imprint run"):
        check_out_dir(run)  # and only then (issue 24: no run silently replaces another)


def test_a_file_output_never_replaces_a_file_of_an_imprint_output(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    code, output = cli("blind", "--data", small_data(tmp_path), "--out", run / "metrics.json",
                       "--overwrite")  # fmt: skip
    assert code == 2, output
    assert "is a file of an imprint run folder; pass a file path outside it" in output
    assert (run / "metrics.json").read_text(encoding="utf-8") == "{}"


# -- item 6: experiment --out ---------------------------------------------------------------------


def _grid(tmp_path: Path, model: str, data: str, **extra: object) -> Path:
    import yaml

    settings = {"n_bootstrap": 20, "device": "cpu", "blind": False}
    content = {"models": [model], "benchmarks": [data], "attacks": ["loss"],
               "settings": settings, **extra}  # fmt: skip
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    return path


@pytest.mark.parametrize("plan", [False, True])
def test_experiment_refuses_a_folder_that_is_not_a_study(tmp_path: Path, plan: bool) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "important.txt").write_text("keep", encoding="utf-8")
    (mine / "tables.md").write_text("my tables", encoding="utf-8")
    grid = _grid(tmp_path, "m", "x.jsonl")
    code, output = cli("experiment", grid, "--out", mine, *(["--plan"] if plan else []))
    assert code == 2, output
    assert "is a folder that imprint did not write (not an imprint experiment" in output
    assert "add --overwrite" in output
    assert (mine / "tables.md").read_text(encoding="utf-8") == "my tables"


def test_experiment_refuses_a_run_folder_even_with_overwrite(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    code, output = cli("experiment", _grid(tmp_path, "m", "x.jsonl"), "--out", run, "--overwrite")
    assert code == 2, output
    assert "is an imprint run folder; this command writes an imprint experiment" in output
    assert sorted(p.name for p in run.iterdir()) == [
        "manifest.json",
        "metrics.json",
        "scores.parquet",
    ]


def test_overwrite_empties_a_foreign_folder_and_a_study_folder_is_kept(tmp_path: Path) -> None:
    from imprint.outdir import MARKER, claim_folder, output_kind

    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "tables.md").write_text("my tables", encoding="utf-8")
    claim_folder(mine, "study", overwrite=True)
    assert [p.name for p in mine.iterdir()] == [MARKER] and output_kind(mine) == "study"
    (mine / "cells").mkdir()
    claim_folder(mine, "study")  # an earlier study: resumed, nothing removed
    assert sorted(p.name for p in mine.iterdir()) == sorted([MARKER, "cells"])


def test_overwrite_keeps_a_foreign_folder_when_the_grid_is_refused(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "important.txt").write_text("keep me", encoding="utf-8")
    grid = _grid(tmp_path, str(tiny_model_dir), str(tmp_path / "missing.jsonl"))
    code, output = cli("experiment", grid, "--out", mine, "--overwrite")
    assert code == 2 and "missing.jsonl" in output, output
    assert (mine / "important.txt").read_text(encoding="utf-8") == "keep me"


# -- item 12: --plan checks what the run checks, counts cells, costs them; one lock per study ------


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"benchmarks": ["missing.jsonl"]}, r"benchmark 'missing.jsonl'.*missing.jsonl"),
        (
            {"settings": {"dtype": "float99"}},
            r"settings.dtype \(model .*\): backend 'hf', option "
            r"'dtype'.*'float99'",
        ),
        ({"settings": {"device": "tpu"}}, r"settings.device \(model .*'tpu'"),
        (
            {"models": [{"name": "t", "model": "MODEL", "args": {"dtype": "float99"}}]},
            r"models\[0\].args.dtype \(model 't'\)",
        ),
        # (a bare name such as gpt2 is a hub id; two slashes make no model spec at all)
        ({"models": ["no/such/model"]}, r"models\[0\] \(model 'no/such/model'\): unknown model"),
        ({"refs": {"base": "no/such/ref"}}, r"refs.base: unknown model 'no/such/ref'"),
    ],
)
def test_plan_refuses_what_the_run_refuses(
    tmp_path: Path, tiny_model_dir: Path, change: dict, match: str
) -> None:
    import yaml

    data = small_data(tmp_path)
    base = {"models": [str(tiny_model_dir)], "benchmarks": [str(data)], "attacks": ["loss"],
            "settings": {"n_bootstrap": 20, "device": "cpu", "blind": False}}  # fmt: skip
    text = yaml.safe_dump({**base, **change}).replace("MODEL", str(tiny_model_dir))
    grid = tmp_path / "g.yaml"
    grid.write_text(text, encoding="utf-8")
    code, output = cli("experiment", grid, "--out", tmp_path / "study", "--plan")
    assert code == 2, output
    # the plan lists every problem: "N problems, every one listed: (1) ..." or the one alone
    assert re.search(r"g\.yaml: (\d+ problems, every one listed: \(1\) )?" + match, output), output
    assert not (tmp_path / "study").exists()  # a plan writes nothing


def test_a_run_time_option_error_names_the_file_and_place(tmp_path: Path, tiny_model_dir) -> None:
    from imprint.study.grid import run_grid
    from imprint.study.spec import load_spec

    grid = _grid(tmp_path, str(tiny_model_dir), str(small_data(tmp_path)),
                 settings={"dtype": "float99", "blind": False})  # fmt: skip
    spec = load_spec(grid, out=tmp_path / "study")
    with pytest.raises(ConfigError, match=r"g\.yaml: settings\.dtype \(model .*'float99'"):
        run_grid(spec, None, progress=False)


def test_plan_counts_cells_shows_which_are_stored_and_what_the_rest_cost(
    tmp_path: Path, tiny_model_dir: Path, one_torch_thread: None
) -> None:
    from imprint.study.grid import run_grid
    from imprint.study.spec import load_spec

    data, study = str(small_data(tmp_path)), tmp_path / "study"
    run_grid(load_spec(_grid(tmp_path, str(tiny_model_dir), data), out=study), None,
             progress=False)  # fmt: skip
    grid = _grid(tmp_path, str(tiny_model_dir), data, attacks=["loss", "zlib", "min_k"],
                 sweep={"min_k.k": [0.1, 0.2]})  # fmt: skip
    code, output = cli("experiment", grid, "--out", study, "--plan")
    assert code == 0, output
    assert "cells: 4 (1 distinct stored); to compute: 3 in 2 run(s)" in output
    assert f"on {data}: 1 of 4 stored" in output
    assert "estimated time: 10 s (3.3 s per cell" in output
    assert "plus the model passes: up to 8 texts to score" in output
    assert "a large grid" not in output


def test_plan_of_a_large_sweep_warns_with_its_cost(tmp_path: Path, tiny_model_dir: Path) -> None:
    values = [round(0.005 * i, 3) for i in range(1, 151)]
    grid = _grid(tmp_path, str(tiny_model_dir), str(small_data(tmp_path)), attacks=["min_k"],
                 sweep={"min_k.k": values})  # fmt: skip
    code, output = cli("experiment", grid, "--out", tmp_path / "study", "--plan")
    assert code == 0, output
    assert "to compute: 150 in 150 run(s)" in output
    assert "warning: a large grid: 150 cells to compute, about 8 min" in output
    assert "... and 130 more attack variants" in output


def test_a_second_holder_of_the_study_lock_waits_for_the_first(tmp_path: Path) -> None:
    import threading

    from imprint.outdir import folder_lock

    told: list[str] = []
    order: list[str] = []
    with folder_lock(tmp_path / "study"):
        second = threading.Thread(
            target=lambda: [order.append("second") for _ in [0] if folder_lock(
                tmp_path / "study", on_wait=told.append).__enter__() is None],
        )  # fmt: skip
        second.start()
        second.join(timeout=0.5)
        assert second.is_alive()  # blocked on the lock while the first holds it
        order.append("first done")
    second.join(timeout=10)
    assert order == ["first done", "second"]
    assert told and told[0].startswith("pid ")


# -- item 15: grid errors name the key ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("models: smollm2-135m\nbenchmarks: [x]\nattacks: [loss]\n", r"models: expected a list"),
        ("models: []\nbenchmarks: [x]\nattacks: [loss]\n", r"models: is empty"),
        ("models: [m]\nbenchmarks: x\nattacks: [loss]\n", r"benchmarks: expected a list"),
        ("models: [m]\nbenchmarks: [x]\nattacks: loss\n", r"attacks: expected a list"),
    ],
)
def test_grid_list_errors_name_their_key(tmp_path: Path, content: str, match: str) -> None:
    from imprint.study.spec import load_spec

    path = tmp_path / "g.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"g\.yaml: " + match):
        load_spec(path)


# -- item 11 and item 15: Ray addresses -----------------------------------------------------------


def test_an_unreachable_ray_address_is_refused_at_once_before_any_work(tmp_path: Path) -> None:
    import time

    data = small_data(tmp_path)
    started = time.monotonic()
    # the model does not exist: only a check made before any work can name the address
    where = ("--executor", "ray", "--address", "127.0.0.1:1")
    code, output = cli("run", "--model", tmp_path / "no-such-model", "--data", data, "--out",
                       tmp_path / "out", *where)  # fmt: skip
    assert code == 2, output
    assert "--address '127.0.0.1:1': nothing answers at 127.0.0.1:1" in output
    assert "ray start --head" in output
    assert time.monotonic() - started < 20  # Ray itself retried for 90-215 s


def test_a_silent_listener_is_not_ray_and_odd_addresses_are_refused() -> None:
    import socket

    from imprint.executors.ray_setup import check_address

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with pytest.raises(ConfigError, match="is a web address .the Ray dashboard"):
            check_address(f"http://localhost:{port}")  # the dashboard's URL: refused, not probed
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):  # no gRPC answer
            with pytest.raises(ConfigError, match="but not Ray's protocol .no answer to a gRPC"):
                check_address(address, timeout=0.5)
    check_address(None)
    check_address("auto")
    for bad in ("127.0.0.1:notaport", "ray://", ":6379"):
        with pytest.raises(ConfigError, match="is not a Ray address; pass HOST:PORT"):
            check_address(bad)


def test_a_ray_address_with_credentials_never_repeats_the_password(tmp_path: Path) -> None:
    from imprint.executors import ExecutorConfig
    from imprint.executors.ray_setup import mask_address

    assert mask_address("ray://user:s3cret@h:10001") == "ray://user:***@h:10001"
    assert mask_address("tok@h:6379") == "***@h:6379"
    with pytest.raises(ConfigError) as err:
        ExecutorConfig(kind="ray", address="ray://user:s3cret@127.0.0.1:1")
    assert "s3cret" not in str(err.value) and "ray://user:***@127.0.0.1:1" in str(err.value)
    where = ("--executor", "ray", "--address", "u:s3cret@127.0.0.1:1")
    code, output = cli("run", "--model", tmp_path / "m", "--data", small_data(tmp_path),
                       "--out", tmp_path / "o", *where)  # fmt: skip
    assert code == 2 and "s3cret" not in output and "u:***@127.0.0.1:1" in output, output


def test_a_second_experiment_on_one_folder_waits_and_reads_the_cells_back(
    tmp_path: Path, tiny_model_dir: Path, one_torch_thread: None
) -> None:
    import os
    import select
    import subprocess
    import sys

    from imprint.outdir import folder_lock
    from imprint.study.grid import run_grid
    from imprint.study.spec import load_spec

    grid, study = _grid(tmp_path, str(tiny_model_dir), str(small_data(tmp_path))), tmp_path / "s"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    command = [sys.executable, "-m", "imprint", "experiment", str(grid), "--out", str(study),
               "--no-progress"]  # fmt: skip
    with folder_lock(study):  # a first invocation, still computing
        second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env)  # fmt: skip
        assert second.stdout is not None
        seen = ""
        while "waiting for it" not in seen:
            ready, _, _ = select.select([second.stdout], [], [], 120)
            assert ready and second.poll() is None, seen
            seen += second.stdout.readline()
        run_grid(load_spec(grid, out=study), None, progress=False)
    rest, _ = second.communicate(timeout=300)
    assert second.returncode == 0, seen + rest
    assert "cells: 0 computed, 1 read back; models loaded: 0" in " ".join(rest.split())


def test_plan_refuses_cuda_where_the_load_would(tmp_path: Path, tiny_model_dir: Path) -> None:
    import torch

    grid = _grid(tmp_path, str(tiny_model_dir), str(small_data(tmp_path)),
                 settings={"device": "cuda", "blind": False})  # fmt: skip
    code, output = cli("experiment", grid, "--out", tmp_path / "study", "--plan")
    if torch.cuda.is_available():  # the load would use it: the plan passes
        assert code == 0, output
    else:
        assert code == 2, output
        assert "g.yaml: settings.device (model" in output and "CUDA is not available" in output


def test_the_cost_estimate_uses_the_study_s_own_pace(tmp_path: Path) -> None:
    from imprint.study.plan import DEFAULT_SECONDS_PER_CELL, seconds_per_cell

    assert seconds_per_cell(tmp_path)[0] == DEFAULT_SECONDS_PER_CELL
    lines = ['{"elapsed_s": 30, "cells_computed": 10}', '{"elapsed_s": 2, "cells_computed": 0}',
             'not json', '{"elapsed_s": 10, "cells_computed": 10}']  # fmt: skip
    (tmp_path / "invocations.jsonl").write_text("\n".join(lines), encoding="utf-8")
    pace, source = seconds_per_cell(tmp_path)
    assert pace == pytest.approx(2.0) and "earlier invocations (20 cells)" in source


def test_data_filter_and_overlap_score_never_replace_a_file_of_a_run(tmp_path: Path) -> None:
    run, data = _fake_run(tmp_path / "run"), small_data(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("text number 1 here and more words follow it\n", encoding="utf-8")
    code, output = cli("overlap", "build", "--corpus", corpus, "--out", tmp_path / "idx",
                       "--n", "2", "--no-measure")  # fmt: skip
    assert code == 0, output
    code, output = cli("data", "filter", "--data", data, "--index", tmp_path / "idx", "--n", "2",
                       "--max-overlap", "0.5", "--out", run / "metrics.json")  # fmt: skip
    assert code == 2 and "is a file of an imprint run folder" in output, output
    code, output = cli("overlap", "score", "--index", tmp_path / "idx", "--data", data,
                       "--out", run / "scores.parquet")  # fmt: skip
    assert code == 2 and "is a file of an imprint run folder" in output, output
    assert (run / "metrics.json").read_text(encoding="utf-8") == "{}"
    assert (run / "scores.parquet").read_text(encoding="utf-8") == "{}"


def test_the_manifest_records_a_ray_address_without_its_password() -> None:
    import socket
    import threading

    from imprint.executors import ExecutorConfig
    from imprint.report import to_jsonable

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer_as_grpc() -> None:  # an HTTP/2 SETTINGS frame, as a Ray head's gRPC does
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

        threading.Thread(target=answer_as_grpc, daemon=True).start()
        config = ExecutorConfig(kind="ray", address=f"ray://ann:s3cret@127.0.0.1:{port}")
    assert config.address == f"ray://ann:s3cret@127.0.0.1:{port}"  # ray.init still gets it
    assert to_jsonable(config)["address"] == f"ray://ann:***@127.0.0.1:{port}"
    assert to_jsonable({"executor": config})["executor"]["kind"] == "ray"


def test_a_run_marker_alone_does_not_make_a_folder_replaceable(tmp_path: Path) -> None:
    from imprint.outdir import check_out_dir, mark_output, output_kind

    mine = tmp_path / "mine"
    mark_output(mine, "run")
    (mine / "thesis.tex").write_text("mine", encoding="utf-8")
    assert output_kind(mine) is None
    with pytest.raises(ConfigError, match="imprint did not write"):
        check_out_dir(mine)
    assert output_kind(_fake_run(tmp_path / "run")) == "run"
