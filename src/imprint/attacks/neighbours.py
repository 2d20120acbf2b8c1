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

Neighbours are cached per text and generator configuration in ``cache_dir()/neighbours.sqlite``
(MLM) and memoised in-process.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from imprint.attacks.augment import text_seed
from imprint.backends.models import cache_dir, fingerprint_source, pick_device, resolve_model
from imprint.data.sample import text_hash
from imprint.errors import ConfigError
from imprint.signals.needs import TextVariant

LEXICAL = "lexical"
NEIGHBOURS_VERSION = "2"  # 2: the ranking is part of the configuration (ratio by default)
# how MLM candidates are ranked across positions: Mattern et al.'s p(c) / (1 - p(x_i)), or log p(c)
RANKINGS = ("ratio", "logp")

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


# -- masked LM ---------------------------------------------------------------------------------
def replacement_scores(logp: np.ndarray, original: int, ranking: str = "ratio") -> np.ndarray:
    """Ranking score of every token as a replacement of ``original`` at one position, shape (V,).

    ``logp`` (V,) is the MLM's log-distribution there. ``ratio``: log p(c) - log(1 - p(original)),
    the log of Mattern et al.'s p(c) / (1 - p(x_i)), with 1 - p(x_i) summed over the other tokens
    (exact even when p(x_i) rounds to 1); ``logp``: log p(c).
    """
    row = np.asarray(logp, dtype=np.float64)
    if ranking == "logp":
        return row.copy()
    if ranking != "ratio":
        raise ConfigError(f"unknown neighbour ranking {ranking!r}; use one of {list(RANKINGS)}")
    others = np.delete(row, original)
    top = others.max() if others.size else -np.inf
    if not np.isfinite(top):  # every other token impossible: no candidate here
        return np.full_like(row, -np.inf)
    rest = top + np.log(np.sum(np.exp(others - top)))
    return row - rest


def rank_candidates(
    logp: np.ndarray,
    positions: Sequence[int],
    ids: Sequence[int],
    word_start: np.ndarray,
    special: set[int],
    *,
    top_k: int,
    ranking: str = "ratio",
) -> list[tuple[float, int, int]]:
    """(score, position, token) of the ``top_k`` candidates at each position, unsorted.

    ``logp`` (len(positions), V): the MLM's log-distribution at each position. A candidate keeps
    the word-start status of the token it replaces and is neither that token nor a special one.
    """
    out = []
    for r, pos in enumerate(positions):
        score = replacement_scores(logp[r], ids[pos], ranking)[: len(word_start)]
        score[word_start != word_start[ids[pos]]] = -np.inf
        score[[ids[pos], *special]] = -np.inf
        best = np.argsort(-score, kind="stable")[:top_k]
        out += [(float(score[c]), pos, int(c)) for c in best if np.isfinite(score[c])]
    return out


class MaskedLMNeighbours:
    """Proposes single-token swaps with a transformers masked LM (see the module docstring)."""

    def __init__(self, spec: str, *, device: str = "auto") -> None:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        location = spec[3:] if spec.startswith("hf:") else spec
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(location)
            self.model = AutoModelForMaskedLM.from_pretrained(location)
        except OSError as err:
            raise ConfigError(
                f"could not load masked LM {spec!r}: {err}. Offline, pass a local "
                "folder saved with save_pretrained, or use mlm=None (lexical)"
            ) from err
        if not getattr(self.tokenizer, "is_fast", False):
            raise ConfigError(f"masked LM {spec!r}: a fast tokenizer (with offsets) is needed")
        self.model.to(pick_device(device)).eval()
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        wordpiece = any(t.startswith("##") for t in vocab)
        self.word_start = np.array(
            [(not t.startswith("##")) if wordpiece else t.startswith(("Ġ", "▁")) for t in vocab]
        )
        self.special = set(self.tokenizer.all_special_ids)
        context = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = min(int(self.tokenizer.model_max_length), int(context) - 2)

    def neighbours(
        self,
        text: str,
        *,
        n: int,
        top_k: int,
        dropout: float,
        seed: int,
        ranking: str = "ratio",
        batch: int = 32,
    ) -> tuple[str, ...]:
        import torch

        enc = self.tokenizer(
            text, return_offsets_mapping=True, truncation=True, max_length=self.max_length
        )
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        positions = [i for i, (a, b) in enumerate(offsets) if b > a and ids[i] not in self.special]
        if not positions:
            return ()
        device = next(self.model.parameters()).device
        gen = torch.Generator().manual_seed(seed ^ (text_seed(text) & 0x7FFFFFFF))
        with torch.no_grad():
            emb = self.model.get_input_embeddings()(torch.tensor([ids], device=device))
            candidates: list[tuple[float, int, int]] = []
            for lo in range(0, len(positions), batch):
                chunk = positions[lo : lo + batch]
                rows = emb.repeat(len(chunk), 1, 1)
                for r, pos in enumerate(chunk):
                    keep = (torch.rand(rows.shape[-1], generator=gen) >= dropout).to(rows)
                    rows[r, pos] = rows[r, pos] * keep / (1.0 - dropout)
                logits = self.model(inputs_embeds=rows).logits
                logp = torch.log_softmax(logits[torch.arange(len(chunk)), chunk].float(), -1)
                candidates += rank_candidates(
                    logp.cpu().numpy(),
                    chunk,
                    ids,
                    self.word_start,
                    self.special,
                    top_k=top_k,
                    ranking=ranking,
                )
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        out: dict[str, None] = {}
        for _, pos, cand in candidates:
            swapped = self._splice(text, offsets[pos], ids[pos], cand)
            if swapped is not None and swapped != text:
                out.setdefault(swapped)
            if len(out) == n:
                break
        return tuple(out)

    def _splice(self, text: str, span: tuple[int, int], old: int, new: int) -> str | None:
        piece = text[span[0] : span[1]]
        word = str(self.tokenizer.decode([new])).strip()
        if not word or word.lower() == str(self.tokenizer.decode([old])).strip().lower():
            return None
        lead = piece[: len(piece) - len(piece.lstrip())]
        return text[: span[0]] + lead + word + text[span[1] :]


_MLMS: dict[str, MaskedLMNeighbours] = {}
_MEMO: dict[tuple[str, str], tuple[str, ...]] = {}


def _config_key(variant: NeighbourVariant) -> str:
    if variant.generator == LEXICAL:
        ident = LEXICAL
    else:
        try:
            ident = fingerprint_source(resolve_model(variant.generator))
        except ConfigError:
            ident = variant.generator
    raw = (
        f"{ident}|{variant.n}|{variant.top_k}|{variant.dropout}|{variant.seed}|"
        f"{variant.ranking}|{NEIGHBOURS_VERSION}"
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _connect() -> sqlite3.Connection:
    path = cache_dir() / "neighbours.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=60)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS neighbours (config TEXT NOT NULL, text TEXT NOT "
        "NULL, data TEXT NOT NULL, PRIMARY KEY (config, text)) WITHOUT ROWID"
    )
    return conn


def generate(
    variant: NeighbourVariant, texts: Sequence[str], *, release: bool = False
) -> list[tuple[str, ...]]:
    """Neighbours of each text: memo, then the on-disk cache, then the generator."""
    key = _config_key(variant)
    missing = list(dict.fromkeys(t for t in texts if (key, t) not in _MEMO))
    if missing and variant.generator == LEXICAL:
        for t in missing:
            _MEMO[key, t] = lexical_neighbours(t, variant.n, seed=variant.seed)
    elif missing:
        with _connect() as conn:
            for t in missing:
                row = conn.execute(
                    "SELECT data FROM neighbours WHERE config=? AND text=?", (key, text_hash(t))
                ).fetchone()
                if row:
                    _MEMO[key, t] = tuple(json.loads(row[0]))
            todo = [t for t in missing if (key, t) not in _MEMO]
            if todo:
                mlm = _MLMS.get(variant.generator) or MaskedLMNeighbours(variant.generator)
                _MLMS[variant.generator] = mlm
                for t in todo:
                    _MEMO[key, t] = mlm.neighbours(
                        t,
                        n=variant.n,
                        top_k=variant.top_k,
                        dropout=variant.dropout,
                        seed=variant.seed,
                        ranking=variant.ranking,
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO neighbours VALUES (?, ?, ?)",
                        (key, text_hash(t), json.dumps(_MEMO[key, t])),
                    )
        conn.close()
    if release:
        _MLMS.pop(variant.generator, None)
    return [_MEMO[key, t] for t in texts]


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
        return generate(self, [text])[0]
