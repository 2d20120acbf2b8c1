"""N-gram coverage attack (Hallinan et al. 2025): how much of what the model writes after a
prefix of x is copied, in runs of words, from the rest of x. Black-box: generated text only.

The prefix is the first ``floor(prefix_ratio * n)`` units of x (whitespace words; each character
of a script written without spaces, such as Chinese, is one unit; at least one unit on each
side); the model continues it ``n_samples`` times (temperature 1, no top-k filter). Each
generation g is compared with the true suffix s on Unicode words (:func:`coverage_words`: NFKC,
case kept, punctuation marks are words, as the reference code's casual tokenizer makes them):

    m_t          = the longest run of words of g ending at word t that occurs, contiguous, in s
    covered_L(g) = the words of g inside some such run of >= L words
    coverage_L   = |covered_L(g)| / |g|                     (normalise="generation")
    creativity   = sum_{L = creativity_min .. creativity_max} coverage_{max(L, min_ngram)}(g)

and a text's scores aggregate its generations (``max`` by default, or ``mean``):

    ngram_coverage(x)   = agg_j coverage_{min_ngram}(g_j)
    ngram_creativity(x) = agg_j creativity(g_j)

Members are reproduced in longer verbatim runs, so both are higher for members (higher = member;
"creativity" is the authors' sign-flipped Creativity Index of Lu et al. 2024: a sum of coverages,
not of uncovered fractions). ``normalise="reference"`` divides by max(|g|, |s|) and ``"both"`` by
(|g| + max(|g|, |s|)) / 2, the reference code's other two variants; an empty generation covers 0.
A text whose suffix has no word scores NaN (left out of its metrics and counted by the run).

The creativity terms follow the authors' code (``creativity_terms="reference_code"``): their
matched spans are found once, as runs of >= ``min_ngram`` words (compute_ngram_coverage.py), and
the term of each n in compute_creativity_index.py keeps the spans of >= n words among those, so
every n below ``min_ngram`` repeats the ``min_ngram`` term (with the defaults, n = 2 counts the
3-word runs again). ``creativity_terms="per_n"`` computes each n's coverage from its own
definition (runs of >= n words, as Lu et al.'s index counts n-grams of every length).

Defaults: the paper's text was not readable here; they follow the authors' public pipeline
(github.com/shallinan1/NGramCoverageAttack): 20 generations at temperature 1, coverage from
3-grams, creativity over n = 2..12, max over generations. Deviations: words are matched as whole
words (the reference matches detokenised n-grams as substrings of the ASCII-transliterated
suffix, so "cat" could match inside "catalog" and non-Latin text was transliterated); the prefix is
a word fraction (the reference's default prompt is the first sentences, with a word-fraction
option); nucleus sampling (top-p 0.95) is not offered by every backend here, so the full
distribution is sampled. The generation budget
(``max_tokens`` 0) is 2 tokens per suffix unit, at least 8, as the reference's option to
generate as many tokens as the suffix has.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from imprint.attacks.base import check_fraction, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, Access, Backend
from imprint.data.words import split_units, split_words
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.kinds import sample_request
from imprint.requests.plan import AttackCalls

Normalise = Literal["generation", "reference", "both"]
Aggregate = Literal["max", "mean"]
CreativityTerms = Literal["reference_code", "per_n"]
CREATIVITY_TERMS = ("reference_code", "per_n")
MAX_BUDGET = 512  # new tokens per generation at most (the reference's default budget)


def coverage_words(text: str) -> list[str]:
    """The words n-grams are made of: :func:`imprint.data.words.split_words` of the NFKC text
    (letters/digit runs, single punctuation marks, one character of an unspaced script)."""
    return [w.text for w in split_words(unicodedata.normalize("NFKC", text))]


def split_prefix_suffix(text: str, ratio: float) -> tuple[str, str] | None:
    """(prefix, suffix) at unit ``clip(floor(ratio * n), 1, n - 1)``, as written; None when the
    text has fewer than two units (no prefix and suffix to compare)."""
    units = split_units(text)
    if len(units) < 2:
        return None
    k = min(max(1, int(len(units) * ratio)), len(units) - 1)
    return text[: units[k - 1].end], text[units[k].start :].rstrip()


def match_ends(generation: Sequence[str], reference: Sequence[str]) -> np.ndarray:
    """``m[t]`` = the length of the longest run of generation words ending at word t that occurs
    contiguously in ``reference``, shape (len(generation),), int.

    Dynamic programme over rows: run[t, j] = run[t-1, j-1] + 1 when g[t] == r[j], else 0; one
    vectorised row per generation word, memory O(len(reference))."""
    ids: dict[str, int] = {}
    ref = np.array([ids.setdefault(w, len(ids)) for w in reference], dtype=np.int64)
    out = np.zeros(len(generation), dtype=np.int64)
    if not len(ref):
        return out
    previous = np.zeros(len(ref) + 1, dtype=np.int64)  # run[t-1, j-1] at index j
    for t, word in enumerate(generation):
        code = ids.get(word, -1)  # a word absent from the reference matches nowhere
        row = np.where(ref == code, previous[:-1] + 1, 0)
        out[t] = row.max()
        previous[1:] = row
    return out


def covered_count(ends: np.ndarray, min_n: int) -> int:
    """Words inside some matching run of >= ``min_n`` words (``ends`` from :func:`match_ends`)."""
    n = len(ends)
    hits = np.flatnonzero(ends >= min_n)
    if not len(hits):
        return 0
    diff = np.zeros(n + 1, dtype=np.int64)
    np.add.at(diff, hits - ends[hits] + 1, 1)  # each run [t - m_t + 1, t] opens ...
    np.add.at(diff, hits + 1, -1)  # ... and closes after t
    return int((np.cumsum(diff[:n]) > 0).sum())


def _denominator(n_gen: int, n_ref: int, normalise: Normalise) -> float:
    if normalise == "generation":
        return float(n_gen)
    longer = max(n_gen, n_ref)
    return float(longer) if normalise == "reference" else (n_gen + longer) / 2


def coverage(
    generation: Sequence[str],
    reference: Sequence[str],
    min_n: int,
    *,
    normalise: Normalise = "generation",
) -> float:
    """coverage_L of one generation (word lists); 0 for an empty generation."""
    if not generation:
        return 0.0
    ends = match_ends(generation, reference)
    return covered_count(ends, min_n) / _denominator(len(generation), len(reference), normalise)


def creativity(
    generation: Sequence[str],
    reference: Sequence[str],
    low: int,
    high: int,
    *,
    normalise: Normalise = "generation",
    min_run: int = 1,
) -> float:
    """sum_{L = low .. high} coverage_{max(L, min_run)} (higher = more copied); 0 for an empty
    generation. ``min_run`` is the shortest run the authors' spans keep (their ``min_ngram``);
    1 gives each L's coverage from its own definition."""
    if not generation:
        return 0.0
    ends = match_ends(generation, reference)
    denominator = _denominator(len(generation), len(reference), normalise)
    terms = (covered_count(ends, max(n, min_run)) for n in range(low, high + 1))
    return sum(terms) / denominator


@register("ngram_coverage")
@dataclass(frozen=True)
class NGramCoverage(ModelCallAttack):
    n_samples: int = 20
    prefix_ratio: float = 0.5
    min_ngram: int = 3
    creativity_min: int = 2
    creativity_max: int = 12
    creativity_terms: CreativityTerms = "reference_code"
    aggregate: Aggregate = "max"
    normalise: Normalise = "generation"
    max_tokens: int = 0  # 0 = 2 new tokens per suffix unit, at least 8, at most 512
    temperature: float = 1.0
    top_k: int = 0  # 0 = no top-k filter
    seed: int = 0

    summary = (
        "n-gram coverage of the true suffix by generations from the prefix, and its creativity "
        "index (max over 20 generations)"
    )
    paper = (
        "Hallinan et al. 2025, The Surprising Effectiveness of Membership Inference with Simple "
        "N-Gram Coverage (CoLM 2025, arXiv 2508.09603)"
    )
    access = Access.BLACK_BOX
    deviations = (
        "N-grams are matched as whole Unicode words of the suffix; the authors' code matches "
        "detokenised n-grams as substrings of the ASCII-transliterated suffix (so 'cat' can "
        "match inside 'catalog', and non-Latin text is transliterated first).",
        "The prompt is the first prefix_ratio of the text's words; the authors' default prompt "
        "is its first sentences (a word fraction is their option).",
        "The full next-token distribution is sampled (temperature 1, no top-k); the authors use "
        "nucleus sampling (top-p 0.95), which not every backend here offers.",
    )

    def __post_init__(self) -> None:
        check_fraction("ngram_coverage prefix_ratio", self.prefix_ratio)
        if self.n_samples < 1 or self.min_ngram < 1 or self.creativity_min < 1:
            raise ConfigError(
                "ngram_coverage needs n_samples >= 1, min_ngram >= 1 and creativity_min >= 1; got "
                f"{self.n_samples}, {self.min_ngram}, {self.creativity_min}"
            )
        if self.creativity_max < self.creativity_min:
            raise ConfigError(
                f"ngram_coverage creativity_max ({self.creativity_max}) must be >= creativity_min "
                f"({self.creativity_min}): the index sums coverages over n = min .. max"
            )
        if self.creativity_terms not in CREATIVITY_TERMS:
            raise ConfigError(
                f"ngram_coverage creativity_terms must be one of {CREATIVITY_TERMS} (the authors' "
                "spans of >= min_ngram words, or each n's own runs), got "
                f"{self.creativity_terms!r}"
            )
        if self.max_tokens < 0 or self.temperature < 0 or self.top_k < 0:
            raise ConfigError(
                "ngram_coverage needs max_tokens >= 0 (0 = sized to the suffix), temperature >= "
                f"0 and top_k >= 0; got {self.max_tokens}, {self.temperature}, {self.top_k}"
            )

    def columns(self) -> tuple[str, ...]:
        return ("ngram_coverage", "ngram_creativity")

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` cannot generate text."""
        if not backend.supports(SAMPLING):
            raise CapabilityError(
                f"ngram_coverage needs text generation; {backend!r} cannot sample"
            )
        backend.text_backend()

    def text_scores(self, generations: Sequence[str], suffix: str) -> tuple[float, float]:
        """(ngram_coverage, ngram_creativity) of one text from its generations."""
        reference = coverage_words(suffix)
        if not reference:
            return float("nan"), float("nan")
        if not generations:
            raise ConfigError("ngram_coverage needs at least one generation per text")
        words = [coverage_words(g) for g in generations]
        cov = [coverage(w, reference, self.min_ngram, normalise=self.normalise) for w in words]
        min_run = self.min_ngram if self.creativity_terms == "reference_code" else 1
        cre = [
            creativity(
                w,
                reference,
                self.creativity_min,
                self.creativity_max,
                normalise=self.normalise,
                min_run=min_run,
            )
            for w in words
        ]
        agg = np.max if self.aggregate == "max" else np.mean
        return float(agg(cov)), float(agg(cre))

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Columns ``ngram_coverage``, ``ngram_creativity``, each of shape (len(texts),), higher
        = member. Generations are ``sample`` requests (seeded per prompt, stored, counted)."""
        out = {c: np.full(len(texts), np.nan) for c in self.columns()}
        splits: dict[int, tuple[str, str]] = {}  # texts of one unit have no split: NaN
        for i, text in enumerate(texts):
            split = split_prefix_suffix(text, self.prefix_ratio)
            if split is not None:
                splits[i] = split
        groups: dict[int, list[int]] = {}  # one sample() call per token budget
        for i, (_, suffix) in splits.items():
            groups.setdefault(self._budget(suffix), []).append(i)
        for budget, idx in sorted(groups.items()):
            generations = requests.sample(
                "target",
                [splits[i][0] for i in idx],
                self.n_samples,
                budget,
                seed=self.seed,
                temperature=self.temperature,
                top_k=self.top_k,
            )
            for i, gens in zip(idx, generations, strict=True):
                scores = self.text_scores(gens, splits[i][1])
                out["ngram_coverage"][i], out["ngram_creativity"][i] = scores
        return out

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """One ``sample`` request per text of more than one unit, as scoring sends it."""
        out = []
        for text in texts:
            split = split_prefix_suffix(text, self.prefix_ratio)
            if split is not None:  # a text of one unit is not sent
                request = sample_request(split[0], self.n_samples, self._budget(split[1]),
                                         seed=self.seed, temperature=self.temperature,
                                         top_k=self.top_k)  # fmt: skip
                out.append(("target", request))
        return AttackCalls.of(out)

    def _budget(self, suffix: str) -> int:
        if self.max_tokens:
            return self.max_tokens
        return min(MAX_BUDGET, max(8, 2 * len(split_units(suffix))))
