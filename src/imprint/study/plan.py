"""``imprint experiment --plan``: what :func:`~imprint.study.grid.run_grid` would do now, found
by the run's own checks (:func:`~imprint.study.grid.prepare_grid`): a grid the run would refuse
is refused here too. Lists how many cells there are, which are stored already, how many runs
(each a full run folder) the missing ones need, and what that costs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from imprint.study.cells import CellStore
from imprint.study.grid import Orchestrator, grid_models, prepare_grid, run_slots
from imprint.study.spec import StudySpec

__all__ = ["GridPlan", "plan_grid", "seconds_per_cell"]

#: seconds per computed cell when the study has no earlier invocation to time it by: a
#: 100-value sweep of smollm2-135m took 5 min 33 s (measured in issue 19), each cell
#: writing a run folder with its HTML report and plots
DEFAULT_SECONDS_PER_CELL = 3.3


@dataclass(frozen=True)
class GridPlan:
    """Every grid place ``(model, benchmark, row, done)`` (blind cells first, model ``""``),
    the distinct cells still to compute, those stored, and the runs the missing ones need.
    Game snapshots are not counted: they exist only once their games are built."""

    spec: StudySpec
    places: tuple[tuple[str, str, str, bool], ...]
    to_compute: int
    stored: int
    runs: int

    def by_column(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(model, benchmark) -> (cells stored, cells), in grid order."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for model, bench, _, done in self.places:
            have, total = out.get((model, bench), (0, 0))
            out[(model, bench)] = (have + done, total + 1)
        return out


def plan_grid(spec: StudySpec, orchestrator: Orchestrator) -> GridPlan:
    """Check ``spec`` as a run does before its first model loads, and find the stored cells;
    compute and write nothing."""
    store = CellStore(spec.out / "cells")
    blind, cells = prepare_grid(spec, grid_models(spec), orchestrator)
    keys = [*blind, *(c.key for c in cells)]
    stored = {key for key in dict.fromkeys(keys) if store.get(key) is not None}
    places = [
        ("", bench.name, "blind baseline", key in stored) for key, (bench, _, _) in blind.items()
    ]
    places += [(c.model.name, c.benchmark.name, c.variant.label, c.key in stored) for c in cells]
    missing = [c for c in cells if c.key not in stored]
    to_compute = len({c.key for c in missing}) + sum(k not in stored for k in blind)
    return GridPlan(spec, tuple(places), to_compute, len(stored), run_slots(missing))


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
            if int(entry["cells_computed"]) > 0:
                elapsed, cells = (
                    elapsed + float(entry["elapsed_s"]),
                    cells + int(entry["cells_computed"]),
                )
        except (ValueError, KeyError, TypeError):
            continue
    if cells:
        return elapsed / cells, f"this study's earlier invocations ({cells} cells)"
    return DEFAULT_SECONDS_PER_CELL, "a 100-value sweep of smollm2-135m (issue 19)"
