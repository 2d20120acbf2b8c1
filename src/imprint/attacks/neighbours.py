"""Neighbour texts for the neighbourhood attack: single-token swaps proposed by a masked LM, or an
offline lexical scheme that needs no weights.

MLM generator (Mattern et al. 2023, with the SoK settings): for every token of x (word-start
tokens replaced only by word-start tokens, so word boundaries stay put) the MLM sees x with
dropout (p = ``dropout``, default 0.7) applied to that position's input embedding instead of a mask
token, so it still half-sees the word it replaces; its ``top_k`` (10) most likely other tokens there
are candidates, and the ``n`` (50) best candidates over all positions become neighbours, each x
with exactly one token swapped. "Best" (``ranking``) is, by default, Mattern et al.'s
p(c) / (1 - p(x_i)): the probability of c given that the token at i changes, so a position where
the MLM is sure of the original word does not lose to one where it is unsure; ``ranking="logp"``
ranks by the raw log p(c) instead (this module's behaviour before, which favours uncertain
positions). Texts longer than the MLM's context are considered up to its last position (later
tokens are kept, not swapped). Needs a fast tokenizer (offsets).

Lexical generator (``"lexical"``, the offline default): single-word swaps from a fixed table of
close substitutes (determiners, prepositions, conjunctions, auxiliaries, pronouns, months) and
numbers moved by one, keeping case and punctuation; up to ``n`` swaps in an order seeded by the
text's hash; a text with none swaps its first two words. Unlike the MLM it knows no context, so its
neighbours are rougher and fewer (about two per function word), but they are deterministic and
need nothing beyond this file.

MLM neighbours are ``neighbours`` requests of the run (:mod:`imprint.requests`): generated once
per text and configuration, stored under the MLM's content fingerprint and handed to the attack as
prepared state (``NeighbourVariant.table``); the MLM itself runs in
:mod:`imprint.requests.mlm_neighbours`. Lexical neighbours are computed on the fly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from imprint.data.sample import text_seed
from imprint.errors import ConfigError
from imprint.requests.mlm_neighbours import RANKINGS
from imprint.signals.needs import TextVariant

LEXICAL = "lexical"
NEIGHBOURS_VERSION = "2"  # 2: the ranking is part of the configuration (ratio by default)

_GROUPS = [
    "the a this",
    "a the one",
    "an the",
    "this that the",
    "that this",
    "these those the",
    "those these the",
    "some many several",
    "many several some",
    "several some many",
    "each every",
    "every each",
    "in on at",
    "on in upon",
    "at in near",
    "of for from",
    "for of to",
    "from of",
    "to toward into",
    "into to",
    "with without",
    "by with",
    "and or",
    "or and",
    "but yet",
    "yet but",
    "is was",
    "was is",
    "are were",
    "were are",
    "has had",
    "had has",
    "have had",
    "will would",
    "would will",
    "can could",
    "could can",
    "may might",
    "might may",
    "he she",
    "she he",
    "his her",
    "him her",
    "they we",
    "we they",
    "their our",
    "our their",
    "them us",
    "first second",
    "second first",
    "before after",
    "after before",
    "new old",
    "large small",
    "small large",
    "early late",
    "late early",
]
SUBSTITUTES: dict[str, tuple[str, ...]] = {g.split()[0]: tuple(g.split()[1:]) for g in _GROUPS}
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_WORD = re.compile(r"\S+")
_CORE = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)


def _match_case(word: str, template: str) -> str:
    if len(template) > 1 and template.isupper():
        return word.upper()
    return word[:1].upper() + word[1:] if template[:1].isupper() else word


def lexical_candidates(core: str) -> list[str]:
    """Close substitutes of one word (punctuation already stripped), in a fixed order."""
    low = core.lower()
    if core.isdigit():
        value = int(core)
        return [str(v).zfill(len(core)) for v in (value + 1, value - 1) if v >= 0]
    if low in _MONTHS and core[:1].isupper():  # "May" the month, "may" the verb
        i = _MONTHS.index(low)
        out = [_MONTHS[(i + 1) % 12], _MONTHS[(i - 1) % 12]]
    else:
        out = list(SUBSTITUTES.get(low, ()))
    return [_match_case(w, core) for w in out]


def lexical_neighbours(text: str, n: int, *, seed: int = 0) -> tuple[str, ...]:
    """Up to ``n`` single-word swaps of ``text`` (see the module docstring)."""
    swaps = []
    words = list(_WORD.finditer(text))
    for m in words:
        lead, core, trail = _CORE.match(m.group()).groups()  # type: ignore[union-attr]
        start = m.start() + len(lead)
        swaps += [(start, start + len(core), c) for c in lexical_candidates(core)]
    if not swaps and len(words) >= 2:
        a, b = words[0], words[1]
        return (
            text[: a.start()] + b.group() + text[a.end() : b.start()] + a.group() + text[b.end() :],
        )
    order = np.random.default_rng([seed, text_seed(text)]).permutation(len(swaps))
    out: dict[str, None] = {}
    for i in order:
        start, end, word = swaps[i]
        out.setdefault(text[:start] + word + text[end:])
        if len(out) == n:
            break
    return tuple(out)


def generator_config(variant: NeighbourVariant) -> str:
    """The MLM generator's settings as canonical text (part of each neighbours request's key)."""
    return json.dumps(
        {
            "n": variant.n,
            "top_k": variant.top_k,
            "dropout": variant.dropout,
            "ranking": variant.ranking,
            "version": NEIGHBOURS_VERSION,
        },
        sort_keys=True,
    )


@dataclass(frozen=True)
class NeighbourVariant(TextVariant):
    """The neighbours of a text, from ``generator``: ``"lexical"`` or a masked-LM folder/hub id."""

    name: str = "neighbours"
    generator: str = LEXICAL
    n: int = 50
    top_k: int = 10
    dropout: float = 0.7
    seed: int = 0
    ranking: str = "ratio"  # MLM only; the lexical scheme has no probabilities to rank by
    # MLM neighbours by text, prepared by the run's requests (see Neighborhood.prepare)
    table: Mapping[str, tuple[str, ...]] | None = field(
        default=None, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.n < 1 or self.top_k < 1:
            raise ConfigError(f"neighbours n and top_k must be >= 1, got {self.n}, {self.top_k}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"neighbours dropout must be in [0, 1), got {self.dropout}")
        if self.ranking not in RANKINGS:
            raise ConfigError(
                f"neighbours ranking must be one of {list(RANKINGS)}, got {self.ranking!r} "
                "(ratio: Mattern et al.'s p(c) / (1 - p(original)); logp: log p(c))"
            )

    def apply(self, text: str) -> tuple[str, ...]:
        if self.generator == LEXICAL:
            return lexical_neighbours(text, self.n, seed=self.seed)
        if self.table is None or text not in self.table:
            raise ConfigError(
                f"no masked-LM neighbours prepared for a text ({text[:40]!r}...): generate them "
                "with Neighborhood.prepare(samples, run) and score with the attack it returns"
            )
        return self.table[text]
