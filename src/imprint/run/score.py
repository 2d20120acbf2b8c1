"""The scoring stage of a run: models loaded, attacks built and prepared, every score computed
(log-prob passes and every other model request through the run's request client)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from imprint.attacks import HELDOUT_KEY, Attack, RunContext
from imprint.backends.ambiguous_tokens import drop_unscorable
from imprint.backends.base import TOKENS, Backend
from imprint.backends.registry import BackendChoice
from imprint.data import Sample
from imprint.documents.run_hook import DocumentSignals, document_signals
from imprint.errors import DataError, RunInterrupted
from imprint.executors import Executor
from imprint.requests.client import ModelRequests
from imprint.run.estimate import TimedExecutor, WorkPlan, plan_work, record_rates
from imprint.run.inputs import RunInputs
from imprint.run.plan import RunPlan, load_backends, run_executor
from imprint.scoring import WorkReport, compute_scores, model_requests, prepare_attacks
from imprint.signals.cache import SignalCache


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
    plan: WorkPlan | None = None  # the plan line's figures (texts, passes, estimate)
    scoring_s: float = 0.0  # seconds the scores took
    # (kind, message) warnings found while scoring, e.g. a reference that is the target itself
    warnings: tuple[tuple[str, str], ...] = ()
    # seconds each (role, request kind) took, preparation included (the end line says them)
    call_seconds: dict[tuple[str, str], float] = field(default_factory=dict)


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
    work_plan: WorkPlan | None = None
    requests: ModelRequests | None = None
    executor = shared_executor if shared_executor is not None else run_executor(plan)
    timed = TimedExecutor(executor)  # seconds per (role, kind), for the end line and later plans
    try:
        backends = given if given is not None else load_backends(plan, cache)
        _check_kinds((("reference_is_target", ""), ("attacks_left_out", "")))  # kinds declared
        requests = model_requests(
            backends, cache, work, config.token_budget, progress, executor=timed
        )
        run_context = _attack_context(plan, backends["target"], inputs, requests)
        samples, attacks, prefixes = _set_up_attacks(plan, backends["target"], run_context, inputs)
        work_plan = plan_work(attacks, samples, backends, prefixes, cache_path=plan.cache_path,
                              prepared=work.to_dict(), store=requests.runner.store)  # fmt: skip
        from imprint.report.terminal import status

        for line in work_plan.lines():  # --quiet: none; jsonl: info events
            status(console, line, stage="plan")
        if work_plan.tokens_per_s:  # batches of bounded seconds: an interrupt loses little
            requests.runner.rates[backends["target"].fingerprint] = work_plan.tokens_per_s
        started = time.perf_counter()
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
            executor=timed,
        )
        found = reference_is_target_warnings(backends, attacks, scores)
        found += _left_out(plan, run_context, attacks)
        documents = None
        if inputs.split is not None:  # the aggregators' signals, while the store is open
            texts = [s.text for s in samples]
            documents = document_signals(attacks, requests, texts)
        elapsed = time.perf_counter() - started
        record_rates(plan.cache_path, backends["target"], work.to_dict(), timed.seconds)
        work.executor = {"kind": executor.kind, **executor.stats.to_dict()}
        models = describe_models(plan, backends)
        return Scored(samples, attacks, scores, models, work, documents, work_plan, elapsed,
                      warnings=found, call_seconds=dict(timed.seconds))  # fmt: skip
    except KeyboardInterrupt as err:  # every finished batch is stored: say how much
        raise RunInterrupted(kept_line(work_plan, work.to_dict())) from err
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


def kept_line(plan: WorkPlan | None, counts: dict[str, dict[str, dict[str, int]]]) -> str:
    """``interrupted: N requests kept in the store; rerun the same command to resume (M of T
    left)``: of the plan's distinct requests, those the store held before plus those this run
    executed (each stored with its batch)."""
    resume = "rerun the same command to resume"
    if plan is None or not plan.calls:
        return f"interrupted: 0 requests kept in the store (before the model work); {resume}"
    kept = total = 0
    for call in plan.calls:
        done = counts.get(call.role, {}).get(call.kind, {}).get("executed", 0)
        kept += min(call.count, (call.stored or 0) + done)
        total += call.count
    return (
        f"interrupted: {kept:,} requests kept in the store; {resume} "
        f"({total - kept:,} of {total:,} left)"
    )


def _attack_context(
    plan: RunPlan, target: Backend, inputs: RunInputs, requests: ModelRequests
) -> RunContext:
    """The attacks' view of this run, with what only the loaded target knows."""
    return plan.attack_context(
        tokenize=target.encode if target.supports(TOKENS) else None,  # an API has none
        target_fingerprint=target.fingerprint,
        vocab_size=target.vocab_size,  # DC-PDD's V; None for an API target
        # the held-out shots: the ReCaLL family takes its shots from them (imprint.attacks.shots)
        pools={**inputs.pools, **({HELDOUT_KEY: inputs.shots.shots} if inputs.shots else {})},
        requests=requests,
    )


def _set_up_attacks(
    plan: RunPlan, target: Backend, run: RunContext, inputs: RunInputs
) -> tuple[list[Sample], list[Attack], dict[str, str]]:
    """The plan's attacks for this run (``all`` now knows the held-out texts), checked against
    the target (before any scoring) and prepared (shots leave the evaluation)."""
    attacks = plan.attacks.in_run(run)
    for attack in attacks:
        attack.check_backend(target)  # before any scoring: can this target serve it
    # texts the target cannot score (a served model's ambiguous tokens): left out, counted
    kept = drop_unscorable(target, inputs.samples, inputs.dropped)
    samples, attacks, prefixes = prepare_attacks(attacks, kept, run, inputs.dropped)
    if len({s.label for s in samples}) < 2:
        raise DataError(f"{plan.config.data}: after preparation only one class is left to evaluate")
    return samples, attacks, prefixes


def _check_kinds(found: tuple[tuple[str, str], ...]) -> None:
    from imprint.evaluation.results import WARNING_KINDS

    for kind, _ in found:
        if kind not in WARNING_KINDS:
            raise AssertionError(f"run warning of unknown kind {kind!r}")  # a kind to declare


def _left_out(plan: RunPlan, run: RunContext, attacks: list[Attack]) -> tuple[tuple[str, str], ...]:
    """An ``attacks_left_out`` warning naming each attack that ``all`` skipped, and why."""
    if "all" not in plan.config.attacks:
        return ()
    from imprint.attacks import left_out_of_all

    ran = {a.name for a in attacks}
    skipped = [(n, why) for n, why in left_out_of_all(run) if n not in ran]
    if not skipped:
        return ()
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped:
        by_reason.setdefault(why, []).append(name)
    said = "; ".join(f"{', '.join(names)}: {why}" for why, names in by_reason.items())
    return (("attacks_left_out", f"'all' left out {len(skipped)} attack(s): {said}"),)


def identical_references(backends: dict[str, Backend]) -> tuple[str, ...]:
    """The reference roles whose content fingerprint equals the target's."""
    target = backends.get("target")
    if target is None:
        return ()
    return tuple(
        role
        for role, backend in backends.items()
        if role != "target" and backend.fingerprint == target.fingerprint
    )


def reference_is_target_warnings(
    backends: dict[str, Any], attacks: list[Attack], scores: dict[str, np.ndarray]
) -> tuple[tuple[str, str], ...]:
    """A ``reference_is_target`` warning for each reference model that is the target itself,
    naming, from the scores, the columns reading it that are constant (the target against
    itself: AUC 0.500 by construction) and those that still vary (rmia_offline: its offline
    scaling ((1 + a) Pr_ref + (1 - a)) / 2 is not Pr_target, so the ratio follows the target's
    own probability)."""
    out = []
    for role in identical_references(backends):
        columns = [c for a in attacks if any(n.model == role for n in a.needs())
                   for c in a.columns() if c in scores]  # fmt: skip
        constant = [c for c in columns if _constant(scores[c])]
        varying = [c for c in columns if c not in constant]
        parts = [f"reference model {role!r} is the target itself (same content fingerprint "
                 f"{backends['target'].fingerprint[:12]})"]  # fmt: skip
        if constant:
            parts.append("the target scored against itself, constant, AUC 0.5 by construction: "
                         + ", ".join(constant))  # fmt: skip
        if varying:
            parts.append(
                "still vary, because they combine the reference with other terms (rmia_offline's "
                "offline scaling a, population texts, a fitted model) and so rank texts by the "
                "target's own probabilities, not by what a different model adds: "
                + ", ".join(varying)
            )
        parts.append("pass a different --ref model (or --references set)")
        out.append(("reference_is_target", "; ".join(parts)))
    return tuple(out)


def _constant(values: np.ndarray) -> bool:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    return finite.size == 0 or bool(np.ptp(finite) == 0)


def describe_models(plan: RunPlan, backends: dict[str, Backend]) -> dict[str, Any]:
    """Each loaded model's manifest entry, by role."""
    return {role: describe(backend, plan.choices.get(role)) for role, backend in backends.items()}


def describe(backend: Backend, choice: BackendChoice | None = None) -> dict[str, Any]:
    """A backend's manifest entry: its provider and typed options, what it loaded (an HF
    backend adds its start token and window); text backends add their query counters."""
    entry = backend.describe()
    if choice is not None:
        entry = {"model": choice.spec, **choice.describe(), **entry}
    if usage := backend.usage():
        entry["usage"] = usage
    return entry
