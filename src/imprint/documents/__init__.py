"""Document- and dataset-level membership inference: split documents into sequences, score the
sequences with the ordinary attacks (the same planned passes), then aggregate per document
(mean, Shi et al.'s thresholded fraction, Meeus et al.'s meta-classifier) or test a whole set
(Maini et al.'s dataset inference), or estimate what fraction of a set was trained on (DUCI)."""

from imprint.documents.dataset_inference import (
    ALPHA,
    CurvePoint,
    DatasetInference,
    dataset_inference,
    documents_needed,
    p_value_curve,
    welch_greater,
)
from imprint.documents.di_verdict import Verdict, verdict
from imprint.documents.doc_metrics import (
    PairedAuc,
    document_summary,
    mean_per_document,
    paired_bootstrap,
    weighted_auc,
)
from imprint.documents.duci import DuciResult, duci, duci_from_signals
from imprint.documents.folds import document_sides, sequence_folds
from imprint.documents.meeus import (
    MeeusSettings,
    aggregate_features,
    histogram_features,
    log_frequencies,
    meeus_scores,
    token_values,
)
from imprint.documents.shi import (
    fraction_above,
    shi_fold_scores,
    shi_fold_summary,
    shi_scores,
    tune_threshold,
)
from imprint.documents.split import (
    DOC_ID,
    SEQ_INDEX,
    DocumentSplit,
    SplitConfig,
    group_documents,
    split_documents,
    split_text,
)

__all__ = [
    "ALPHA",
    "DOC_ID",
    "SEQ_INDEX",
    "CurvePoint",
    "DatasetInference",
    "DocumentSplit",
    "DuciResult",
    "MeeusSettings",
    "PairedAuc",
    "SplitConfig",
    "Verdict",
    "aggregate_features",
    "duci",
    "duci_from_signals",
    "dataset_inference",
    "document_sides",
    "document_summary",
    "documents_needed",
    "fraction_above",
    "group_documents",
    "histogram_features",
    "log_frequencies",
    "mean_per_document",
    "meeus_scores",
    "p_value_curve",
    "paired_bootstrap",
    "sequence_folds",
    "shi_fold_scores",
    "shi_fold_summary",
    "shi_scores",
    "split_documents",
    "split_text",
    "token_values",
    "tune_threshold",
    "verdict",
    "weighted_auc",
    "welch_greater",
]
