"""Run an experiment grid: every (model, benchmark, attack variant) cell, through ``imprint run``.

The grid does not score anything itself. For each model it loads the backends once
(:func:`imprint.run.load_backends`) and hands them to :func:`imprint.run.execute_run` for every
run of that model's cells; all runs share one signal cache, so each (model, text, context) pass is
computed once across the grid and every later cell that needs it is a cache hit. A run holds
every attack of one (model, benchmark) that is missing, at most one variant of each attack (a
sweep of ``min_k.k`` over three values is three runs, two of them answered from the cache).
Finished cells are stored one by one (:mod:`.cells`); a re-run reads them back and loads no model
unless a cell is missing. The model-less blind baseline is one cell per benchmark.

Each cell's run is an ordinary :class:`~imprint.run.RunConfig`, resolved once per run.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from imprint.data import Sample, fingerprint_samples
from imprint.errors import ConfigError, DataError
from imprint.executors import ExecutorConfig
from imprint.run import RunConfig, execute_run, load_backends, load_samples, resolve, run_executor
from imprint.study.cells import (
    BLIND,
    BLIND_SCORES,
    STRONGEST_BLIND,
    CellRecord,
    CellStore,
    cell_key,
)
from imprint.study.grid_progress import GridProgress
from imprint.study.spec import AttackVariant, BenchmarkEntry, ModelEntry, StudySpec

__all__ = ["GridResult", "grid_models", "run_grid"]


@dataclass(frozen=True)
class _Cell:
    model: ModelEntry
    benchmark: BenchmarkEntry
    variant: AttackVariant
    key: str
    data: str  # fingerprint of the benchmark's samples as loaded and transformed


@dataclass
class GridResult:
    """The grid's cells in grid order (blind cells first), and the work this invocation did:
    ``computed``/``reused`` cells, models loaded, and request counts summed over its runs (per
    model name, per request kind: requests, cache_hits, executed)."""

    spec: StudySpec
    cells: list[CellRecord]
    computed: int = 0
    reused: int = 0
    models_loaded: list[str] = field(default_factory=list)
    requests: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def executed(self) -> int:
        """Model calls executed by this invocation (log-prob passes and every other request)."""
        return sum(c.get("executed", 0) for kinds in self.requests.values() for c in kinds.values())


def grid_models(
    spec: StudySpec, games: dict[str, dict[int, Path]] | None = None
) -> list[ModelEntry]:
    """The spec's models plus one per built game snapshot (``games``: game name -> epochs ->
    folder), each paired with its game's candidates as the benchmark named after the game."""
    out = list(spec.models)
    for sweep in spec.games:
        for epochs, folder in sorted((games or {}).get(sweep.name, {}).items()):
            bench = BenchmarkEntry(name=sweep.name, data=f"game:{folder}")
            label = f"{sweep.name} {epochs} epoch{'s' * (epochs != 1)}"
            out.append(ModelEntry(label, f"game:{folder}", paired=(bench,)))
    return out


def run_grid(
    spec: StudySpec,
    executor: ExecutorConfig | None,
    *,
    games: dict[str, dict[int, Path]] | None = None,
    console: Any = None,
    progress: bool = True,
) -> GridResult:
    """Compute every missing cell of ``spec`` (see the module docstring); return all cells."""
    started = time.time()
    models = grid_models(spec, games)
    if not models:
        raise ConfigError(f"{spec.source}: the grid has no models (and no built games)")
    from imprint.outdir import claim_folder

    store = CellStore(spec.out / "cells")
    _, blind, cells = prepare_grid(spec, models, executor)
    claim_folder(spec.out, "study")  # a new or earlier study folder, marked as one
    found = {key: store.get(key) for key in [*blind, *(c.key for c in cells)]}
    result = GridResult(spec, [], reused=sum(r is not None for r in found.values()))
    result.computed = len(found) - result.reused
    bars = GridProgress(console, enabled=progress)
    try:
        advance = bars("grid", len(found), unit="cells")
        advance(result.reused)
        for key, (bench, data_fp, samples) in blind.items():
            if found[key] is None:
                found[key] = store_blind(spec, key, bench, samples, data_fp, store)
                advance(1)
        missing = _unique_keys([c for c in cells if found[c.key] is None])
        found.update(_compute(spec, executor, missing, store, result, bars, advance))
    finally:
        bars.close()
    # labels come from the file as it is now: renaming a model or benchmark recomputes nothing.
    # One record per grid place, not per key: two names for one model (or one data set) share
    # their cells' keys, and each name keeps its column.
    places = [(key, bench.name, "", "blind baseline") for key, (bench, _, _) in blind.items()]
    places += [(c.key, c.benchmark.name, c.model.name, c.variant.label) for c in cells]
    result.cells = [
        replace(record, benchmark=b, model=m, row=r)
        for k, b, m, r in dict.fromkeys(places)
        if (record := found[k]) is not None
    ]
    result.elapsed_s = round(time.time() - started, 2)
    return result


def prepare_grid(
    spec: StudySpec, models: Sequence[ModelEntry], executor: ExecutorConfig | None
) -> tuple[
    dict[tuple[Any, ...], list[Sample]],
    dict[str, tuple[BenchmarkEntry, str, list[Sample]]],
    list[_Cell],
]:
    """The checks made before any work (every model's options and files, then every
    benchmark's data), then every cell's key: (data, blind cells, model cells)."""
    from imprint.study.checks import check_models, raise_all

    problems: list[Exception] = [*check_models(spec, models, lambda m: _run_config(
        spec, executor, m, _benchmarks(spec, m)[0], (), Path("unused")))]  # fmt: skip
    data = _load_data(spec, models, executor, problems)
    raise_all(str(spec.source), problems)  # every missing model and data set, in one error
    blind = _blind_cells(spec, models, data)
    return data, blind, [c for m in models for c in _model_cells(spec, m, data)]


# -- data and keys --------------------------------------------------------------------------------


def _unique_keys(cells: Sequence[_Cell]) -> list[_Cell]:
    """The first cell of each key: cells that share a key (one model under two names) run once."""
    first: dict[str, _Cell] = {}
    for cell in cells:
        first.setdefault(cell.key, cell)
    return list(first.values())


def _data_id(bench: BenchmarkEntry) -> tuple[Any, ...]:
    """Benchmarks that load the same samples share one entry (the name is only a label)."""
    return (bench.data, bench.truncate, bench.min_words, bench.n_per_label, bench.text_field,
            bench.label_field, bench.dedupe)  # fmt: skip


def _benchmarks(spec: StudySpec, model: ModelEntry) -> tuple[BenchmarkEntry, ...]:
    return model.paired or spec.benchmarks


def _load_data(
    spec: StudySpec,
    models: Sequence[ModelEntry],
    executor: ExecutorConfig | None,
    problems: list[Exception],
) -> dict[tuple[Any, ...], list[Sample]]:
    """Every benchmark's samples, loaded and transformed as its runs will; a missing or broken
    data set is added to ``problems`` (naming the benchmark and the file), and the others are
    still tried, so every one that is missing is found before any model loads."""
    out: dict[tuple[Any, ...], list[Sample]] = {}
    for model in models:
        for bench in _benchmarks(spec, model):
            if _data_id(bench) in out:
                continue
            config = _run_config(spec, executor, model, bench, (), Path("unused"))
            try:
                _, samples, _ = load_samples(config)
            except (ConfigError, DataError) as err:
                problems.append(type(err)(f"{spec.source}: benchmark {bench.name!r}: {err}"))
                samples = []
            out[_data_id(bench)] = samples
    return out


def _model_digest(spec: str) -> str:
    """The model's content digest (weights, config, tokenizer) without loading it; a model
    that only its provider can name (a hub id offline, an API) is keyed by its spec."""
    from imprint.backends.models import fingerprint_source, resolve_model

    try:
        return fingerprint_source(resolve_model(spec))
    except Exception:  # noqa: BLE001 - any spec resolve_model cannot place is keyed by name
        return f"spec:{spec}"


def _settings_key(spec: StudySpec) -> dict[str, Any]:
    s = spec.settings
    return {"seed": s.seed, "n_bootstrap": s.n_bootstrap, "dtype": s.dtype,
            "max_length": s.max_length, "start_token": s.start_token}  # fmt: skip


def _model_cells(
    spec: StudySpec, model: ModelEntry, data: dict[tuple[Any, ...], list[Sample]]
) -> list[_Cell]:
    digest = _model_digest(model.model)
    refs = [(name, ref, _model_digest(ref)) for name, ref in spec.refs]
    out = []
    for bench in _benchmarks(spec, model):
        data_fp = fingerprint_samples(data[_data_id(bench)])
        for variant in spec.variants:
            key = cell_key({
                "model": [model.model, dict(model.args), digest], "refs": refs,
                "data": data_fp, "pools": dict(bench.pools), "attack": variant.attack,
                "params": dict(variant.params), **_settings_key(spec),
            })  # fmt: skip
            out.append(_Cell(model, bench, variant, key, data_fp))
    return out


def _blind_cells(
    spec: StudySpec, models: Sequence[ModelEntry], data: dict[tuple[Any, ...], list[Sample]]
) -> dict[str, tuple[BenchmarkEntry, str, list[Sample]]]:
    """key -> (benchmark, data fingerprint, samples): one model-less cell per benchmark name
    and data set (game snapshots share their candidates, so one); none when blind is off."""
    if not spec.settings.blind:
        return {}
    out: dict[str, tuple[BenchmarkEntry, str, list[Sample]]] = {}
    for bench in (b for m in models for b in _benchmarks(spec, m)):
        samples = data[_data_id(bench)]
        fp = fingerprint_samples(samples)
        # "scores": cells stored before the out-of-fold scores were kept are recomputed
        key = cell_key({"blind": fp, "name": bench.name, "scores": 1, **_settings_key(spec)})
        out.setdefault(key, (bench, fp, samples))
    return out


def store_blind(
    spec: StudySpec,
    key: str,
    bench: BenchmarkEntry,
    samples: list[Sample],
    data_fp: str,
    store: CellStore,
) -> CellRecord:
    """Fit the blind suite on ``bench``'s samples once and store its cell (:func:`blind_cell`)."""
    settings = spec.settings
    record = blind_cell(key, bench.name, samples, data_fp, settings.seed, settings.n_bootstrap)
    store.put(record)
    return record


def blind_cell(
    key: str, bench: str, samples: list[Sample], data_fp: str, seed: int, n_bootstrap: int
) -> CellRecord:
    """A blind cell: the SoK forest's row, the strongest model-less classifier (Bonferroni
    intervals when picked from several) and that classifier's out-of-fold scores by sample id,
    and test folds by sample id, which the tables compare each attack with, paired on the
    same texts."""
    from imprint.evaluation.evaluate import evaluate_blind_scores
    from imprint.evaluation.results import BlindClassifierMetrics, BlindSuiteMetrics

    labels = np.array([s.label for s in samples])
    texts = [s.text for s in samples]
    sok, suite, best = evaluate_blind_scores(texts, labels, seed=seed, n_bootstrap=n_bootstrap)
    columns = {}
    if isinstance(sok, BlindClassifierMetrics) and sok.summary is not None:
        columns["blind (SoK bag-of-words)"] = sok.summary
    if isinstance(suite, BlindSuiteMetrics):
        columns[f"{STRONGEST_BLIND}{suite.strongest})"] = suite.selected
    failed = [
        f.error
        for f in (sok, suite)
        if not isinstance(f, BlindClassifierMetrics | BlindSuiteMetrics)
    ]
    provenance: dict[str, Any] = {"data": data_fp, "errors": failed}
    if isinstance(suite, BlindSuiteMetrics) and best is not None:
        provenance[BLIND_SCORES] = {
            "classifier": suite.strongest,
            "ids": [s.id for s in samples],
            "scores": [None if v != v else float(v) for v in best.scores],
            # each id's test fold: the paired comparison counts the blind column's refitting
            "folds": None if best.folds is None else [int(f) for f in best.folds],
        }
    return CellRecord(key, "", bench, BLIND, "blind baseline", {}, columns, provenance)


# -- the runs -------------------------------------------------------------------------------------


def _run_config(
    spec: StudySpec,
    executor: ExecutorConfig | None,
    model: ModelEntry,
    bench: BenchmarkEntry,
    variants: Sequence[AttackVariant],
    out: Path,
) -> RunConfig:
    """The run of ``variants`` of ``model`` on ``bench``: its model, data and attacks from the
    grid's places, everything else from the grid's settings. No ``variants``: a config that
    only loads the data or checks the model, given the grid's first attack (a run names one)."""
    s = spec.settings
    variants = variants or spec.variants[:1]
    return RunConfig(
        model=model.model, data=bench.data, out=out, model_args=dict(model.args),
        shared_args=s.shared_args(), attacks=tuple(v.attack for v in variants), refs=spec.refs,
        params={v.attack: dict(v.params) for v in variants if v.params},
        pools=dict(bench.pools), text_field=bench.text_field, label_field=bench.label_field,
        truncate_words=bench.truncate, min_words=bench.min_words, n_per_label=bench.n_per_label,
        dedupe=bench.dedupe, seed=s.seed, n_bootstrap=s.n_bootstrap, token_budget=s.token_budget,
        cache=spec.cache, blind=False, progress=False, executor=executor or ExecutorConfig(),
        overwrite=True,  # a cell's run folder in the study's own folder: a rerun replaces it
    )  # fmt: skip


def _slots(cells: Sequence[_Cell]) -> list[list[_Cell]]:
    """Cells of one (model, benchmark) split into runs holding each attack at most once."""
    slots: list[list[_Cell]] = []
    for cell in cells:
        slot = next(
            (s for s in slots if all(c.variant.attack != cell.variant.attack for c in s)), None
        )
        if slot is None:
            slots.append(slot := [])
        slot.append(cell)
    return slots


def _compute(
    spec: StudySpec,
    executor: ExecutorConfig | None,
    missing: Sequence[_Cell],
    store: CellStore,
    result: GridResult,
    bars: Any,
    advance: Callable[[int], None],
) -> dict[str, CellRecord]:
    """Run the missing cells, one model at a time (loaded once for all of its runs)."""
    done: dict[str, CellRecord] = {}
    by_model: dict[str, list[_Cell]] = {}
    for cell in missing:
        by_model.setdefault(cell.model.name, []).append(cell)
    for name, cells in by_model.items():
        model = cells[0].model
        backends = _load_model(spec, executor, model)
        result.models_loaded.append(name)
        workers = _model_executor(spec, executor, model)
        try:
            by_bench: dict[str, list[_Cell]] = {}
            for cell in cells:
                by_bench.setdefault(cell.benchmark.name, []).append(cell)
            for bench_cells in by_bench.values():
                for slot in _slots(bench_cells):
                    for record in _run_slot(
                        spec, executor, slot, (backends, workers), store, result, bars
                    ):
                        done[record.key] = record
                        advance(1)
        finally:
            if workers is not None:
                workers.close()
            _close(backends)
    return done


def _load_model(
    spec: StudySpec, executor: ExecutorConfig | None, model: ModelEntry
) -> dict[str, Any]:
    from imprint.signals.cache import SignalCache

    bench = _benchmarks(spec, model)[0]
    plan = resolve(_run_config(spec, executor, model, bench, (), spec.out / "runs" / "load"))
    cache = SignalCache(spec.cache)  # an API target answers from it while loading
    try:
        return load_backends(plan, cache)
    except ConfigError as err:  # a model that fails only when it loads: name its place too
        from imprint.study.checks import model_place

        raise ConfigError(f"{spec.source}: {model_place(spec, model, err)}: {err}") from None
    finally:
        cache.close()


def _model_executor(spec: StudySpec, executor: ExecutorConfig | None, model: ModelEntry) -> Any:
    """One executor for all of a model's runs (Ray workers load the model once per grid, not
    once per cell); None for the local default, which each run makes for itself."""
    if executor is None or executor.kind == "local":
        return None
    bench = _benchmarks(spec, model)[0]
    return run_executor(
        resolve(_run_config(spec, executor, model, bench, (), spec.out / "runs" / "load"))
    )


def _close(backends: dict[str, Any]) -> None:
    for backend in backends.values():
        backend.close()
    backends.clear()
    gc.collect()  # the next model's weights should not sit beside this one's


def _run_slot(
    spec: StudySpec,
    executor: ExecutorConfig | None,
    slot: Sequence[_Cell],
    loaded: tuple[dict[str, Any], Any],
    store: CellStore,
    result: GridResult,
    bars: Any,
) -> list[CellRecord]:
    """One ``imprint run`` (a real run folder under ``<out>/runs``) for the cells of ``slot``;
    each cell is stored as soon as the run's figures exist."""
    first = slot[0]
    run_id = cell_key({"cells": sorted(c.key for c in slot)})
    out = spec.out / "runs" / run_id
    variants = [c.variant for c in slot]
    config = _run_config(spec, executor, first.model, first.benchmark, variants, out)
    backends, workers = loaded
    run = execute_run(config, backends=backends, progress=bars, executor=workers)
    requests = run.manifest.get("requests", {})
    _add_counts(result.requests.setdefault(first.model.name, {}), requests)
    owners = _column_owners(variants, spec.refs, list(run.scores))
    evaluated = fingerprint_samples(run.samples)
    records = []
    for cell in slot:
        columns = {
            c: m for c, m in run.metrics.attacks.items() if owners.get(c) == cell.variant.attack
        }
        provenance = {
            "run": str(out.relative_to(spec.out)) if out.is_relative_to(spec.out) else str(out),
            "model_fingerprint": run.manifest.get("models", {})
            .get("target", {})
            .get("fingerprint"),
            "data": cell.data,
            "evaluated": evaluated,
            "requests_of_run": requests,
            "warnings": [w.message for w in run.metrics.warnings],
        }
        record = CellRecord(
            key=cell.key,
            model=cell.model.name,
            benchmark=cell.benchmark.name,
            attack=cell.variant.attack,
            row=cell.variant.label,
            params=dict(cell.variant.params),
            columns=columns,
            provenance=provenance,
        )
        store.put(record)
        records.append(record)
    return records


def _column_owners(
    variants: Sequence[AttackVariant], refs: Sequence[tuple[str, str]], columns: list[str]
) -> dict[str, str]:
    """Score column -> the attack that wrote it (``ref`` writes ``ref[...]`` and
    ``ref_ratio[...]``), from the attacks' own ``columns()``."""
    from imprint.attacks import RunContext, build_attacks

    attacks = build_attacks(
        [v.attack for v in variants],
        RunContext(refs=tuple(n for n, _ in refs)),
        params={v.attack: dict(v.params) for v in variants if v.params},
    )
    owners = {c: a.name for a in attacks for c in a.columns()}
    for column in columns:  # a column no attack declared: its name starts with the attack's
        owners.setdefault(
            column, next((v.attack for v in variants if column.startswith(v.attack)), "")
        )
    return owners


def _add_counts(total: dict[str, dict[str, int]], requests: dict[str, Any]) -> None:
    """Sum a run's request counts (role -> kind -> counts) into ``total`` (kind -> counts)."""
    for kinds in requests.values():
        for kind, counts in kinds.items():
            into = total.setdefault(kind, {})
            for name, value in counts.items():
                into[name] = into.get(name, 0) + int(value)
