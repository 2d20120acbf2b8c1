"""The scoring step of a run: attack set-up, log-prob passes and every other model request.

:func:`compute_scores` runs the planner for the attacks' log-prob needs and hands attacks that call
models themselves a :class:`~imprint.requests.client.ModelRequests`; :class:`WorkReport` counts the
work per model role and request kind for the manifest. Used by :mod:`imprint.run` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from imprint.attacks import Attack, RunContext
from imprint.data import Sample
from imprint.errors import ConfigError
from imprint.executors import Executor
from imprint.requests import RequestCounts, RequestRunner, RequestStore
from imprint.requests.client import ModelRequests, load_local_model, local_transformers
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import PassCounts, PlanReport, run_plan


def prepare_attacks(
    attacks: Sequence[Attack], samples: list[Sample], run: RunContext, dropped: dict[str, int]
) -> tuple[list[Sample], list[Attack], dict[str, str]]:
    """Run every attack's set-up on the same samples; the shots they take leave the evaluation
    for every attack (so all are compared on the same samples) and are counted as drops. Returns
    the samples left, the attacks with their prepared state, and the named prefixes."""
    prefixes: dict[str, str] = {}
    removed: dict[str, str] = {}  # sample id -> reason
    prepared: list[Attack] = []
    for attack in attacks:
        prep = attack.prepare(samples, run)
        prepared.append(prep.attack or attack)
        for key, text in prep.prefixes.items():
            if prefixes.get(key, text) != text:
                raise ConfigError(f"two attacks define the prefix {key!r} differently")
            prefixes[key] = text
        for sample_id in prep.removed_ids:
            removed.setdefault(sample_id, prep.reason or f"used by attack {attack.name!r}")
    for reason in removed.values():
        dropped[reason] = dropped.get(reason, 0) + 1
    return [s for s in samples if s.id not in removed], prepared, prefixes


def compute_scores(
    attacks: Sequence[Attack],
    samples: Sequence[Sample],
    backends: dict[str, Any],
    cache: SignalCache,
    *,
    prefixes: dict[str, str],
    requests: ModelRequests,
    work: WorkReport,
    token_budget: int | None = None,
    progress: Any = None,
    executor: Executor | None = None,
) -> dict[str, np.ndarray]:
    """Score every sample with every attack; one forward pass per distinct (model, text, prefix),
    and every other model call a typed request answered once (see :mod:`imprint.requests`).
    ``work`` accumulates the counts of both."""
    texts = [s.text for s in samples]
    token_attacks = [a for a in attacks if not getattr(a, "needs_backend", False)]
    needs = [n for a in token_attacks for n in a.needs()]
    signals = None
    if needs:
        signals, report = run_plan(
            texts,
            needs,
            dict(backends),
            cache,
            prefixes=prefixes,
            token_budget=token_budget,
            progress=progress,
            executor=executor,
        )
        work.add_passes(report)
    scores: dict[str, np.ndarray] = {}
    for attack in attacks:
        if getattr(attack, "needs_backend", False):  # calls models itself, through requests
            produced = attack.score_with_requests(requests, texts)  # type: ignore[attr-defined]
        else:
            assert signals is not None  # token attacks declare needs
            produced = attack.score(signals)
        for column, values in produced.items():
            if column in scores:
                raise ConfigError(f"two attacks write the score column {column!r}")
            scores[column] = np.asarray(values, dtype=float)
    return scores


@dataclass
class WorkReport:
    """The model work of a run: log-prob passes (per model) and every other request kind."""

    plan: PlanReport = field(default_factory=PlanReport)
    requests: RequestCounts = field(default_factory=RequestCounts)
    executor: dict[str, Any] = field(default_factory=dict)  # where the work ran, per worker

    def add_passes(self, report: PlanReport) -> None:
        for name, counts in report.per_model.items():
            total = self.plan.per_model.setdefault(name, PassCounts())
            for key, value in vars(counts).items():
                setattr(total, key, getattr(total, key) + value)

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        """Per model role and request kind: unique requests, cache hits, executed."""
        out = self.requests.to_dict()
        for role, counts in self.plan.per_model.items():
            out.setdefault(role, {})["logprobs"] = {
                "requests": counts.requests,
                "cache_hits": counts.cache_hits,
                "executed": counts.scored,
                "batches": counts.batches,
            }
        return out


def model_requests(
    backends: dict[str, Any],
    cache: SignalCache,
    work: WorkReport,
    token_budget: int | None,
    progress: Any,
    executor: Executor | None = None,
) -> ModelRequests:
    """The request client attacks call: stored beside the signals, log-prob passes planned."""

    def logprobs(
        backend: Any, role: str, texts: Sequence[str], *, prefix: str | None = None
    ) -> list[Any]:
        need = Need(model=role, prefix="requested" if prefix else None)
        signals, report = run_plan(
            texts,
            [need],
            {role: backend},
            cache,
            prefixes={"requested": prefix} if prefix else None,
            token_budget=token_budget,
            progress=progress,
            executor=executor,
        )
        work.add_passes(report)
        return signals.get(need)

    return ModelRequests(
        backends,
        RequestRunner(
            RequestStore(cache.path), progress=progress, counts=work.requests, executor=executor
        ),
        local_models=local_transformers,
        logprobs=logprobs,
        loader=load_local_model,
    )
