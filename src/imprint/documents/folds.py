"""Cross-validation over documents: a document's sequences always land on one side of a split.

Learned aggregations (the Shi et al. threshold, the Meeus et al. forest) are fitted on some
documents and scored on others; pooling the out-of-fold document scores gives one score per
document that no document's own label helped to make.
"""

from __future__ import annotations

import numpy as np

from imprint.errors import DataError

__all__ = ["MIN_DOCS_PER_CLASS", "document_sides", "sequence_folds"]

#: Each class needs this many documents for a 2-fold split with both classes on both sides.
MIN_DOCS_PER_CLASS = 2


def _check_counts(doc_labels: np.ndarray) -> int:
    """The smaller class's document count; raises when it is under the minimum."""
    n_members, n_non = int((doc_labels == 1).sum()), int((doc_labels == 0).sum())
    if min(n_members, n_non) < MIN_DOCS_PER_CLASS:
        raise DataError(
            f"learned document aggregations are cross-validated over documents and need at "
            f"least {MIN_DOCS_PER_CLASS} member and {MIN_DOCS_PER_CLASS} non-member documents; "
            f"got {n_members} and {n_non}. Add documents"
        )
    return min(n_members, n_non)


def sequence_folds(
    doc_index: np.ndarray, seq_labels: np.ndarray, *, n_splits: int = 5, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train sequences, test sequences) index pairs from a grouped, stratified K-fold over
    sequence rows (``groups`` = the document of each sequence, shape (n_sequences,)): no
    document has sequences on both sides."""
    from sklearn.model_selection import StratifiedGroupKFold

    groups = np.asarray(doc_index)
    doc_labels = np.zeros(int(groups.max()) + 1, dtype=np.int64)
    doc_labels[groups] = np.asarray(seq_labels)
    smaller = _check_counts(doc_labels)
    splitter = StratifiedGroupKFold(
        n_splits=min(n_splits, smaller), shuffle=True, random_state=seed
    )
    return list(splitter.split(np.zeros(len(groups)), seq_labels, groups))


def document_sides(
    doc_index: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The documents on each side of each fold: (train documents, test documents)."""
    groups = np.asarray(doc_index)
    return [(np.unique(groups[tr]), np.unique(groups[te])) for tr, te in folds]
