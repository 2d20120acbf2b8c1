"""Documents into sequences: the unit attacks score, each keeping its document's id and label.

A document's words are Unicode words (:func:`imprint.data.words.split_words`: a Chinese or Thai
character is a word, ``Kraków`` and ``twenty-first`` are one). A sequence is the document's own text
from the start of word ``i`` to the end of word ``i + W - 1`` (whitespace and line breaks kept), so
sequences of one document never overlap and concatenate, in order, to the text they cover.

Rules, each tested: a document of at most ``W`` words is one sequence; otherwise consecutive
windows of ``W`` words, a remainder under ``W / 2`` words joined to the last window (no word is
lost, no sequence is a stub); with more than ``k`` windows, ``k`` of them evenly spread over the
document (first and last included) are kept and the others counted in ``dropped``. A document
without a word is dropped and counted.

``--doc-field FIELD`` instead groups rows that share ``meta[FIELD]`` into one document (rows in
data order; each row split as above); rows of one document must agree on the label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from imprint.data import Sample
from imprint.data.words import split_words
from imprint.errors import ConfigError, DataError

__all__ = [
    "DEFAULT_MAX_SEQS",
    "DEFAULT_SEQ_WORDS",
    "DOC_ID",
    "SEQ_INDEX",
    "DocumentSplit",
    "SplitConfig",
    "group_documents",
    "split_documents",
    "split_text",
]

#: The SoK's document setting: 25 sequences of 200 words per document.
DEFAULT_SEQ_WORDS = 200
DEFAULT_MAX_SEQS = 25
#: Meta keys every sequence carries: its document's id and its position in the document.
DOC_ID = "doc_id"
SEQ_INDEX = "seq_index"


@dataclass(frozen=True)
class SplitConfig:
    """``seq_words`` (W) words per sequence, at most ``max_seqs`` (k) sequences per document."""

    seq_words: int = DEFAULT_SEQ_WORDS
    max_seqs: int = DEFAULT_MAX_SEQS

    def __post_init__(self) -> None:
        for name in ("seq_words", "max_seqs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"{name} must be an integer >= 1, got {value!r} (the SoK uses "
                    f"{DEFAULT_MAX_SEQS} sequences of {DEFAULT_SEQ_WORDS} words)"
                )


@dataclass(frozen=True)
class DocumentSplit:
    """Sequences (``meta[DOC_ID]`` names their document, ``meta[SEQ_INDEX]`` the window), the
    documents (whole texts, for the document-level blind baseline) and what was left out."""

    sequences: list[Sample]
    documents: list[Sample]
    dropped: dict[str, int]

    def doc_index(self) -> np.ndarray:
        """Per sequence, the position of its document in ``documents``: shape (n_sequences,)."""
        where = {d.id: i for i, d in enumerate(self.documents)}
        return np.array([where[s.meta[DOC_ID]] for s in self.sequences], dtype=np.int64)


def _windows(n_words: int, seq_words: int) -> list[tuple[int, int]]:
    """(first word, last word + 1) of each window; see the module docstring."""
    if n_words <= seq_words:
        return [(0, n_words)] if n_words else []
    starts = list(range(0, n_words, seq_words))
    if n_words - starts[-1] < seq_words / 2:  # a short remainder joins the previous window
        starts.pop()
    ends = [*starts[1:], n_words]
    return list(zip(starts, ends, strict=True))


def _spread(n: int, k: int) -> list[int]:
    """``k`` of ``range(n)`` evenly spread, first and last included (all when ``n <= k``)."""
    if n <= k:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def split_text(text: str, config: SplitConfig) -> tuple[list[str], int]:
    """(the kept sequences of ``text`` in order, the number of windows left out over ``k``)."""
    words = split_words(text)
    windows = _windows(len(words), config.seq_words)
    kept = _spread(len(windows), config.max_seqs)
    pieces = [text[words[windows[i][0]].start : words[windows[i][1] - 1].end] for i in kept]
    return pieces, len(windows) - len(kept)


def _add(dropped: dict[str, int], reason: str, n: int) -> None:
    if n:
        dropped[reason] = dropped.get(reason, 0) + n


def _sequences(doc: Sample, texts: Sequence[str], first_index: int = 0) -> list[Sample]:
    return [
        Sample(
            f"{doc.id}#{first_index + j}",
            text,
            doc.label,
            {**doc.meta, DOC_ID: doc.id, SEQ_INDEX: first_index + j},
        )
        for j, text in enumerate(texts)
    ]


def split_documents(documents: Sequence[Sample], config: SplitConfig) -> DocumentSplit:
    """Each sample is a document: split it into at most ``k`` sequences of ``W`` words."""
    sequences: list[Sample] = []
    kept_docs: list[Sample] = []
    dropped: dict[str, int] = {}
    for doc in documents:
        texts, left_out = split_text(doc.text, config)
        _add(dropped, f"sequences over {config.max_seqs} per document (not scored)", left_out)
        if not texts:
            _add(dropped, "document without a word", 1)
            continue
        kept_docs.append(doc)
        sequences += _sequences(doc, texts)
    _check_documents(kept_docs, "after splitting")
    return DocumentSplit(sequences, kept_docs, dropped)


def group_documents(rows: Sequence[Sample], field: str, config: SplitConfig) -> DocumentSplit:
    """Rows sharing ``meta[field]`` form one document (in data order), each row split into
    sequences of ``W`` words; at most ``k`` sequences per document, evenly spread."""
    missing = [r.id for r in rows if field not in r.meta]
    if missing:
        fields = sorted({str(k) for r in rows for k in r.meta})
        raise DataError(
            f"--doc-field {field!r}: {len(missing)} of {len(rows)} rows lack it (first: "
            f"{missing[:3]}); the rows' fields are {fields}. Give every row a document id in "
            f"{field!r}, or drop --doc-field to treat each row as one document"
        )
    groups: dict[str, list[Sample]] = {}
    for row in rows:
        groups.setdefault(str(row.meta[field]), []).append(row)
    sequences: list[Sample] = []
    documents: list[Sample] = []
    dropped: dict[str, int] = {}
    for doc_id, members in groups.items():
        doc = _merged(doc_id, members, field)
        texts = [
            t for row in members for t in split_text(row.text, replace(config, max_seqs=10**9))[0]
        ]
        kept = _spread(len(texts), config.max_seqs)
        _add(
            dropped,
            f"sequences over {config.max_seqs} per document (not scored)",
            len(texts) - len(kept),
        )
        if not kept:
            _add(dropped, "document without a word", 1)
            continue
        documents.append(doc)
        sequences += _sequences(doc, [texts[i] for i in kept])
    _check_documents(documents, f"grouped by {field!r}")
    return DocumentSplit(sequences, documents, dropped)


def _merged(doc_id: str, rows: list[Sample], field: str) -> Sample:
    """One document of ``rows``: their texts joined by line breaks, their shared label."""
    labels = sorted({r.label for r in rows})
    if len(labels) > 1:
        by_label = {lab: [r.id for r in rows if r.label == lab][:3] for lab in labels}
        raise DataError(
            f"document {doc_id!r} (--doc-field {field!r}) mixes labels: rows {by_label}; "
            "membership is per document, so every row of a document needs the same label"
        )
    meta = {k: v for k, v in rows[0].meta.items() if k != field}
    return Sample(doc_id, "\n".join(r.text for r in rows), labels[0], meta)


def _check_documents(documents: Sequence[Sample], how: str) -> None:
    labels = {d.label for d in documents}
    if len(labels) < 2:
        have = f"only label {labels.pop()}" if labels else "none"
        raise DataError(
            f"document-level inference needs member and non-member documents; {how} there are "
            f"{len(documents)} documents with {have}. Check --doc-field and the label field"
        )
