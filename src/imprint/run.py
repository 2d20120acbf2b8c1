"""One run, start to finish: data -> plan -> passes -> signals -> attacks -> metrics -> report."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import imprint.game  # noqa: F401  (registers the game:DIR model and data schemes)
from imprint.attacks import Attack, RunContext, build_attacks
from imprint.attacks.base import hyperparameters
from imprint.attacks.params import check_params
from imprint.backends.base import LOGPROBS, TOKEN_LOGPROBS
from imprint.backends.models import cache_dir
from imprint.backends.registry import (
    BackendChoice,
    LoadContext,
    available_backends,
    choose_backend,
    provider_for,
)
from imprint.data import LoadedData, Sample, apply_transforms, data_defects, resolve_data
from imprint.data.pools import load_shot_pool
from imprint.documents.run_hook import DocumentOptions, split_for_run
from imprint.errors import ConfigError, DataError
from imprint.executors import BackendFactory, Executor, ExecutorConfig, make_executor
from imprint.requests.client import ModelRequests
from imprint.scoring import WorkReport, compute_scores, model_requests, prepare_attacks
from imprint.signals.cache import SignalCache
from imprint.training_manifest import ReferenceSet, check_reference_ids, load_reference_set

if TYPE_CHECKING:  # the report stage is imported when a run reaches it
    from imprint.report.results import RunMetrics


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on; written whole into the manifest."""

    model: str
    data: str
    out: Path
    attacks: tuple[str, ...] = ("all",)
    refs: tuple[tuple[str, str], ...] = ()  # (name, model spec)
    # reference models with known training data (LiRA, RMIA): a game folder built with
    # --reference-models K, or a training manifest (imprint.training_manifest)
    references: str | None = None
    # accept --references ids that match no sample of the run (counted in manifest and report)
    allow_unmatched_ids: bool = False
    # the target backend's own options (--model-arg KEY=VALUE), typed by its provider; see
    # imprint.backends.registry. --device, --dtype, --max-length, --api-* are shorthands for them
    model_args: dict[str, Any] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    pools: dict[str, str] = field(default_factory=dict)  # pool name -> data spec
    text_field: str | None = None
    label_field: str | None = None
    truncate_words: int | None = None
    min_words: int | None = None
    n_per_label: int | None = None
    dedupe: bool = True
    breakdown: str | None = None  # a meta field to break metrics down by
    seed: int = 0
    n_bootstrap: int = 1000
    device: str = "auto"
    dtype: str = "auto"
    max_length: int | None = None
    # token every text is scored after: auto (the model's document boundary), bos, none, or a
    # literal token; see imprint.backends.start_token
    start_token: str = "auto"
    token_budget: int | None = None  # None = auto: 4,096 on CPU, from free memory on CUDA
    cache: Path | None = None  # default: <cache_dir>/signals.sqlite
    blind: bool = True
    on_bad: str = "raise"  # a bad data row: "raise" (file and line named) or "drop" (counted)
    progress: bool = True
    # --unit document: documents split into sequences, scored, aggregated (imprint.documents)
    documents: DocumentOptions | None = None
    # where model work runs: this process, or Ray actors (--executor ray --address --workers)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    # a text-only target: an OpenAI-compatible API at api_base serving ``model`` (black-box
    # attacks only). The key is read from the environment variable api_key_env, never stored.
    api_base: str | None = None
    api_mode: str = "completions"
    api_key_env: str | None = "OPENAI_API_KEY"
    api_concurrency: int = 8
    api_top_k: int | None = None  # sent only when set (vLLM / llama.cpp servers accept it)
    api_timeout: float = 60.0  # seconds per request attempt
    api_max_retries: int = 6  # per request; the first request to exhaust them stops the run
    overwrite: bool = False  # replace an existing folder at ``out`` that is not an imprint run

    def __post_init__(self) -> None:
        # typed now (text from --param included), so a bad value fails before data or models load
        object.__setattr__(self, "params", check_params(self.params))
        if self.on_bad not in ("raise", "drop"):
            raise ConfigError(f"--on-bad must be raise or drop, not {self.on_bad!r}")
        names = [n for n, _ in model_refs(self)]
        if "target" in names or len(set(names)) != len(names):
            raise ConfigError(
                f"reference names must be unique and not 'target': {names} (--ref names and "
                "the --references manifest's model names share one namespace)"
            )
        if self.n_bootstrap < 1:
            raise ConfigError(f"n_bootstrap must be >= 1, got {self.n_bootstrap}")
        self._check_api_options()
        # providers and their options resolved now: a bad --model-arg or a missing extra fails
        # before data or models load
        target = backend_choices(self)["target"]
        object.__setattr__(self, "model_args", dict(target.args))

    def _check_api_options(self) -> None:
        from imprint.backends.http_checks import check_api_base

        if self.api_base is not None:  # no credentials or query: the URL goes in the manifest
            check_api_base(self.api_base)
        if not self.api_timeout > 0 or self.api_max_retries < 0:
            raise ConfigError(
                f"api_timeout must be > 0 seconds and api_max_retries >= 0; got "
                f"{self.api_timeout!r} and {self.api_max_retries!r}"
            )
        defaults = (self.api_mode, self.api_top_k, self.api_timeout, self.api_max_retries)
        if self.api_base is None and defaults != ("completions", None, 60.0, 6):
            raise ConfigError(
                "api_mode, api_top_k, api_timeout and api_max_retries apply to an API target: "
                "add --api-base URL"
            )

    @property
    def target_access(self) -> str:
        """gray-box when the target's provider gives per-token log-probs, else black-box."""
        provider, _ = provider_for(self.model, api_base=self.api_base)
        if LOGPROBS in provider.capabilities:
            return "gray-box"
        return "token-logprobs" if TOKEN_LOGPROBS in provider.capabilities else "black-box"


@dataclass
class RunResult:
    out: Path
    samples: list[Sample]
    scores: dict[str, np.ndarray]
    metrics: RunMetrics  # the evaluation step's typed results; .to_dict() is metrics.json
    manifest: dict[str, Any]


def load_samples(config: RunConfig) -> tuple[LoadedData, list[Sample], dict[str, int]]:
    """Load the data spec and apply the configured transforms; drops are counted."""
    loaded = resolve_data(
        config.data,
        text_field=config.text_field,
        label_field=config.label_field,
        on_bad=config.on_bad,
    )
    samples, dropped = apply_transforms(
        loaded.samples,
        truncate=config.truncate_words,
        min_words=config.min_words,
        dedupe=config.dedupe,
        n_per_label=config.n_per_label,
        seed=config.seed,
    )
    return loaded, list(samples), {**loaded.dropped, **dropped}


def check_breakdown(field: str | None, samples: list[Sample]) -> None:
    """Refuse a ``--breakdown`` field that no sample has: its table would be one "(missing)"
    column, most likely from a typo. Raises :class:`ConfigError` naming the data's fields."""
    if not field or any(field in s.meta for s in samples):  # "" means no breakdown
        return
    fields = sorted({str(k) for s in samples for k in s.meta})
    has = f"the data's other fields are {fields}" if fields else "the data has no other fields"
    raise ConfigError(
        f"--breakdown {field!r}: no sample has a field {field!r} ({has}; text and label are not "
        "breakdown fields). Pass one of those fields, or drop --breakdown"
    )


def backend_choices(config: RunConfig) -> dict[str, BackendChoice]:
    """The target's and the reference models' providers with typed options (nothing loaded).

    ``--model-arg`` applies to the target; the shorthand flags (``--device`` ...) to every model
    whose provider takes them. A shorthand no model takes is refused rather than ignored.
    """
    settings = _changed_settings(config)
    choices = {
        "target": choose_backend(
            config.model, api_base=config.api_base, args=config.model_args, settings=settings
        )
    }
    for name, spec in model_refs(config):
        choice = choose_backend(spec, settings=settings)
        if LOGPROBS not in choice.provider.capabilities:
            raise ConfigError(
                f"reference model {name}={spec!r} is served by {choice.provider.name!r}, which "
                "gives no log-probabilities; reference attacks need a local model (an alias, a "
                "folder, gguf:PATH or a hub id)"
            )
        choices[name] = choice
    used = set().union(*(c.settings_used for c in choices.values()))
    for setting in sorted(set(settings) - used):
        provider = choices["target"].provider
        raise ConfigError(
            f"--{setting.replace('_', '-')} {settings[setting]!r} has no effect: the target is "
            f"served by {provider.name!r}, whose options are "
            f"{', '.join(f.name for f in dataclasses.fields(provider.options))} "
            "(set them with --model-arg KEY=VALUE); drop the flag"
        )
    return choices


def reference_set(config: RunConfig) -> ReferenceSet | None:
    """The ``--references`` models with their training data, or None (read on each call: a
    small file, and nothing is cached across runs)."""
    return load_reference_set(config.references) if config.references else None


def model_refs(config: RunConfig) -> tuple[tuple[str, str], ...]:
    """(name, spec) of every model besides the target: --ref models, then --references ones."""
    refset = reference_set(config)
    extra = tuple((m.name, m.spec) for m in refset.models) if refset else ()
    return (*config.refs, *extra)


def _changed_settings(config: RunConfig) -> dict[str, Any]:
    """The run settings providers read (RunConfig fields) whose value is not the default."""
    names = {s for p in available_backends().values() for s in p.settings.values()}
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.name in names}
    return {n: getattr(config, n) for n, d in defaults.items() if getattr(config, n) != d}


def load_backends(config: RunConfig, cache: SignalCache | None = None) -> dict[str, Any]:
    """The target and reference backends, each built by its provider in the registry; an API
    target answers from ``cache`` when it can."""
    backends: dict[str, Any] = {}
    for name, choice in backend_choices(config).items():
        context = LoadContext(
            name=name, seed=config.seed, token_budget=config.token_budget, cache=cache
        )
        backends[name] = choice.load(context)
    return backends


def run_executor(config: RunConfig) -> Executor:
    """The run's executor; a Ray worker builds its replica of each model from the same provider
    choice and options as :func:`load_backends` (never a pickled model)."""
    factories = {
        name: BackendFactory(
            choice,
            LoadContext(name=name, seed=config.seed, token_budget=config.token_budget),
            imports=("imprint.game",),  # registers game:DIR in the worker
        )
        for name, choice in backend_choices(config).items()
    }
    return make_executor(config.executor, factories)


def execute_run(
    config: RunConfig,
    *,
    console: Any = None,
    backends: dict[str, Any] | None = None,
    progress: Any = None,
    executor: Executor | None = None,
) -> RunResult:
    """Run the whole pipeline and write the run folder (see :mod:`imprint.report`).

    ``backends`` (role -> loaded backend, as :func:`load_backends` makes them), ``progress``
    (a :class:`~imprint.report.ProgressFactory`) and ``executor`` (as :func:`run_executor`
    makes it) are a caller's own, used and left open: an experiment grid loads each model once
    and runs many cells on it, on one set of Ray workers, under one progress display.
    """
    from imprint.report import evaluate_scores, write_run
    from imprint.report.outdir import check_inputs_outside, check_out_dir, check_outside
    from imprint.report.results import RunWarning

    started = time.time()
    check_out_dir(config.out, overwrite=config.overwrite)  # a bad --out fails before any work
    check_outside(config.out, config.cache or cache_dir() / "signals.sqlite", "--cache")
    inputs = [("--model", config.model), ("--data", config.data), ("--references",
              config.references or "")]  # fmt: skip
    inputs += [(f"--ref {name}", spec) for name, spec in config.refs]
    inputs += [(f"--pool {name}", spec) for name, spec in config.pools.items()]
    check_inputs_outside(config.out, inputs, why="the run replaces its --out folder whole")
    loaded, samples, dropped = load_samples(config)
    defects = data_defects(config.data, loaded)  # the set as published: manifest and warnings
    samples, split = split_for_run(config.documents, samples, dropped)
    check_breakdown(config.breakdown, samples)
    pools = {
        name: load_shot_pool(
            name, spec, text_field=config.text_field, label_field=config.label_field
        )
        for name, spec in config.pools.items()
    }
    references = _check_references(config, loaded.samples, samples)
    _check_attacks(config)  # before loading any model: errors here cost nothing
    scored = _score(config, samples, pools, dropped, console, backends, progress, executor)
    metrics = evaluate_scores(scored.samples, scored.scores, config=config)
    found = tuple(RunWarning("data_defects", m) for m in defects.warnings(config.data))
    if references and references["unmatched_ids"]:
        found += (RunWarning("unmatched_reference_ids", _unmatched_message(references)),)
    metrics = dataclasses.replace(metrics, warnings=metrics.warnings + found)
    manifest = _manifest(config, loaded, scored, dropped, defects.to_dict(), started)
    if references is not None:
        manifest["references"] = references
    if split is not None:  # document-level figures from the same sequence scores
        from imprint.report.documents import evaluate_documents

        documents = evaluate_documents(
            split, scored.samples, scored.scores, config=config, manifest=manifest
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


def _check_references(
    config: RunConfig, loaded: Sequence[Sample], samples: Sequence[Sample]
) -> dict[str, Any] | None:
    """The --references manifest's record (see :func:`check_reference_ids`); ids that match no
    sample, loaded or split, are refused before any model work unless --allow-unmatched-ids."""
    refset = reference_set(config)
    if refset is None:
        return None
    ids = [s.id for s in loaded] + [s.id for s in samples]
    return check_reference_ids(refset, ids, allow=config.allow_unmatched_ids)


def _unmatched_message(record: dict[str, Any]) -> str:
    shown = ", ".join(record["unmatched_examples"])
    more = " ..." if record["unmatched_ids"] > len(record["unmatched_examples"]) else ""
    return (
        f"{record['unmatched_ids']} sample id(s) of the training manifest {record['source']} "
        f"match no sample of this run ({shown}{more}); accepted by --allow-unmatched-ids, they "
        "play no part in the membership"
    )


def _check_attacks(config: RunConfig) -> None:
    """Build the attacks once, with no model: names, parameters and access fail here."""
    build_attacks(
        config.attacks,
        RunContext(
            refs=tuple(n for n, _ in config.refs),
            target_access=config.target_access,
            references=reference_set(config),
            target_spec=config.model,
        ),
        params=config.params,
    )


def _manifest(
    config: RunConfig,
    loaded: LoadedData,
    scored: _Scored,
    dropped: dict[str, int],
    defects: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """The run's manifest: config, data accounting, models, attacks and the work done."""
    return {
        "config": config,
        "data": {
            "source": loaded.source,
            "fingerprint": loaded.fingerprint,
            "loaded": len(loaded.samples),
            "evaluated": len(scored.samples),
            "dropped": dropped,
            "defects": defects,
        },
        "models": scored.models,
        "attacks": {a.name: hyperparameters(a) for a in scored.attacks},
        "attack_deviations": {a.name: list(a.deviations) for a in scored.attacks if a.deviations},
        "passes": scored.work.plan.to_dict(),
        "requests": scored.work.to_dict(),
        "executor": scored.work.executor,
        "elapsed_s": round(time.time() - started, 2),
    }


@dataclass
class _Scored:
    samples: list[Sample]
    attacks: list[Attack]
    scores: dict[str, np.ndarray]
    models: dict[str, Any]  # the manifest's model entries
    work: WorkReport


def _score(
    config: RunConfig,
    samples: list[Sample],
    pools: dict[str, tuple[Sample, ...]],
    dropped: dict[str, int],
    console: Any,
    given: dict[str, Any] | None = None,
    shared_progress: Any = None,
    shared_executor: Executor | None = None,
) -> _Scored:
    """Load the models, set the attacks up and score; every model and store is closed after
    (``given`` backends, ``shared_progress`` and ``shared_executor`` belong to the caller and
    stay open)."""
    from imprint.report import ProgressFactory

    cache = SignalCache(config.cache or cache_dir() / "signals.sqlite")
    progress = (
        shared_progress
        if shared_progress is not None
        else ProgressFactory(console, enabled=config.progress)
    )
    backends: dict[str, Any] = {}
    work = WorkReport()
    requests: ModelRequests | None = None
    executor = shared_executor if shared_executor is not None else run_executor(config)
    try:
        backends = given if given is not None else load_backends(config, cache)
        requests = model_requests(
            backends, cache, work, config.token_budget, progress, executor=executor
        )
        samples, attacks, prefixes = _set_up_attacks(
            config, backends["target"], samples, pools, dropped, requests
        )
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
        work.executor = {"kind": executor.kind, **executor.stats.to_dict()}
        return _Scored(samples, attacks, scores, _describe_models(config, backends), work)
    finally:
        if shared_executor is None:
            executor.close()
        if shared_progress is None:
            progress.close()
        if requests is not None:
            requests.runner.store.close()
        for backend in backends.values() if given is None else ():
            if callable(getattr(backend, "close", None)):
                backend.close()  # an API client's connections
        cache.close()


def _set_up_attacks(
    config: RunConfig,
    target: Any,
    samples: list[Sample],
    pools: dict[str, tuple[Sample, ...]],
    dropped: dict[str, int],
    requests: ModelRequests | None = None,
) -> tuple[list[Sample], list[Attack], dict[str, str]]:
    """Build the attacks for this target, check it can serve them (before any scoring), and run
    their preparation (shots leave the evaluation)."""
    run = RunContext(
        refs=tuple(n for n, _ in config.refs),
        seed=config.seed,
        tokenize=getattr(target, "encode", None),  # an API target has no visible tokenizer
        target_fingerprint=target.fingerprint,
        vocab_size=getattr(target, "vocab_size", None),  # DC-PDD's V; an API target has none
        pools=pools,
        target_access=config.target_access,
        requests=requests,
        references=reference_set(config),
        target_spec=config.model,
    )
    attacks = build_attacks(config.attacks, run, params=config.params)
    for attack in attacks:
        if getattr(attack, "needs_backend", False):
            attack.check_backend(target)  # type: ignore[attr-defined]
    samples, attacks, prefixes = prepare_attacks(attacks, samples, run, dropped)
    if len({s.label for s in samples}) < 2:
        raise DataError(f"{config.data}: after preparation only one class is left to evaluate")
    return samples, attacks, prefixes


def _describe_models(config: RunConfig, backends: dict[str, Any]) -> dict[str, Any]:
    choices = backend_choices(config)
    return {name: _describe(backend, choices.get(name)) for name, backend in backends.items()}


def _describe(backend: Any, choice: BackendChoice | None = None) -> dict[str, Any]:
    """A backend's manifest entry: its provider and typed options, what it loaded; text
    backends add their query and token counters."""
    entry = {"spec": backend.spec, "fingerprint": backend.fingerprint}
    if callable(getattr(backend, "describe", None)):
        entry = backend.describe()  # an HF backend adds its start token and window
    if choice is not None:
        entry = {"model": choice.spec, **choice.describe(), **entry}
    if callable(getattr(backend, "usage", None)):
        entry["usage"] = backend.usage()
    return entry
