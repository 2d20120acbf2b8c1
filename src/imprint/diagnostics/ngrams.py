"""Word n-grams as MIMIR counts them, hashed to 64-bit integers in bulk.

Normalisation (Duan et al. 2024, "Do Membership Inference Attacks Work on Large Language
Models?", n-gram overlap): lowercase, strip punctuation, split on whitespace. Precisely:

1. ``text.lower()``;
2. delete every ASCII ``string.punctuation`` character and every Unicode character whose
   category starts with ``P`` (so ``don't`` -> ``dont``, ``U.S.`` -> ``us``);
3. words are the maximal runs of non-whitespace (``str.split()`` semantics).

An n-gram is n consecutive words of one document; n-grams never cross documents. Each n-gram
is hashed to an unsigned 64-bit integer (a polynomial hash of each word's UTF-8 bytes, mixed
with splitmix64, then chained over the n words). :func:`ngram_hashes` computes all of them for
a batch of documents with a handful of numpy passes; :func:`normalize_words` is the plain
reference used by tests. Anything that changes the hash values must bump :data:`HASH_VERSION`
(indexes record it and refuse to mix versions).
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "HASH_VERSION",
    "NORMALIZATION",
    "NgramBatch",
    "ngram_hashes",
    "normalize_text",
    "normalize_words",
]

HASH_VERSION = "imprint-ngram-hash-v1"
NORMALIZATION = "lowercase; delete ASCII punctuation and Unicode category P*; split on whitespace"

_U64 = np.uint64
_P = 0x100000001B3  # odd multiplier of the per-word polynomial hash
_P_INV = pow(_P, -1, 2**64)
_CHAIN = 0x9E3779B97F4A7C15  # multiplier that chains word hashes into an n-gram hash
_WS_BYTES = bytes([9, 10, 11, 12, 13, 28, 29, 30, 31, 32])  # ASCII chars str.split() splits on
_ASCII_WS_TABLE = bytes.maketrans(_WS_BYTES, b" " * len(_WS_BYTES))
_ASCII_PUNCT = string.punctuation.encode("ascii")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


@functools.cache
def _full_table() -> dict[int, str | None]:
    """``str.translate`` table: punctuation -> deleted, any whitespace -> ' ' (all of Unicode)."""
    table: dict[int, str | None] = {ord(ch): None for ch in string.punctuation}
    for start in range(0, sys.maxunicode + 1, 1 << 16):  # in blocks: bounded memory
        chars = list(map(chr, range(start, min(start + (1 << 16), sys.maxunicode + 1))))
        for ch, cat in zip(chars, map(unicodedata.category, chars), strict=True):
            if cat[0] == "P":
                table[ord(ch)] = None
            elif ch.isspace():
                table[ord(ch)] = " "
    return table


@functools.cache
def _non_ascii_table() -> dict[int, str | None]:
    return {c: v for c, v in _full_table().items() if c > 0x7F}


def _fix_non_ascii(match: re.Match[str]) -> str:
    return match.group().translate(_non_ascii_table())


def normalize_text(text: str) -> str:
    """Lowercase and strip punctuation; whitespace is kept (any whitespace becomes ' ')."""
    return text.lower().translate(_full_table())


def normalize_words(text: str) -> list[str]:
    """Reference tokenisation: the words of ``text`` after normalisation (slow, simple)."""
    return normalize_text(text).split()


def _doc_bytes(text: str) -> bytes:
    """Normalised UTF-8 bytes of one document: words separated by ASCII spaces, no newline."""
    low = text.lower()
    if not low.isascii():
        low = _NON_ASCII_RUN.sub(_fix_non_ascii, low)
    raw = low.encode("utf-8", "surrogatepass")
    return raw.translate(_ASCII_WS_TABLE, _ASCII_PUNCT)


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64 finaliser, elementwise, wrapping modulo 2**64 (in place on a copy)."""
    x = x ^ (x >> _U64(30))
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
    return x


_POWERS: list[NDArray[np.uint64]] = []


def _power_tables(size: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """``(P**i, P**-i) mod 2**64`` for i in [0, size), cached and grown by doubling."""
    if not _POWERS or _POWERS[0].size < size:
        cap = max(size, 2 * _POWERS[0].size if _POWERS else 1 << 16)
        tables = []
        for base in (_P, _P_INV):
            out = np.full(cap, base, dtype=np.uint64)
            out[0] = 1
            with np.errstate(over="ignore"):
                tables.append(np.cumprod(out, dtype=np.uint64))
        _POWERS[:] = tables
    return _POWERS[0][:size], _POWERS[1][:size]


@dataclass(frozen=True)
class NgramBatch:
    """Word hashes of a batch of documents.

    ``word_hash`` (shape (w,)) holds one uint64 per word, documents concatenated in order;
    ``word_doc`` (shape (w,)) the index of each word's document; ``n_docs`` the batch size.
    """

    word_hash: NDArray[np.uint64]
    word_doc: NDArray[np.int64]
    n_docs: int

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> NgramBatch:
        """Normalise and hash every word of ``texts`` (vectorised over the whole batch)."""
        blob = b"\n".join(_doc_bytes(t) for t in texts)
        arr = np.frombuffer(blob, dtype=np.uint8)
        word = (arr != 32) & (arr != 10)
        edges = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        if starts.size == 0:
            return cls(np.empty(0, np.uint64), np.empty(0, np.int64), len(texts))
        pw, inv = _power_tables(arr.size)
        with np.errstate(over="ignore"):
            weighted = (arr + np.uint64(1)) * pw
            weighted[~word] = 0
            # sum of each word's weighted bytes (separators weigh 0), then shift to offset 0
            poly = np.add.reduceat(weighted, starts) * inv[starts]
            word_hash = _mix(poly ^ (ends - starts).astype(np.uint64))
        newline_at = np.flatnonzero(arr == 10)
        word_doc = np.searchsorted(newline_at, starts).astype(np.int64)
        return cls(word_hash, word_doc, len(texts))

    def words_per_doc(self) -> NDArray[np.int64]:
        """Number of words in each document, shape (n_docs,)."""
        return np.bincount(self.word_doc, minlength=self.n_docs).astype(np.int64)

    def ngrams(self, n: int) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """All n-gram hashes (shape (g,)) and the document of each (shape (g,)).

        A document with w words contributes ``max(0, w - n + 1)`` n-grams, in word order.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        w = self.word_hash.size
        if w < n:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        m = w - n + 1
        valid = self.word_doc[:m] == self.word_doc[n - 1 :]
        with np.errstate(over="ignore"):
            g = self.word_hash[:m].copy()
            for j in range(1, n):
                g *= _U64(_CHAIN)
                g += self.word_hash[j : j + m]
            g = _mix(g ^ _U64(n))
        return g[valid], self.word_doc[:m][valid]


def ngram_hashes(texts: Sequence[str], n: int) -> list[NDArray[np.uint64]]:
    """The n-gram hashes of each text: a list of uint64 arrays, one per text, in word order."""
    batch = NgramBatch.from_texts(texts)
    hashes, docs = batch.ngrams(n)
    counts = np.bincount(docs, minlength=len(texts))
    return np.split(hashes, np.cumsum(counts)[:-1]) if len(texts) else []
