"""``imprint experiment --plan``: what :func:`~imprint.study.grid.run_grid` would do now, found
by the run's own checks (:func:`~imprint.study.grid.prepare_grid`): a grid the run would refuse
is refused here too. Lists how many cells there are, which are stored already, how many runs
(each a full run folder) the missing ones need, and what that costs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.executors import ExecutorConfig
from imprint.study.cells import CellStore
from imprint.study.grid import (
    _data_id,
    _slots,
    _unique_keys,
    grid_models,
    prepare_grid,
)
from imprint.study.spec import StudySpec

__all__ = ["GridPlan", "plan_grid", "seconds_per_cell"]

#: seconds per computed cell when the study has no earlier invocation to time it by: a
#: 100-value sweep of smollm2-135m took 5 min 33 s (measured in issue 19), each cell
#: writing a run folder with its HTML report and plots
DEFAULT_SECONDS_PER_CELL = 3.3


@dataclass(frozen=True)
class GridPlan:
    """Every grid place ``(model, benchmark, row, done)`` (blind cells first, model ``""``),
    the distinct cells still to compute, those stored, the runs the missing ones need and the
    texts their models score (before the cache answers).
    Game snapshots are not counted: they exist only once their games are built."""

    spec: StudySpec
    places: tuple[tuple[str, str, str, bool], ...]
    to_compute: int
    stored: int
    runs: int
    texts: int  # texts scored by each missing cell's model, once per model and benchmark

    def by_column(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(model, benchmark) -> (cells stored, cells), in grid order."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for model, bench, _, done in self.places:
            have, total = out.get((model, bench), (0, 0))
            out[(model, bench)] = (have + done, total + 1)
        return out


def plan_grid(spec: StudySpec, executor: ExecutorConfig | None = None) -> GridPlan:
    """Check ``spec`` as a run does before its first model loads, and find the stored cells;
    compute and write nothing."""
    from imprint.study.checks import check_games, raise_all

    raise_all(str(spec.source), check_games(spec))  # what the run's game builds refuse
    store = CellStore(spec.out / "cells")
    data, blind, cells = prepare_grid(spec, grid_models(spec), executor)
    keys = [*blind, *(c.key for c in cells)]
    stored = {key for key in dict.fromkeys(keys) if store.get(key) is not None}
    places = [
        ("", bench.name, "blind baseline", key in stored) for key, (bench, _, _) in blind.items()
    ]
    places += [(c.model.name, c.benchmark.name, c.variant.label, c.key in stored) for c in cells]
    missing = [c for c in cells if c.key not in stored]
    to_compute = len({c.key for c in missing}) + sum(k not in stored for k in blind)
    texts = texts_to_score(missing, data)
    return GridPlan(spec, tuple(places), to_compute, len(stored), run_slots(missing), texts)


def seconds_per_cell(out: Path) -> tuple[float, str]:
    """This study's own pace (seconds per computed cell over its earlier invocations, from
    ``invocations.jsonl``) and where it comes from; :data:`DEFAULT_SECONDS_PER_CELL` without."""
    elapsed, cells = 0.0, 0
    try:
        lines = (out / "invocations.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            entry = json.loads(line)
            computed, took = int(entry["cells_computed"]), float(entry["elapsed_s"])
        except (ValueError, KeyError, TypeError):
            continue
        if computed > 0:
            elapsed, cells = elapsed + took, cells + computed
    if cells:
        return elapsed / cells, f"this study's earlier invocations ({cells} cells)"
    return DEFAULT_SECONDS_PER_CELL, "a 100-value sweep of smollm2-135m (issue 19)"


def run_slots(cells: Sequence[Any]) -> int:
    """How many runs (run folders) computing ``cells`` takes, split as the grid splits them:
    per model and benchmark, each attack at most once per run."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for cell in _unique_keys(cells):
        groups.setdefault((cell.model.name, cell.benchmark.name), []).append(cell)
    return sum(len(_slots(group)) for group in groups.values())


def texts_to_score(cells: Sequence[Any], data: dict[tuple[Any, ...], list[Any]]) -> int:
    """Texts each model scores for ``cells`` (a pass per text and model on each benchmark;
    passes the cache already holds cost nothing)."""
    seen = {(c.model.model, _data_id(c.benchmark)) for c in cells}
    return sum(len(data[d]) for _, d in seen)
