"""The data stage of a run: samples loaded and transformed, documents split, shot pools, and
the reference manifest's ids matched, all before any model loads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imprint.data import LoadedData, Sample, apply_transforms, data_defects, resolve_data
from imprint.data.benchmarks import DefectReport
from imprint.data.pools import load_shot_pool
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


def load_inputs(plan: RunPlan) -> RunInputs:
    """Everything the run reads besides models (see the module docstring)."""
    config = plan.config
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
    references = None
    if plan.references is not None:  # ids of loaded and split samples alike
        ids = [s.id for s in loaded.samples] + [s.id for s in samples]
        references = check_reference_ids(plan.references, ids, allow=config.allow_unmatched_ids)
    return RunInputs(loaded, defects, samples, dropped, pools, split, references)


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
