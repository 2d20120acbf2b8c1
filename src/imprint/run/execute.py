"""One run, start to finish: resolve -> data -> models -> attacks -> scores -> evaluation -> report.

:func:`execute_run` resolves the config once (:func:`imprint.run.plan.resolve`) and hands the
plan to each stage in turn; the report stage writes the run folder.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from imprint.attacks import Attack, build_attacks
from imprint.backends.base import TOKENS, Backend
from imprint.data import Sample
from imprint.documents.run_hook import DocumentSignals, document_signals
from imprint.errors import DataError
from imprint.executors import Executor
from imprint.requests.client import ModelRequests
from imprint.run.config import RunConfig
from imprint.run.inputs import RunInputs, load_inputs
from imprint.run.manifest import describe_models, run_manifest, unmatched_message
from imprint.run.plan import RunPlan, load_backends, resolve, run_executor
from imprint.scoring import WorkReport, compute_scores, model_requests, prepare_attacks
from imprint.signals.cache import SignalCache

if TYPE_CHECKING:  # the report stage is imported when a run reaches it
    from imprint.evaluation.results import RunMetrics


@dataclass
class RunResult:
    out: Path
    samples: list[Sample]
    scores: dict[str, np.ndarray]
    metrics: RunMetrics  # the evaluation step's typed results; .to_dict() is metrics.json
    manifest: dict[str, Any]


@dataclass
class Scored:
    """What the scoring stage hands on: the samples evaluated, the attacks as prepared, their
    scores, the manifest's model entries, the work done and the document aggregators' signals."""

    samples: list[Sample]
    attacks: list[Attack]
    scores: dict[str, np.ndarray]
    models: dict[str, Any]
    work: WorkReport
    documents: DocumentSignals | None = None  # what document aggregators took (--unit document)


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
    from imprint.report import write_run

    started = time.time()
    plan = config if isinstance(config, RunPlan) else resolve(config)
    config = plan.config
    _check_folders(plan)
    inputs = load_inputs(plan)
    scored = score(plan, inputs, console, backends, progress, executor)
    metrics = evaluate_scores(scored.samples, scored.scores, config=config)
    found = tuple(RunWarning("data_defects", m) for m in inputs.defects.warnings(config.data))
    if inputs.references and inputs.references["unmatched_ids"]:
        found += (RunWarning("unmatched_reference_ids", unmatched_message(inputs.references)),)
    metrics = dataclasses.replace(metrics, warnings=metrics.warnings + found)
    manifest = run_manifest(plan, inputs, scored, started)
    if inputs.split is not None and scored.documents is not None:  # from the same scores
        from imprint.evaluation.documents import evaluate_documents

        documents = evaluate_documents(
            inputs.split, scored.samples, scored.scores, config=config, signals=scored.documents
        )
        metrics = dataclasses.replace(metrics, documents=documents)
    write_run(
        config.out,
        scored.samples,
        scored.scores,
        metrics,
        manifest,
        console=console,
        overwrite=config.overwrite,
    )
    return RunResult(config.out, scored.samples, scored.scores, metrics, manifest)


def _check_folders(plan: RunPlan) -> None:
    """A bad --out (or one that holds the run's own inputs) fails before any work."""
    from imprint.report.outdir import check_inputs_outside, check_out_dir, check_outside

    config = plan.config
    check_out_dir(config.out, overwrite=config.overwrite)
    check_outside(config.out, plan.cache_path, "--cache")
    inputs = [("--model", config.model), ("--data", config.data),
              ("--references", config.references or "")]  # fmt: skip
    inputs += [(f"--ref {name}", spec) for name, spec in config.refs]
    inputs += [(f"--pool {name}", spec) for name, spec in config.pools.items()]
    check_inputs_outside(config.out, inputs, why="the run replaces its --out folder whole")


def score(
    plan: RunPlan,
    inputs: RunInputs,
    console: Any,
    given: dict[str, Any] | None = None,
    shared_progress: Any = None,
    shared_executor: Executor | None = None,
) -> Scored:
    """Load the models, set the attacks up and score; every model and store is closed after
    (``given`` backends, ``shared_progress`` and ``shared_executor`` belong to the caller and
    stay open)."""
    from imprint.report import ProgressFactory

    config = plan.config
    cache = SignalCache(plan.cache_path)
    progress = (
        shared_progress
        if shared_progress is not None
        else ProgressFactory(console, enabled=config.progress)
    )
    backends: dict[str, Backend] = {}
    work = WorkReport()
    requests: ModelRequests | None = None
    executor = shared_executor if shared_executor is not None else run_executor(plan)
    try:
        backends = given if given is not None else load_backends(plan, cache)
        requests = model_requests(
            backends, cache, work, config.token_budget, progress, executor=executor
        )
        samples, attacks, prefixes = _set_up_attacks(plan, backends["target"], inputs, requests)
        scores = compute_scores(
            attacks,
            samples,
            backends,
            cache,
            prefixes=prefixes,
            requests=requests,
            work=work,
            token_budget=config.token_budget,
            progress=progress,
            executor=executor,
        )
        documents = None
        if inputs.split is not None:  # the aggregators' signals, while the store is open
            texts = [s.text for s in samples]
            documents = document_signals(attacks, requests, texts)
        work.executor = {"kind": executor.kind, **executor.stats.to_dict()}
        return Scored(samples, attacks, scores, describe_models(plan, backends), work, documents)
    finally:
        if shared_executor is None:
            executor.close()
        if shared_progress is None:
            progress.close()
        if requests is not None:
            requests.runner.store.close()
        for backend in backends.values() if given is None else ():
            backend.close()  # an API client's connections
        cache.close()


def _set_up_attacks(
    plan: RunPlan, target: Backend, inputs: RunInputs, requests: ModelRequests
) -> tuple[list[Sample], list[Attack], dict[str, str]]:
    """Build the attacks for this target, check it can serve them (before any scoring), and run
    their preparation (shots leave the evaluation)."""
    run = plan.attack_context(
        tokenize=target.encode if target.supports(TOKENS) else None,  # an API has none
        target_fingerprint=target.fingerprint,
        vocab_size=target.vocab_size,  # DC-PDD's V; None for an API target
        pools=inputs.pools,
        requests=requests,
    )
    attacks = build_attacks(plan.config.attacks, run, params=plan.params)
    for attack in attacks:
        attack.check_backend(target)  # before any scoring: can this target serve it
    samples, attacks, prefixes = prepare_attacks(attacks, inputs.samples, run, inputs.dropped)
    if len({s.label for s in samples}) < 2:
        raise DataError(f"{plan.config.data}: after preparation only one class is left to evaluate")
    return samples, attacks, prefixes


__all__ = ["RunResult", "Scored", "execute_run", "score"]
