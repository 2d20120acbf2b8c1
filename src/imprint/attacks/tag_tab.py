"""Tag&Tab (Antebi et al. 2025): the log-likelihood of a text's keywords only.

*Tag*: split the text into sentences; in each, rank the words by "entropy" -p(w) log2 p(w),
where p(w) is the word's frequency in the language (wordfreq, as the authors' code; a word
wordfreq does not know has p = 0 and entropy 0). Every word has p < 1/e, where -p log p grows
with p, so the lowest are the sentence's rarest words: names, numbers, rare terms, the words a
model can only predict if it has seen the text. As the authors' code (helpers.py and
attacks.py): a word is looked up as its key, lower-cased with ASCII punctuation removed (so
"well-known" is looked up as "wellknown", usually unknown, entropy 0: hyphenated words are
merged and nearly always picked); the ``pool`` = 10 lowest-entropy word *occurrences* are taken
(their ``--top_k_entropy``; a word repeated in the sentence fills several places), their
distinct keys ranked again, and the first ``k`` are the keywords (their ``tag_tab_AT_k``). So a
repeated rare word can leave fewer than ``k`` keywords. ``pool=0`` takes the ``k`` rarest
distinct words, ``lookup="as_written"`` looks each word up as written. *Tab*: the target's
log-probabilities of
the tokens that spell those words; the score is their mean (higher = member). Two columns:
``tag_tab`` takes every token of each keyword, ``tag_tab_first`` only its first token (the
authors' code reports both).

Defaults follow the authors' code and README: k = 4, sentences of 7 to 40 words. Where this
differs, and why:

- words and sentences come from imprint's Unicode word splitter (data/words.py; a sentence ends
  at . ! ? and their CJK, Arabic and Devanagari forms) instead of spaCy, whose models cannot be
  installed from the package registries; spaCy's named entities, which the authors add to the
  keywords, are left out for the same reason;
- a sentence longer than 40 words is cut into pieces of 40 (the authors drop it, which would
  leave an unpunctuated text, or a Chinese one, where each character is a word, with nothing);
  pieces shorter than 7 words are skipped, and a text with no piece of 7 words is taken whole;
- each keyword's first occurrence in its sentence is looked up through the tokenizer's
  character offsets (the authors search the first matching substring anywhere in the text);
- equally rare keys keep their order in the text (the authors rank a Python set: hash order).

The keywords' tokens come from the target's plain log-prob pass (shared with loss, Min-K%), so
the attack adds no forward pass; it needs a local model with a fast tokenizer (for the offsets)
and the ``wordfreq`` package (``pip install 'llm-imprint[tagtab]'``). A text with no word has no
score: NaN, with a warning.
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from imprint.attacks.base import RunContext, register
from imprint.attacks.ez_mia import warn_undefined
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import Backend, TokenStats
from imprint.data.words import Word, split_words
from imprint.errors import CapabilityError, ConfigError, MissingDependencyError
from imprint.requests.client import ModelRequests
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls

SENTENCE_ENDS = frozenset(".!?。！？؟।॥…")
Lookup = Literal["stripped", "as_written"]
LOOKUPS = ("stripped", "as_written")
_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)


def sentences(text: str, *, min_words: int, max_words: int) -> list[list[Word]]:
    """The words (punctuation left out) of each sentence of at least ``min_words`` words, long
    ones cut into pieces of ``max_words``; the whole text when no piece is long enough."""
    found: list[list[Word]] = []
    current: list[Word] = []
    everything: list[Word] = []
    for word in [*split_words(text), None]:
        if word is None or word.text in SENTENCE_ENDS:
            for start in range(0, len(current), max_words):
                piece = current[start : start + max_words]
                if len(piece) >= min_words:
                    found.append(piece)
            current = []
        elif any(c.isalnum() for c in word.text):
            current.append(word)
            everything.append(word)
    return found or ([everything] if everything else [])


def keyword_key(word: str, lookup: Lookup = "stripped") -> str:
    """The form a word is ranked and deduplicated by: lower-cased, and for ``"stripped"`` (the
    authors' ``_normalize_token``) without ASCII punctuation or whitespace."""
    if lookup == "as_written":
        return word.casefold()
    return "".join(word.lower().translate(_ASCII_PUNCTUATION).split())


def keywords(
    sentence: list[Word],
    k: int,
    frequency: Callable[[str], float],
    *,
    pool: int = 10,
    lookup: Lookup = "stripped",
) -> list[Word]:
    """The sentence's keywords, each at its first occurrence (see the module doc): the ``pool``
    occurrences of lowest -p log2 p (p = ``frequency`` of the key; 0 = every occurrence), their
    distinct keys, the first ``k`` of those; ties keep text order."""
    entropy: dict[str, float] = {}
    first: dict[str, Word] = {}
    occurrences: list[str] = []
    for word in sentence:
        key = keyword_key(word.text, lookup)
        if key:
            first.setdefault(key, word)
            occurrences.append(key)
            if key not in entropy:
                entropy[key] = word_entropy(frequency(key))
    ranked = sorted(occurrences, key=entropy.__getitem__)  # stable: ties in text order
    chosen = dict.fromkeys(ranked[:pool] if pool else ranked)
    return [first[key] for key in list(chosen)[:k]]


def word_entropy(p: float) -> float:
    """-p log2 p, 0 for p = 0 (a word the frequency table does not know)."""
    return -p * math.log2(p) if p > 0 else 0.0


def keyword_logps(
    words: list[Word], offsets: list[tuple[int, int]], stats: TokenStats
) -> tuple[list[float], list[float]]:
    """Log-probs of every token, and of the first token, that spells each word.

    ``offsets`` are the character spans of the text's tokens (all of them, as the tokenizer
    gives them); the scored tokens in ``stats`` are the last ``len(stats)`` of those (without a
    start token the first token has no context and is not scored)."""
    skipped = len(offsets) - len(stats)
    every: list[float] = []
    first: list[float] = []
    for word in words:
        hits = [
            i - skipped
            for i, (a, b) in enumerate(offsets)
            if a < word.end and b > word.start and i >= skipped
        ]
        if hits:
            every.extend(float(stats.logp[i]) for i in hits)
            first.append(float(stats.logp[hits[0]]))
    return every, first


@functools.cache
def wordfreq_table(language: str) -> Callable[[str], float]:
    """p(word) in ``language`` from wordfreq; teaches the install when it is missing."""
    try:
        from wordfreq import word_frequency
    except ImportError as err:
        raise MissingDependencyError("wordfreq", "tagtab") from err

    def frequency(word: str) -> float:
        try:
            return float(word_frequency(word, language))
        except (ImportError, LookupError, ValueError) as err:  # e.g. zh needs jieba
            raise ConfigError(
                f"tag_tab: wordfreq cannot look up {word!r} in language {language!r} ({err}); "
                "install what it names or choose another --param tag_tab.language"
            ) from err

    return functools.lru_cache(maxsize=200_000)(frequency)


@register("tag_tab")
@dataclass(frozen=True)
class TagTab(ModelCallAttack):
    k: int = 4
    min_sentence_words: int = 7
    max_sentence_words: int = 40
    language: str = "en"
    pool: int = 10  # the authors' --top_k_entropy: occurrences the k keywords are drawn from
    lookup: Lookup = "stripped"

    summary = (
        "mean log-likelihood of each sentence's k=4 rarest words (wordfreq), all tokens and "
        "first token (local model; pip install 'llm-imprint[tagtab]')"
    )
    paper = (
        "Antebi et al. 2025, Tag&Tab: Pretraining Data Detection in Large Language Models Using "
        "Keyword-Based Membership Inference Attack, arXiv 2501.08454"
    )

    deviations = (
        "Words and sentences come from imprint's Unicode word splitter (sentences end at . ! ? "
        "and their CJK, Arabic and Devanagari forms) instead of spaCy, whose models the package "
        "registries do not offer; spaCy's named entities, which the authors add to the "
        "keywords, are left out for the same reason.",
        "A sentence longer than max_sentence_words is cut into pieces (pieces shorter than "
        "min_sentence_words skipped, a text with none taken whole); the authors drop it.",
        "A keyword's log-probs are read at its first occurrence in its sentence, through the "
        "tokenizer's character offsets; the authors take the first match of the normalised "
        "word anywhere in the concatenated normalised tokens.",
        "Equally rare keys keep their order in the text; the authors rank a Python set, whose "
        "set order follows string hashing (PYTHONHASHSEED) and changes between runs.",
    )

    def __post_init__(self) -> None:
        if self.pool < 0 or self.lookup not in LOOKUPS:
            raise ConfigError(
                f"tag_tab pool must be >= 0 (0 = every word) and lookup one of {LOOKUPS}; got "
                f"{self.pool} and {self.lookup!r}"
            )
        if self.k < 1 or self.min_sentence_words < 1:
            raise ConfigError(
                f"tag_tab k and min_sentence_words must be >= 1, got {self.k} and "
                f"{self.min_sentence_words}"
            )
        if self.max_sentence_words < self.min_sentence_words:
            raise ConfigError(
                f"tag_tab max_sentence_words ({self.max_sentence_words}) must be >= "
                f"min_sentence_words ({self.min_sentence_words})"
            )

    def columns(self) -> tuple[str, ...]:
        return (self.name, f"{self.name}_first")

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        try:
            import wordfreq  # noqa: F401
        except ImportError:
            return "wordfreq is not installed (pip install 'llm-imprint[tagtab]')"
        return None

    def check_backend(self, backend: Backend) -> None:
        local = backend.local_model()
        if local is None or not getattr(local.tokenizer, "is_fast", False):
            raise CapabilityError(
                "tag_tab maps keywords to tokens through character offsets, so it needs a local "
                "model with a fast (Rust) tokenizer"
            )
        wordfreq_table(self.language)  # a missing wordfreq fails here, before any work

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """One log-prob pass per text."""
        return AttackCalls.of([("target", LogprobRequest(t)) for t in texts])

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Columns ``tag_tab`` and ``tag_tab_first``, shape (len(texts),), higher = member."""
        local = requests.local("target")
        self.check_backend(requests.backend("target"))
        frequency = wordfreq_table(self.language)
        every, first = [], []
        for text, stats in zip(texts, requests.token_stats("target", texts), strict=True):
            words = [
                w
                for sentence in sentences(
                    text, min_words=self.min_sentence_words, max_words=self.max_sentence_words
                )
                for w in keywords(sentence, self.k, frequency, pool=self.pool, lookup=self.lookup)
            ]
            all_tokens, first_tokens = keyword_logps(words, _offsets(local, text, stats), stats)
            every.append(np.mean(all_tokens) if all_tokens else np.nan)
            first.append(np.mean(first_tokens) if first_tokens else np.nan)
        out = {self.name: np.asarray(every, float), f"{self.name}_first": np.asarray(first, float)}
        n_nan = int(np.isnan(out[self.name]).sum())
        warn_undefined(self.name, self.name, n_nan, len(texts), "no keyword with a scored token")
        return out


def _offsets(local: Any, text: str, stats: TokenStats) -> list[tuple[int, int]]:
    """Character spans of ``text``'s tokens, checked to be the tokens the pass scored."""
    enc = local.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    scored = stats.token_ids.tolist()
    if len(scored) > len(ids) or ids[len(ids) - len(scored) :] != scored:
        raise ConfigError(
            f"tag_tab: the tokenizer's offsets do not match the scored tokens of text "
            f"{text[:40]!r} ({len(ids)} vs {len(scored)} tokens); is the signal cache from "
            "another tokenizer?"
        )
    return [(int(a), int(b)) for a, b in enc["offset_mapping"]]
