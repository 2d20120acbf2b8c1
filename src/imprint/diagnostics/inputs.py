"""Candidate texts for the diagnostics, prepared as ``imprint run`` prepares them.

A diagnostic that judges a benchmark (the blind baselines above all) must judge the samples the
attacks are scored on: the same loader, the same exact dedupe (a text under both labels dropped
in every copy), the same truncation and length filter. Drops are counted, never silent.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from imprint.data import LoadedData, Sample, apply_transforms, resolve_data
from imprint.errors import DataError

__all__ = ["Candidates", "evaluation_samples", "load_candidates"]


@dataclass(frozen=True)
class Candidates:
    """Samples ready for a diagnostic, with ``dropped`` (reason -> count, loader drops
    included), ``n_loaded`` (samples before the transforms) and the ``warnings`` the transforms
    raised (e.g. the ids of texts found under both labels)."""

    samples: list[Sample]
    dropped: dict[str, int] = field(default_factory=dict)
    n_loaded: int = 0
    warnings: list[str] = field(default_factory=list)


def load_candidates(
    data: str, *, text_field: str | None = None, label_field: str | None = None
) -> LoadedData:
    """Load a data spec (file, ``wikimia:32``, ``game:DIR``...) as every diagnostic does."""
    return resolve_data(data, text_field=text_field, label_field=label_field)


def evaluation_samples(
    data: str,
    *,
    text_field: str | None = None,
    label_field: str | None = None,
    truncate: int | None = None,
    min_words: int | None = None,
) -> Candidates:
    """The samples ``imprint run`` would evaluate on ``data`` (without ``--n-per-label``):
    loaded, truncated to ``truncate`` words, under ``min_words`` dropped, exact duplicates
    removed. The warnings are returned for the caller to show, not printed here."""
    loaded = load_candidates(data, text_field=text_field, label_field=label_field)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            samples, dropped = apply_transforms(
                loaded.samples, truncate=truncate, min_words=min_words, dedupe=True
            )
    except DataError:  # the warnings say why (e.g. texts under both labels): not lost
        for w in caught:
            warnings.warn(w.message, stacklevel=2)
        raise
    return Candidates(
        samples=list(samples),
        dropped={**loaded.dropped, **dropped},
        n_loaded=len(loaded.samples),
        warnings=[str(w.message) for w in caught],
    )
