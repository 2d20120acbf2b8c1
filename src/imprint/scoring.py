"""The scoring step of a run: attack set-up, log-prob passes and every other model request.

:func:`compute_scores` maps the attacks' log-prob needs to ``logprobs`` requests and hands attacks
that call models themselves a :class:`~imprint.requests.client.ModelRequests`; both go through the
one runner of :func:`model_requests`. :class:`WorkReport` counts the work per model role and
request kind for the manifest. Used by :mod:`imprint.run` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from imprint.attacks import Attack, RunContext
from imprint.attacks.base import ScoringInputs
from imprint.attacks.registry import ATTACKS
from imprint.data import Sample
from imprint.errors import ConfigError, ImprintError
from imprint.executors import Executor
from imprint.registry import BUILTIN
from imprint.requests import RequestCounts, RequestRunner, RequestStore
from imprint.requests.client import (
    FactoryFor,
    ModelRequests,
    load_local_model,
    local_transformers,
)
from imprint.signals.plan import run_plan


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
    cache: RequestStore,
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

    Every request goes through ``requests.runner`` (its store, executor and counts, which are
    ``work.requests`` when built by :func:`model_requests`); ``cache``, ``token_budget``,
    ``progress`` and ``executor`` are the runner's already and kept for callers that pass them.
    """
    texts = [s.text for s in samples]
    needs = [n for a in attacks for n in a.needs()]  # model-call attacks declare none
    signals = None
    if needs:
        signals, _ = run_plan(
            texts,
            needs,
            dict(backends),
            requests.runner.store,
            prefixes=prefixes,
            runner=requests.runner,
        )
    scores: dict[str, np.ndarray] = {}
    inputs = ScoringInputs(tuple(texts), signals=signals, requests=requests)
    for attack in attacks:
        # the one entry point (signals and requests), with any per-token scores beside it
        produced, tokens = _scored_by(attack, inputs)
        work.token_scores.update(tokens)
        for column, values in produced.items():
            if column in scores:
                raise ConfigError(f"two attacks write the score column {column!r}")
            scores[column] = _checked_scores(attack, column, values, len(texts))
    return scores


def _label(attack: Attack) -> str:
    """``attack 'x'``, with where it comes from when it is not built in (a plugin's package)."""
    origin = ATTACKS.origin(attack.name) if attack.name in ATTACKS else BUILTIN
    return f"attack {attack.name!r}" + ("" if origin == BUILTIN else f" ({origin})")


def _scored_by(
    attack: Attack, inputs: ScoringInputs
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """``attack.score_tokens(inputs)``; an error inside it says which attack raised it (a
    plugin's bare exception would otherwise stop the run with its text alone; a built-in
    attack's is a bug and keeps its traceback)."""
    try:
        return attack.score_tokens(inputs)
    except ImprintError as err:
        if repr(attack.name) in str(err):
            raise
        try:  # the same kind of error, now naming the attack
            named = type(err)(f"{_label(attack)}: {err}")
        except TypeError:  # an error class built from other arguments: keep it as it is
            raise err from None
        raise named from err
    except Exception as err:
        if _label(attack) == f"attack {attack.name!r}":  # built in: a bug, keep its traceback
            raise
        raise ImprintError(
            f"{_label(attack)} failed while scoring: {type(err).__name__}: {err}"
        ) from err


def _checked_scores(attack: Attack, column: str, values: Any, n_texts: int) -> np.ndarray:
    """One float score per text, or an error naming the attack: a wrong count would otherwise
    surface as an IndexError deep in the evaluation."""
    expected = f"expected one number per text, shape ({n_texts},)"
    try:
        raw = np.asarray(values)
    except ValueError as err:  # ragged: not one number per text
        raise ImprintError(
            f"{_label(attack)} returned ragged scores for column {column!r} ({err}); {expected}"
        ) from err
    if raw.dtype.kind not in "biuf":  # None or text would become NaN or fail later
        kinds = sorted({type(v).__name__ for v in raw.ravel()[:1000]})
        raise ImprintError(
            f"{_label(attack)} returned non-numeric scores for column {column!r} (entries of "
            f"type {', '.join(kinds)}); {expected}"
        )
    array = raw.astype(float)
    if array.shape != (n_texts,):
        raise ImprintError(
            f"{_label(attack)} returned scores of shape {array.shape} for column {column!r}; "
            f"{expected}"
        )
    return array


@dataclass
class WorkReport:
    """The model work of a run: counts per model role and request kind (log-prob passes are the
    ``logprobs`` kind), and where it ran (``executor``: per worker, and per role and kind)."""

    requests: RequestCounts = field(default_factory=RequestCounts)
    executor: dict[str, Any] = field(default_factory=dict)
    # per-token scores of token-level attacks (Attack.score_tokens), for token_scores.parquet
    token_scores: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        """Per model role and request kind: requests, cache_hits, executed, batches (and
        tokens for ``logprobs``): the manifest's ``requests``."""
        return self.requests.to_dict()


def model_requests(
    backends: dict[str, Any],
    cache: RequestStore,
    work: WorkReport,
    token_budget: int | None,
    progress: Any,
    executor: Executor | None = None,
    *,
    factory_for: FactoryFor | None = None,
) -> ModelRequests:
    """The request client of a run: every kind (log-prob passes too) through one runner over
    ``cache`` (the run's store), counted in ``work``. ``factory_for(role, spec)`` tells a Ray
    executor how a worker builds an auxiliary model the attacks load (default: a local Hugging
    Face model of that spec)."""
    runner = RequestRunner(
        cache,
        progress=progress,
        counts=work.requests,
        executor=executor,
        token_budget=token_budget,
    )
    return ModelRequests(
        backends,
        runner,
        local_models=local_transformers,
        loader=load_local_model,
        factory_for=factory_for,
    )


def write_token_scores(
    path: Any, samples: Sequence[Sample], token_scores: dict[str, list[dict[str, Any]]]
) -> None:
    """Per-token scores as one long table: a row per (sample, attack column, token) with
    ``id``, ``label``, ``column``, ``position`` (0-based among the scored tokens), ``token_id``,
    ``token`` (its text) and ``score``; a report joins it to scores.parquet by ``id``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, list[Any]] = {
        k: [] for k in ("id", "label", "column", "position", "token_id", "token", "score")
    }
    for column, per_text in token_scores.items():
        for sample, t in zip(samples, per_text, strict=True):
            n = len(t["scores"])
            rows["id"] += [sample.id] * n
            rows["label"] += [sample.label] * n
            rows["column"] += [column] * n
            rows["position"] += list(range(n))
            rows["token_id"] += [int(i) for i in t["ids"]]
            rows["token"] += [str(p) for p in t["pieces"]]
            rows["score"] += [float(v) for v in t["scores"]]
    pq.write_table(pa.table(rows), path)
