"""``imprint experiment FILE.yaml``: a grid of models x benchmarks x attacks x options, written as
paper tables (:mod:`imprint.study`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import console, handle_errors, on_interrupt, say, warn
from imprint.cli.run import Address, ExecutorKind, WorkerCpus, Workers

__all__ = ["experiment"]

File = Annotated[
    Path, typer.Argument(help="experiment file (YAML), e.g. examples/wikimia-offline.yaml")
]
Out = Annotated[
    Path | None, typer.Option(help="study folder (default: the file's 'out', else studies/<stem>)")
]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="no progress bars")]
Plan = Annotated[
    bool,
    typer.Option("--plan", help="check the file as a run would, list the cells and their cost"),
]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="use an --out folder that is not a study (deletes its contents)"
    ),
]


@handle_errors
@on_interrupt(
    "interrupted: finished cells and every stored model request are kept; rerun the same "
    "command to resume"
)
def experiment(
    file: File,
    out: Out = None,
    no_progress: NoProgress = False,
    plan: Plan = False,
    executor_kind: ExecutorKind = "local",
    address: Address = None,
    workers: Workers = None,
    worker_cpus: WorkerCpus = 1,
    overwrite: Overwrite = False,
) -> None:
    """Run an experiment grid (reusing every finished cell and cached model pass) and write its
    tables: CSV, Markdown, LaTeX, an HTML heat-map and cells.parquet."""
    from imprint.executors import ExecutorConfig
    from imprint.study.spec import load_spec

    # checked before the file is read: without Ray, --executor ray names its install command
    executor = ExecutorConfig(
        kind=executor_kind, address=address, workers=workers, worker_cpus=worker_cpus
    )
    from imprint.outdir import check_inputs_outside, check_kind, claim_folder, folder_lock

    spec = load_spec(file, out=out)
    if spec.cache_note:
        say(spec.cache_note)
    claim_folder(spec.out, "study", overwrite=overwrite, dry=True)  # never another kind's folder
    if plan:
        _print_plan(spec, executor)
        return
    if check_kind(spec.out, "study", overwrite=overwrite):
        # --overwrite is about to empty a folder imprint did not write: the grid's own checks
        # run first, so a grid the run would refuse never costs the user that folder
        from imprint.study.checks import check_games, raise_all
        from imprint.study.grid import grid_models, prepare_grid

        raise_all(str(spec.source), check_games(spec))
        prepare_grid(spec, grid_models(spec), executor)
        check_inputs_outside(spec.out, _local_inputs(spec), why="--overwrite would delete the "
                             "folder's contents")  # fmt: skip
    claim_folder(spec.out, "study", overwrite=overwrite)

    def waiting(holder: str) -> None:
        say(f"another imprint experiment ({holder}) is running on {spec.out}; waiting for it "
            "to finish, then its cells are read back, not computed again")  # fmt: skip

    with folder_lock(spec.out, on_wait=waiting):  # two invocations never compute one cell twice
        started = time.time()
        games = _build_games(spec, progress=not no_progress)
        from imprint.study.grid import run_grid
        from imprint.study.table_render import write_outputs
        from imprint.study.tables import build_tables

        result = run_grid(spec, executor, games=games, console=console, progress=not no_progress)
        tables = build_tables(result)
        written = write_outputs(result, tables, spec.out)
        _record(spec.out, result, time.time() - started)
    _print_summary(result, tables, written)


def _local_inputs(spec: Any) -> list[tuple[str, Any]]:
    """What the grid reads, as ``(place, spec)``: the file, models, refs, data, pools, games."""
    inputs: list[tuple[str, Any]] = [("the grid file", spec.source)]
    inputs += [(f"models[{i}]", m.model) for i, m in enumerate(spec.models)]
    inputs += [(f"refs.{name}", model) for name, model in spec.refs]
    for i, bench in enumerate(spec.benchmarks):
        inputs.append((f"benchmarks[{i}]", bench.data))
        inputs += [(f"benchmarks[{i}].pools.{k}", v) for k, v in bench.pools.items()]
    for sweep in spec.games:
        inputs += [
            (f"games {sweep.name}: {k}", sweep.config.get(k) or "") for k in ("model", "pool")
        ]
    return inputs


def _build_games(spec: Any, *, progress: bool) -> dict[str, dict[int, Path]]:
    """Build (or reuse) each game sweep once per epoch count, under ``<out>/games/<name>``."""
    if not spec.games:
        return {}
    from imprint.game.build import build_games
    from imprint.game.config import GameConfig
    from imprint.study.checks import check_games, raise_all

    raise_all(str(spec.source), check_games(spec))  # every game's problem, named, before training
    built = {}
    for sweep in spec.games:
        config = GameConfig(**{**sweep.config, "epochs": max(sweep.epochs)})
        folder = spec.out / "games" / _slug(sweep.name)
        if len(sweep.epochs) == 1:
            folder = folder / f"epochs-{sweep.epochs[0]}"
        built[sweep.name] = build_games(
            config, sweep.epochs, out=folder, device=spec.settings.device, console=console,
            progress=progress,
        )  # fmt: skip
    return built


def _slug(name: str) -> str:
    from imprint.study.table_render import slug

    return slug(name)


def _record(out: Path, result: Any, elapsed: float) -> None:
    """Append this invocation's work to ``<out>/invocations.jsonl`` (one JSON line each)."""
    line = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "elapsed_s": round(elapsed, 2),
        "cells_computed": result.computed,
        "cells_reused": result.reused,
        "models_loaded": result.models_loaded,
        "model_calls_executed": result.executed,
        "requests": result.requests,
    }
    out.mkdir(parents=True, exist_ok=True)
    with (out / "invocations.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def _print_plan(spec: Any, executor: Any) -> None:
    """The grid checked as a run checks it (a grid the run refuses fails here), its cells,
    which are stored, and the cost of the rest."""
    from imprint.study.plan import plan_grid, seconds_per_cell

    made = plan_grid(spec, executor)
    say(f"{spec.source}: {len(spec.models)} model(s), {len(spec.benchmarks)} benchmark(s), "
        f"{len(spec.variants)} attack variant(s), {len(spec.games)} game sweep(s)")  # fmt: skip
    for model in spec.models:
        say(f"  model {model.name}: {model.model}")
    for bench in spec.benchmarks:
        say(f"  benchmark {bench.name}: {bench.data}")
    for variant in spec.variants[:20]:
        say(f"  attack {variant.label}")
    if len(spec.variants) > 20:
        say(f"  ... and {len(spec.variants) - 20} more attack variants")
    for sweep in spec.games:
        say(f"  game {sweep.name}: epochs {list(sweep.epochs)} (its cells are counted once built)")
    say(f"cells: {len(made.places)} ({made.stored} distinct stored); to compute: "
        f"{made.to_compute} in {made.runs} run(s)")  # fmt: skip
    for (model, bench), (have, total) in made.by_column().items():
        say(f"  {model or 'blind baseline'} on {bench}: {have} of {total} stored")
    pace, source = seconds_per_cell(spec.out)
    cost = made.to_compute * pace
    say(
        f"estimated time: {_duration(cost)} ({pace:.1f} s per cell, from {source}; each run "
        "writes a run folder with its HTML report and plots), plus the model passes: up to "
        f"{made.texts} texts to score (once per model and benchmark; cached ones are free)"
    )
    if made.to_compute > 100:
        warn(f"a large grid: {made.to_compute} cells to compute, about {_duration(cost)}; a "
             "sweep over fewer values, or fewer attacks, costs proportionally less")  # fmt: skip
    say(f"study folder {spec.out}, cache {spec.cache}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _print_summary(result: Any, tables: Any, written: list[Path]) -> None:
    from imprint.study.table_render import rich_tables

    for table in rich_tables(tables):
        console.print(table)
    for path in written:
        say(f"wrote {path}")
    executed = {
        model: {kind: counts.get("executed", 0) for kind, counts in kinds.items()}
        for model, kinds in result.requests.items()
    }
    say(
        f"cells: {result.computed} computed, {result.reused} read back; models loaded: "
        f"{len(result.models_loaded)}; model calls executed: {result.executed} {executed or ''}"
    )
    for table in tables:
        for note in table.notes:
            warn(f"{table.title}: {note}")
