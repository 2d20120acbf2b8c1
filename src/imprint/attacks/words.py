"""Words for black-box attacks: a regex word tokenizer (no downloaded data) and ROUGE-1.

Words (:data:`WORD_RE`) are numbers with inner separators (``1,000``, ``3.5``), runs of word
characters joined by hyphens or apostrophes (``twenty-first``, ``storm's``), or single
punctuation marks. A text's word ``i`` keeps its character span, so the prefix ``x_<i`` is the
text exactly as written up to the end of word ``i - 1`` (no trailing whitespace: BPE tokenizers
attach the space to the next token).

The first word of a generated continuation is *final* once more text cannot change it; samplers
stop generating there (:func:`first_word`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

WORD_RE = re.compile(r"\d+(?:[.,]\d+)+|\w+(?:[-'’]\w+)*|[^\w\s]")
_JOINERS = frozenset("-'’.,")
_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class Word:
    """One word of a text and its character span ``text[start:end]``."""

    text: str
    start: int
    end: int


def split_words(text: str) -> list[Word]:
    """The words of ``text`` in order, with their spans."""
    return [Word(m.group(), m.start(), m.end()) for m in WORD_RE.finditer(text)]


def word_prefixes(text: str, words: list[Word] | None = None) -> list[str]:
    """``x_<i`` for every word ``i``: the text up to the end of word ``i - 1`` ("" for i = 0)."""
    words = split_words(text) if words is None else words
    return [""] + [text[: w.end] for w in words[:-1]]


def first_word(continuation: str, *, ended: bool = False) -> tuple[str, bool]:
    """(first word of ``continuation``, whether it is final).

    A word is final when appending text cannot change it: it is a punctuation mark, or at least
    two characters follow it, or one character follows that cannot join two words (``-``, ``'``,
    ``.``, ``,``). ``ended`` (end of sequence or token budget) makes whatever is there final;
    an ended continuation without a word gives ``""``.
    """
    match = WORD_RE.search(continuation)
    if match is None:
        return "", ended
    word, after = match.group(), len(continuation) - match.end()
    if ended or not (word[-1].isalnum() or word[-1] == "_"):
        return word, True
    if after >= 2 or (after == 1 and continuation[-1] not in _JOINERS):
        return word, True
    return word, False


def is_number(word: str) -> bool:
    """Whether ``word`` is a number such as ``2014``, ``1,000`` or ``3.5``."""
    return _NUMBER.fullmatch(word) is not None


def rouge_tokens(text: str) -> list[str]:
    """ROUGE's tokenization: lowercase runs of ASCII letters and digits."""
    return _ROUGE_TOKEN.findall(text.lower())


def rouge1_recall(candidate: str, reference: str) -> float:
    """ROUGE-1 recall: clipped unigram overlap / reference unigrams (0 for an empty side).

    ``sum_w min(count_cand(w), count_ref(w)) / len(ref)`` on :func:`rouge_tokens`.
    """
    cand, ref = Counter(rouge_tokens(candidate)), rouge_tokens(reference)
    if not ref or not cand:
        return 0.0
    overlap = Counter(ref) & cand
    return sum(overlap.values()) / len(ref)
