"""One run, start to finish: resolve -> data -> models -> attacks -> scores -> evaluation -> report.

:func:`execute_run` resolves the config once (:func:`imprint.run.plan.resolve`) and hands the
plan to each stage in turn; the report stage writes the run folder.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from imprint.data import Sample
from imprint.executors import Executor
from imprint.run.config import RunConfig
from imprint.run.inputs import load_inputs
from imprint.run.manifest import run_manifest, unmatched_message
from imprint.run.plan import RunPlan, resolve
from imprint.run.score import score

if TYPE_CHECKING:  # the report stage is imported when a run reaches it
    from imprint.evaluation.results import RunMetrics


@dataclass
class RunResult:
    out: Path
    samples: list[Sample]
    scores: dict[str, np.ndarray]
    metrics: RunMetrics  # the evaluation step's typed results; .to_dict() is metrics.json
    manifest: dict[str, Any]


def execute_run(
    config: RunConfig | RunPlan,
    *,
    console: Any = None,
    backends: dict[str, Any] | None = None,
    progress: Any = None,
    executor: Executor | None = None,
) -> RunResult:
    """Run the whole pipeline and write the run folder (see :mod:`imprint.report`).

    ``config`` may be a plan already resolved. ``backends`` (role -> loaded backend, as
    :func:`~imprint.run.plan.load_backends` makes them), ``progress`` (a progress factory) and
    ``executor`` (as :func:`~imprint.run.plan.run_executor` makes it) are a caller's own, used and
    left open: an experiment grid loads each model once and runs many cells on it, on one set of
    Ray workers, under one progress display.
    """
    from imprint.evaluation import RunWarning, evaluate_scores
    from imprint.evaluation.dropped import dropped_samples
    from imprint.report import write_run

    started = time.time()
    plan = config if isinstance(config, RunPlan) else resolve(config)
    if plan.config.out is None:  # as the CLI without --out: a new folder, runs/latest to it
        return _in_default_folder(plan, console, backends, progress, executor)
    config = plan.config
    out = config.out
    assert out is not None  # given, or made above
    if _check_folders(plan):
        from imprint.report.terminal import status

        status(console, f"--out {out} holds an earlier run of this same configuration: "
               "it is rewritten, every model pass it made answered by the store")  # fmt: skip
    from imprint.report.terminal import stage

    with stage("data"):  # jsonl: stage_start and stage_end events
        inputs = load_inputs(plan)
    scored = score(plan, inputs, console, backends, progress, executor)
    with stage("evaluate"):
        metrics = evaluate_scores(scored.samples, scored.scores, config=config)
    found = tuple(RunWarning("data_defects", m) for m in inputs.defects.warnings(config.data))
    for kind, message in scored.warnings:  # in metrics.json, the report and the results
        if console is None:  # no results are printed: a caller of the API hears it this way
            warnings.warn(message, UserWarning, stacklevel=2)
        found += (RunWarning(kind, message),)  # type: ignore[arg-type]
    if inputs.references and inputs.references["unmatched_ids"]:
        found += (RunWarning("unmatched_reference_ids", unmatched_message(inputs.references)),)
    metrics = dataclasses.replace(metrics, warnings=metrics.warnings + found)
    manifest = run_manifest(plan, inputs, scored, started)
    metrics = dataclasses.replace(metrics, samples=dropped_samples(manifest))  # metrics.json's
    if inputs.split is not None and scored.documents is not None:  # from the same scores
        from imprint.evaluation.documents import evaluate_documents

        documents = evaluate_documents(
            inputs.split, scored.samples, scored.scores, config=config, signals=scored.documents
        )
        metrics = dataclasses.replace(metrics, documents=documents)
    with stage("report"):
        write_run(
            out,
            scored.samples,
            scored.scores,
            metrics,
            manifest,
            console=console,
            overwrite=config.overwrite,
            extra=_token_scores(scored),  # staged with the rest: published whole or not at all
        )
    if scored.plan is not None:
        from imprint.report.terminal import status
        from imprint.run.estimate import duration, ran_line

        said = scored.plan.estimate_s
        plan_said = (
            ""
            if said is None
            else f" (the plan said about {duration(said)})"
            if scored.plan.estimated_all
            else f" (the plan said about {duration(said)} for what it estimated)"
        )
        status(
            console,
            f"done: {duration(time.time() - started)} in all, the scores "
            f"{duration(scored.scoring_s)}{plan_said}; "
            f"{ran_line(scored.plan, scored.work.to_dict(), scored.call_seconds)}",
            stage="done",
        )
    return RunResult(out, scored.samples, scored.scores, metrics, manifest)


def _in_default_folder(
    plan: RunPlan, console: Any, backends: Any, progress: Any, executor: Any
) -> RunResult:
    """:func:`execute_run` of a config given no ``out``: into a new ``runs/<time>-<model>-<data>``
    reserved now (released if the run fails), with ``runs/latest`` pointing to it after."""
    from imprint.outdir import default_run_dir, link_latest, release_run_dir

    out = default_run_dir(plan.config.model, plan.config.data)
    config = dataclasses.replace(plan.config, out=out)
    try:
        result = execute_run(
            dataclasses.replace(plan, config=config),
            console=console,
            backends=backends,
            progress=progress,
            executor=executor,
        )
    except BaseException:
        release_run_dir(out)
        raise
    link_latest(result.out)
    return result


def _token_scores(scored: Any) -> Any:
    """A writer of token-level attacks' per-token scores (informia) into the staged run
    folder, or None when no attack made any."""
    if not scored.work.token_scores:
        return None
    from imprint.scoring import write_token_scores

    def write(folder: Path) -> None:
        write_token_scores(
            folder / "token_scores.parquet", scored.samples, scored.work.token_scores
        )

    return write


def _check_folders(plan: RunPlan) -> bool:
    """A bad --out (or one that holds the run's own inputs) fails before any work. True when
    --out holds an earlier run of the same configuration, which this run rewrites."""
    from imprint.outdir import (
        check_inputs_outside,
        check_out_dir,
        check_outside,
        config_differences,
    )
    from imprint.report.writer import to_jsonable
    from imprint.requests.store import check_store_path

    config = plan.config
    out = config.out
    assert out is not None  # execute_run gave it one
    as_json = to_jsonable(config)
    check_out_dir(out, overwrite=config.overwrite, config=as_json)
    check_outside(out, plan.cache_path, "--cache")
    check_store_path(plan.cache_path)  # a read-only --cache or IMPRINT_CACHE_DIR
    inputs = [("--model", config.model), ("--data", config.data),
              ("--references", config.references or "")]  # fmt: skip
    inputs += [(f"--ref {name}", spec) for name, spec in config.refs]
    inputs += [(f"--pool {name}", spec) for name, spec in config.pools.items()]
    check_inputs_outside(out, inputs, why="the run replaces its --out folder whole")
    return not config.overwrite and config_differences(out, as_json) == []


__all__ = ["RunResult", "execute_run"]
