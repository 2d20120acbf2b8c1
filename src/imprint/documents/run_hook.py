"""The document unit of a run: what ``imprint run --unit document`` adds to the pipeline.

Before scoring, :func:`split_for_run` turns the loaded documents into sequences (each keeps its
document's id in ``meta["doc_id"]``); the run then scores the sequences exactly as it scores any
samples, through the planner, the request layer and the cache. After scoring,
:func:`cached_token_stats` reads the target's per-token statistics of every sequence back from
the signal cache (the plain log-prob pass LOSS, Min-K% and Zlib share), so the Meeus features
cost no model call. The document-level evaluation itself is :mod:`imprint.report.documents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from imprint.backends.base import TokenStats
from imprint.data import Sample
from imprint.documents.dataset_inference import ALPHA, CLIP
from imprint.documents.dataset_inference import DEVIATIONS as DI_DEVIATIONS
from imprint.documents.di_verdict import DEFAULT_EFFECT_AUC, DEFAULT_POWER, check_power_options
from imprint.documents.meeus import DEVIATIONS as MEEUS_DEVIATIONS
from imprint.documents.meeus import MeeusSettings
from imprint.documents.split import (
    DEFAULT_MAX_SEQS,
    DEFAULT_SEQ_WORDS,
    DocumentSplit,
    SplitConfig,
    group_documents,
    split_documents,
)
from imprint.errors import ConfigError

__all__ = ["UNITS", "DocumentOptions", "cached_token_stats", "document_options", "split_for_run"]

UNITS = ("sequence", "document")


@dataclass(frozen=True)
class DocumentOptions:
    """``--unit document``: ``seq_words`` words per sequence, at most ``max_seqs`` per document;
    ``doc_field`` groups rows sharing that field into one document (else a row is a document).
    ``n_splits`` folds for the learned aggregations; ``meeus``: the Meeus et al. features and
    forest; for dataset inference ``alpha``, the outlier share clipped (``di_clip``, bounds
    from the fit halves or each set: ``di_clip_from``) and the
    verdict's ``di_power`` against a document AUC of ``di_effect_auc``. The manifest records
    these (``config.documents``) with every difference from the authors' code (``deviations``)."""

    doc_field: str | None = None
    seq_words: int = DEFAULT_SEQ_WORDS
    max_seqs: int = DEFAULT_MAX_SEQS
    n_splits: int = 5
    alpha: float = ALPHA
    meeus: MeeusSettings = field(default_factory=MeeusSettings)
    di_clip: float = CLIP
    di_clip_from: str = "fit"
    di_power: float = DEFAULT_POWER
    di_effect_auc: float = DEFAULT_EFFECT_AUC
    deviations: dict[str, tuple[str, ...]] = field(
        init=False,
        default_factory=lambda: {"meeus": MEEUS_DEVIATIONS, "dataset_inference": DI_DEVIATIONS},
    )

    def __post_init__(self) -> None:
        SplitConfig(self.seq_words, self.max_seqs)  # validates both
        if self.doc_field is not None and not self.doc_field.strip():
            raise ConfigError("--doc-field must name a field, e.g. --doc-field book_id")
        if isinstance(self.n_splits, bool) or not isinstance(self.n_splits, int):
            raise ConfigError(f"n_splits must be an integer >= 2, got {self.n_splits!r}")
        if self.n_splits < 2:
            raise ConfigError(f"n_splits must be >= 2, got {self.n_splits}")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if isinstance(self.di_clip, bool) or not 0 <= self.di_clip < 1:
            raise ConfigError(f"di_clip must be a share in [0, 1), got {self.di_clip!r}")
        if self.di_clip_from not in ("fit", "set"):
            raise ConfigError(
                f"di_clip_from must be 'fit' or 'set' (the authors'), got {self.di_clip_from!r}"
            )
        check_power_options(self.di_power, self.di_effect_auc)

    @property
    def split(self) -> SplitConfig:
        return SplitConfig(self.seq_words, self.max_seqs)


def document_options(
    unit: str,
    *,
    doc_field: str | None = None,
    seq_words: int = DEFAULT_SEQ_WORDS,
    max_seqs: int = DEFAULT_MAX_SEQS,
    di_power: float = DEFAULT_POWER,
    di_effect_auc: float = DEFAULT_EFFECT_AUC,
    meeus_features: str = "agg",
) -> DocumentOptions | None:
    """The run's document options from the CLI flags; None for ``--unit sequence`` (where the
    document flags are refused rather than ignored)."""
    if unit not in UNITS:
        raise ConfigError(f"--unit {unit!r}: choose one of {UNITS}")
    if unit == "sequence":
        given = [
            flag
            for flag, value, default in (
                ("--doc-field", doc_field, None),
                ("--seq-words", seq_words, DEFAULT_SEQ_WORDS),
                ("--max-seqs", max_seqs, DEFAULT_MAX_SEQS),
                ("--di-power", di_power, DEFAULT_POWER),
                ("--di-effect-auc", di_effect_auc, DEFAULT_EFFECT_AUC),
                ("--meeus-features", meeus_features, "agg"),
            )
            if value != default
        ]
        if given:
            raise ConfigError(f"{', '.join(given)} apply to documents: add --unit document")
        return None
    return DocumentOptions(
        doc_field=doc_field,
        seq_words=seq_words,
        max_seqs=max_seqs,
        meeus=MeeusSettings(features=meeus_features),  # type: ignore[arg-type]
        di_power=di_power,
        di_effect_auc=di_effect_auc,
    )


def split_for_run(
    options: DocumentOptions | None, samples: list[Sample], dropped: dict[str, int]
) -> tuple[list[Sample], DocumentSplit | None]:
    """(the samples to score, the split); the samples unchanged when ``options`` is None. What
    the split leaves out is added to ``dropped``."""
    if options is None:
        return samples, None
    if options.doc_field:
        split = group_documents(samples, options.doc_field, options.split)
    else:
        split = split_documents(samples, options.split)
    for reason, n in split.dropped.items():
        dropped[reason] = dropped.get(reason, 0) + n
    return split.sequences, split


def cached_token_stats(
    cache_path: Path, fingerprint: str, texts: Sequence[str]
) -> list[TokenStats] | None:
    """The target's plain log-prob pass of each text, read from the signal cache (keyed by the
    target's fingerprint); None unless every text has one (no attack asked for that pass)."""
    from imprint.signals.cache import SignalCache, make_key

    cache = SignalCache(cache_path)
    try:
        keys = [make_key(fingerprint, t) for t in texts]
        found = cache.get_many(keys)
    finally:
        cache.close()
    if any(k not in found for k in keys):
        return None
    return [found[k] for k in keys]
