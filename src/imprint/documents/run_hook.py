"""The document unit of a run: what ``imprint run --unit document`` adds to the pipeline.

Before scoring, :func:`split_for_run` turns the loaded documents into sequences (each keeps its
document's id in ``meta["doc_id"]``); the run then scores the sequences exactly as it scores any
samples, through the planner, the request layer and the cache. The document aggregators declare
what they need of the models (:data:`MEEUS_NEEDS`: Meeus et al. read the target's plain log-prob
pass, the one LOSS, Min-K% and Zlib share); :func:`document_signals` takes it from the run's
request client during scoring, while the models and the store are open, so the Meeus features
cost no model call and nothing reopens the store afterwards. Shi et al.'s aggregation needs only
the sequence scores. The document-level evaluation itself is :mod:`imprint.evaluation.documents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from imprint.attacks import Attack
from imprint.attacks.dc_pdd import DcPdd
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
from imprint.requests.client import ModelRequests
from imprint.signals.needs import TARGET, Need

__all__ = [
    "MEEUS_NEEDS",
    "UNITS",
    "DocumentOptions",
    "DocumentSignals",
    "document_options",
    "document_signals",
    "split_for_run",
]

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
    seq_words: int | None = None,
    max_seqs: int | None = None,
    di_power: float | None = None,
    di_effect_auc: float | None = None,
    meeus_features: str | None = None,
) -> DocumentOptions | None:
    """The run's document options from the CLI flags (None: not given, the default applies);
    None for ``--unit sequence``, where a document flag given is refused rather than ignored
    (even at its default value)."""
    if unit not in UNITS:
        raise ConfigError(f"--unit {unit!r}: choose one of {UNITS}")
    flags = {
        "--doc-field": doc_field,
        "--seq-words": seq_words,
        "--max-seqs": max_seqs,
        "--di-power": di_power,
        "--di-effect-auc": di_effect_auc,
        "--meeus-features": meeus_features,
    }
    if unit == "sequence":
        given = [flag for flag, value in flags.items() if value is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ConfigError(
                f"{', '.join(given)} {verb} to documents but --unit is sequence: add --unit "
                f"document, or drop {', '.join(given)}"
            )
        return None
    return DocumentOptions(
        doc_field=doc_field,
        seq_words=DEFAULT_SEQ_WORDS if seq_words is None else seq_words,
        max_seqs=DEFAULT_MAX_SEQS if max_seqs is None else max_seqs,
        meeus=MeeusSettings(features="agg" if meeus_features is None else meeus_features),  # type: ignore[arg-type]
        di_power=DEFAULT_POWER if di_power is None else di_power,
        di_effect_auc=DEFAULT_EFFECT_AUC if di_effect_auc is None else di_effect_auc,
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


@dataclass(frozen=True)
class DocumentSignals:
    """What the document aggregators took from scoring: ``token_stats`` the target's plain
    log-prob pass of each scored sample (None when the run did not plan it: then ``missing``
    says why) and ``vocab_size`` the V of Meeus's Laplace smoothing (None: the largest token
    id + 1)."""

    token_stats: tuple[TokenStats, ...] | None
    vocab_size: int | None = None
    missing: str | None = None


#: Meeus et al.'s needs: the target's plain log-prob pass (no prefix, the text itself).
MEEUS_NEEDS: tuple[Need, ...] = (Need(model=TARGET),)
NOT_PLANNED = (
    "Meeus et al. not computed: it reads the target's plain log-prob pass, which no "
    "attack of this run asked for; add e.g. loss or min_k (they share the pass)"
)


def document_signals(
    attacks: Sequence[Attack], requests: ModelRequests, texts: Sequence[str]
) -> DocumentSignals:
    """The aggregators' signals, taken during scoring from the run's request client: the pass
    Meeus needs when an attack planned it (a store hit, no model call), else a note. V is
    DC-PDD's when the run has it, as its manifest entry recorded (else None)."""
    vocab = next((a.vocab_size for a in attacks if isinstance(a, DcPdd)), None)
    planned = {need for attack in attacks for need in attack.needs()}
    if not set(MEEUS_NEEDS) <= planned:
        return DocumentSignals(None, vocab, NOT_PLANNED)
    stats = requests.token_stats(TARGET, texts)
    return DocumentSignals(tuple(stats), vocab)
