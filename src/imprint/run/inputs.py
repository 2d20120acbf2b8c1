"""The data stage of a run: samples loaded and transformed, documents split, shot pools, and
the reference manifest's ids matched, all before any model loads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imprint.attacks import HeldOut, hold_out
from imprint.data import LoadedData, Sample, apply_transforms, data_defects, resolve_data
from imprint.data.benchmarks import DefectReport
from imprint.data.pools import NONMEMBER_POOL, load_shot_pool
from imprint.data.transforms import sample_per_label
from imprint.documents.run_hook import split_for_run
from imprint.errors import ConfigError
from imprint.run.config import RunConfig
from imprint.run.plan import RunPlan
from imprint.training_manifest import check_reference_ids


@dataclass
class RunInputs:
    """What the data stage hands on: the data as loaded and its published defects, the samples
    to score (sequences of documents when split), drops by reason, shot pools, the document
    split (or None) and the reference manifest's record (or None)."""

    loaded: LoadedData
    defects: DefectReport
    samples: list[Sample]
    dropped: dict[str, int]
    pools: dict[str, tuple[Sample, ...]]
    split: Any
    references: dict[str, Any] | None
    shots: HeldOut | None = None  # the non-member shots held out of every attack's evaluation


def load_inputs(plan: RunPlan) -> RunInputs:
    """Everything the run reads besides models (see the module docstring)."""
    config = plan.config
    pools = load_pools(config)
    loaded, samples, dropped, held = load_evaluation(config, pools)
    defects = data_defects(config.data, loaded)  # the set as published: manifest and warnings
    samples, split = split_for_run(config.documents, samples, dropped)
    if held is None:  # documents: the shots are sequences, held out once the texts are split
        samples, held = _hold_out(samples, pools, config, dropped)
    check_breakdown(config.breakdown, samples)
    references = None
    if plan.references is not None:  # ids of loaded and split samples alike
        ids = [s.id for s in loaded.samples] + [s.id for s in samples]
        references = check_reference_ids(plan.references, ids, allow=config.allow_unmatched_ids)
    return RunInputs(loaded, defects, samples, dropped, pools, split, references, held)


def load_pools(config: RunConfig) -> dict[str, tuple[Sample, ...]]:
    """The declared shot pools, by name."""
    return {
        name: load_shot_pool(
            name, spec, text_field=config.text_field, label_field=config.label_field
        )
        for name, spec in config.pools.items()
    }


def load_samples(config: RunConfig) -> tuple[LoadedData, list[Sample], dict[str, int]]:
    """Load the data spec and apply the configured transforms (the held-out shots left out, as
    in a run); drops are counted."""
    loaded, samples, dropped, _ = load_evaluation(config, load_pools(config))
    return loaded, samples, dropped


def load_evaluation(
    config: RunConfig, pools: dict[str, tuple[Sample, ...]]
) -> tuple[LoadedData, list[Sample], dict[str, int], HeldOut | None]:
    """The data loaded and transformed, the shots held out (sequences: before ``n_per_label``
    draws its N per label, so N per label are evaluated; documents: None here, see
    :func:`load_inputs`), and every drop counted."""
    loaded = resolve_data(
        config.data,
        text_field=config.text_field,
        label_field=config.label_field,
        on_bad=config.on_bad,
    )
    sequences = config.documents is None
    kept, transformed = apply_transforms(
        loaded.samples,
        truncate=config.truncate_words,
        min_words=config.min_words,
        dedupe=config.dedupe,
        n_per_label=None if sequences else config.n_per_label,
        seed=config.seed,
    )
    dropped, samples = dict(transformed), list(kept)
    held = None
    if sequences:
        samples, held = _hold_out(samples, pools, config, dropped)
        if config.n_per_label is not None:
            drawn, more = sample_per_label(samples, config.n_per_label, seed=config.seed)
            samples = list(drawn)
            for reason, count in more.items():
                dropped[reason] = dropped.get(reason, 0) + count
    return loaded, samples, {**loaded.dropped, **dropped}, held


def _hold_out(
    samples: list[Sample],
    pools: dict[str, tuple[Sample, ...]],
    config: RunConfig,
    dropped: dict[str, int],
) -> tuple[list[Sample], HeldOut]:
    """Hold the run's shots out of every attack's evaluation alike (counted as a drop)."""
    held = hold_out(samples, pools.get(NONMEMBER_POOL), config.shot_holdout, seed=config.seed)
    if held.removed_ids:
        samples = [s for s in samples if s.id not in held.removed_ids]
        dropped[held.reason()] = dropped.get(held.reason(), 0) + len(held.removed_ids)
    return samples, held


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
