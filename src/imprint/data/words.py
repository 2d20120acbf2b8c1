"""Words for black-box attacks: a Unicode word tokenizer (no downloaded data) and ROUGE-1.

Words are numbers with inner separators (``1,000``, ``3.5``), runs of letters, digits and
combining marks joined by hyphens or apostrophes (``twenty-first``, ``storm's``, ``Kraków``,
``हिन्दी``), single characters of scripts written without spaces between words (Chinese,
Japanese kana, Thai, Lao, Khmer, Myanmar: one character and its marks is one word, as ROUGE does
for Chinese), or single punctuation marks. A text's word ``i`` keeps its character span, so the
prefix ``x_<i`` is the text exactly as written up to the end of word ``i - 1`` (no trailing
whitespace: BPE tokenizers attach the space to the next token).

The first word of a generated continuation is *final* once more text cannot change it; samplers
stop generating there (:func:`first_word`). A continuation that ends inside a character (a token
holding only some of its UTF-8 bytes decodes to U+FFFD) is never final there.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

# scripts written without spaces between words: each character is a word
_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3005-\u3007\u3021-\u3029\u3038-\u303b"  # ideographic iteration marks and numerals
    "\u3040-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003ffff"  # CJK ideographs, extensions B and later
)
_JOINERS = frozenset("-'’.,")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
INCOMPLETE = "\ufffd"  # what a decoder shows for a character whose bytes are not all there


@functools.cache
def _marks() -> str:
    """A regex class body of every combining mark (categories Mn, Mc, Me): Python's ``\\w``
    leaves them out, which would cut Devanagari, Thai or decomposed Latin words apart."""
    ranges: list[str] = []
    start: int | None = None
    for cp in [*range(0x20000), *range(0xE0100, 0xE01F0)]:
        mark = unicodedata.category(chr(cp)).startswith("M")
        if mark and start is None:
            start = cp
        elif not mark and start is not None:
            ranges.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(ranges)


@functools.cache
def _word_re() -> re.Pattern[str]:
    m, u = _marks(), _UNSPACED
    letters = rf"(?:(?![{u}])[\w{m}])+"
    return re.compile(
        rf"(?P<num>\d+(?:[.,]\d+)+)|(?P<cjk>[{u}][{m}]*)|(?P<word>{letters}(?:[-'’]{letters})*)"
        rf"|(?P<punct>[^\w\s{m}])"
    )


@functools.cache
def _rouge_re() -> re.Pattern[str]:
    """ROUGE's unigrams: runs of letters, digits and marks (no underscore), or one character of
    an unspaced script."""
    m, u = _marks(), _UNSPACED
    return re.compile(rf"[{u}][{m}]*|(?:(?![{u}])(?:[^\W_]|[{m}]))+")


@functools.cache
def _unit_re() -> re.Pattern[str]:
    m, u = _marks(), _UNSPACED
    return re.compile(rf"[{u}][{m}]*|(?:(?![{u}])\S)+")


@dataclass(frozen=True)
class Word:
    """One word of a text and its character span ``text[start:end]``."""

    text: str
    start: int
    end: int


def split_words(text: str) -> list[Word]:
    """The words of ``text`` in order, with their spans."""
    return [Word(m.group(), m.start(), m.end()) for m in _word_re().finditer(text)]


def split_units(text: str) -> list[Word]:
    """Whitespace-separated words, except that each character of an unspaced script is one unit:
    the length measure of SaMIA's prefix (a Chinese sentence has no spaces, yet many words)."""
    return [Word(m.group(), m.start(), m.end()) for m in _unit_re().finditer(text)]


def word_prefixes(text: str, words: list[Word] | None = None) -> list[str]:
    """``x_<i`` for every word ``i``: the text up to the end of word ``i - 1`` ("" for i = 0)."""
    words = split_words(text) if words is None else words
    return [""] + [text[: w.end] for w in words[:-1]]


def first_word(continuation: str, *, ended: bool = False) -> tuple[str, bool]:
    """(first word of ``continuation``, whether it is final).

    A word is final when appending text cannot change it: it is a punctuation mark, or a
    character of an unspaced script followed by anything (a combining mark would have joined
    it), or at least two characters follow it, or one character follows that cannot join two
    words (``-``, ``'``, ``.``, ``,``). ``ended`` (end of sequence or token budget) makes whatever
    is there final; an ended continuation without a word gives ``""``. Trailing U+FFFD (bytes
    of a character still to come) count as text not there yet: the character they start may
    extend the word, so nothing before them is final on their account.
    """
    complete = continuation.rstrip(INCOMPLETE)
    match = _word_re().search(complete)
    if match is None:
        return "", ended
    word, after = match.group(), len(complete) - match.end()
    if ended or match.lastgroup == "punct":
        return word, True
    if match.lastgroup == "cjk":
        return word, after >= 1
    if after >= 2 or (after == 1 and complete[-1] not in _JOINERS):
        return word, True
    return word, False


def is_number(word: str) -> bool:
    """Whether ``word`` is a number such as ``2014``, ``1,000`` or ``3.5``."""
    return _NUMBER.fullmatch(word) is not None


def rouge_tokens(text: str) -> list[str]:
    """ROUGE's unigrams, Unicode-aware: NFKC-normalised, case-folded runs of letters, digits and
    combining marks (so ``Kraków`` stays one word), each character of an unspaced script
    (Chinese, Japanese, Thai...) on its own; punctuation and underscores are dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _rouge_re().findall(folded)


def rouge1_recall(candidate: str, reference: str) -> float:
    """ROUGE-1 recall: clipped unigram overlap / reference unigrams (0 for an empty side).

    ``sum_w min(count_cand(w), count_ref(w)) / len(ref)`` on :func:`rouge_tokens`.
    """
    cand, ref = Counter(rouge_tokens(candidate)), rouge_tokens(reference)
    if not ref or not cand:
        return 0.0
    overlap = Counter(ref) & cand
    return sum(overlap.values()) / len(ref)
