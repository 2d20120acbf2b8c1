"""SimMIA (Yi and Li 2026, "Membership Inference on LLMs in the Wild"): word-by-word sampling,
embedding similarity and relative aggregation over a non-member prefix; text-only access.

For a text of L words x_1..x_L (regex words, :mod:`imprint.data.words`) and every position
i >= 2, the model gives N samples (default 100) of the next word after x_<i, and N after
P + x_<i, where P joins ``n_shots`` non-member texts (default 7), each followed by ``separator``.
A context's word score is the mean similarity of the samples to the true word,

    s(x_i | ctx) = (1/N) sum_j (cos(E(x_i), E(w_j)) + 1) / 2      (E = all-MiniLM-L6-v2),

and the membership score is

    simmia(x) = -(1 / (L-1)) sum_{i>=2} s(x_i | P + x_<i) / s(x_i | x_<i).

Non-member context pulls a member's predictions away from its memorised continuation more than a
non-member's (the ReCaLL argument), so the ratio is lower for members and minus the mean ratio
is higher for members (higher = member). The mean runs over the L-1 scored positions.
Variants: ``simmia_star`` (SimMIA*) replaces s by the exact-match rate with Laplace smoothing,
(count(w_j == x_i) + 1) / (N + 2); ``exact_numbers=True`` uses that rate for words that are
numbers in the embedding score too (embeddings rate every number as near-identical). A sample
without a word (end of text) has similarity 0.

Sampling: black-box backends (HTTP, vLLM) get one ``sample`` call per prompt P + x_<i with n = N
and a chat instruction asking for the next word only. Local models take the fast path of
:mod:`imprint.requests.next_word` (one pass over x, a batched token tree for multi-token words,
P's KV cache reused), whose sampling law equals generate-per-prefix; both paths tokenise the
prompt P + x_<i as one string. Every distinct word (true or sampled, all texts, both contexts) is
embedded once, in one ``embed`` request.

Two noiseless modes need a local model: ``mode="exact"`` replaces the N samples by the exact
next-word distribution under the same law (branches less likely than ``min_mass`` are not
expanded, so each s is exact to within that dropped mass: 0 enumerates all), and
``mode="greedy_topk"`` weights each top-k first token by its probability and completes it
greedily (cheaper, but not the expectation; it was called ``expected`` before).

Progressive disclosure (the paper's section of that name, Table 8): ``disclosure="text"``
(default) is all of the above; ``"token"`` samples next tokens instead of words, from the second
token of x; ``"logprob"`` weights each unique sampled token's similarity by its model
probability normalised over the unique tokens (Eq. 3 so weighted, then Eq. 4); both need a local
model. ``"prob_ratio"`` (not the paper's) uses s = p(x_t | ctx) from log-prob passes alone, for
backends that only score. See :mod:`imprint.attacks.simmia_disclosure`.

Shots come from the run's ``nonmembers`` pool, else from the evaluation non-members, which then
leave the evaluation (``Preparation.removed_ids``); ``prepare`` must run before scoring, or pass
``prefix=`` to :meth:`SimMIA.score_with_backend`. Texts of fewer than two words score NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import Preparation, RunContext, prepared_field, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.attacks.recall import check_shots
from imprint.attacks.shots import nonmember_shots
from imprint.attacks.simmia_disclosure import (
    DISCLOSURES,
    TOKEN_DISCLOSURES,
    align_tail,
    prob_ratio_scores,
    token_scores,
    token_vocabulary,
)
from imprint.backends.base import LOGPROBS, SAMPLING, Access, Backend
from imprint.data.sample import Sample
from imprint.data.words import first_word, is_number, split_words
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.embed import Embedder
from imprint.requests.kinds import NextWordRequest, Request, SampleRequest, sample_request
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.next_token import NextTokenRequest
from imprint.requests.next_word import MODES, NextWordConfig, WordDist
from imprint.requests.plan import AttackCalls

PREFIX = "simmia"
RENAMED_MODES = {"expected": "greedy_topk"}


def exact_rate(true_word: str, dist: WordDist, n: int) -> float:
    """Laplace-smoothed exact-match rate (count + 1) / (n + 2); weights are rescaled to n."""
    total = sum(dist.values())
    hits = dist.get(true_word, 0.0) * (n / total if total else 0.0)
    return (hits + 1.0) / (n + 2.0)


def embedding_score(true_word: str, dist: WordDist, vectors: dict[str, np.ndarray]) -> float:
    """Weighted mean of (cos + 1) / 2 between the true word and the sampled words, in [0, 1].

    ``vectors`` maps every word (true and sampled) to a unit vector; "" (no word) scores 0.
    """
    total = sum(dist.values())
    if total <= 0:
        return 0.0
    target = vectors[true_word]
    acc = sum(weight * (float(vectors[w] @ target) + 1.0) / 2.0 for w, weight in dist.items() if w)
    return acc / total


def relative_score(s_prefixed: np.ndarray, s_plain: np.ndarray) -> float:
    """-mean_i s(x_i | P + x_<i) / s(x_i | x_<i); arrays of shape (L-1,); higher = member.

    A position whose plain score is 0 (every sample was "no word") has no ratio: it is left out
    of the mean rather than divided by a tiny floor, which would let one position dominate the
    text; NaN when no position has a ratio."""
    plain = np.asarray(s_plain, float)
    defined = plain > 0
    if not defined.any():
        return float("nan")
    return -float(np.mean(np.asarray(s_prefixed, float)[defined] / plain[defined]))


def word_vocabulary(words: Sequence[str], dists: Sequence[WordDist]) -> set[str]:
    """The strings :func:`word_scores` embeds for one text and context: words 2..L and every
    sampled word ("" = no word is never embedded)."""
    return {*words[1:], *(w for d in dists for w in d if w)}


def embed_all(embedder: Embedder, vocab: set[str]) -> dict[str, np.ndarray]:
    """One embedding per distinct string, in one request (the store dedupes across runs)."""
    ordered = sorted(vocab)
    return dict(zip(ordered, embedder.embed(ordered), strict=True)) if ordered else {}


def word_scores(
    words: Sequence[str],
    dists: Sequence[WordDist],
    embedder: Embedder | None,
    *,
    n: int,
    exact_numbers: bool,
    vectors: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(embedding scores, exact-match scores), each of shape (L-1,), for words 2..L.

    ``vectors`` (from :func:`embed_all` over the whole run) is used when given; otherwise this
    text's vocabulary is embedded with ``embedder`` (the per-text way, kept for benchmarks)."""
    targets = list(words[1:])
    if vectors is None:
        if embedder is None:
            raise ConfigError("word_scores needs an embedder or the run's vectors")
        vectors = embed_all(embedder, word_vocabulary(words, dists))
    exact = np.array([exact_rate(t, d, n) for t, d in zip(targets, dists, strict=True)])
    emb = np.array(
        [
            exact[i] if exact_numbers and is_number(t) else embedding_score(t, d, vectors)
            for i, (t, d) in enumerate(zip(targets, dists, strict=True))
        ]
    )
    return emb, exact


@register("simmia")
@dataclass(frozen=True)
class SimMIA(ModelCallAttack):
    takes_held_out: ClassVar[bool] = True
    n_samples: int = 100
    n_shots: int = 7
    separator: str = "\n\n"
    top_k: int = 50
    temperature: float = 1.0
    max_word_tokens: int = 8
    exact_numbers: bool = False
    mode: str = "sample"
    min_mass: float = 1e-4  # mode="exact": next-word branches less likely than this are dropped
    seed: int = 0
    # what the target discloses: "text" words, "token"s, "logprob"s (+ tokens); "prob_ratio"
    disclosure: str = "text"
    # P, the joined non-member shots, filled in by prepare()
    shot_prefix: str | None = prepared_field()

    summary = (
        "-mean next-word similarity ratio, non-member prefix vs none (word sampling); "
        "disclosure=token|logprob: the paper's progressive disclosure (token sampling, "
        "probability-weighted similarity); prob_ratio: p(x_t) ratio, not the paper's"
    )
    paper = "Yi and Li 2026, Membership Inference on LLMs in the Wild (SimMIA)"
    access = Access.BLACK_BOX
    deviations = (
        "Eq. 4 divides by L but sums from the second word; imprint averages over the L - 1 "
        "scored positions (tokens: T - 1) and leaves out a position whose plain score is 0.",
        "Words come from imprint's regex word splitter, not NLTK's word_tokenize (its punkt "
        "data is not available offline).",
        "SimMIA*'s Laplace smoothing is (count + 1) / (N + 2); the paper names Laplace "
        "smoothing without its constants.",
        "disclosure=token|logprob: a true token without embeddable text (whitespace, a byte "
        "piece of a character) uses its exact-match rate and a sampled one has similarity 0; "
        "the paper does not say how such tokens are embedded.",
        "disclosure=logprob: p is the model's untempered full-vocabulary probability (the paper "
        "does not say whether its API's log-probs were tempered; at temperature 1, the default, "
        "the normalised weights are the same); its simmia_star, the same weights on the "
        "indicator with Laplace smoothing, is imprint's (the paper reports SimMIA only).",
        "disclosure=prob_ratio is not the paper's: s = p(x_t | ctx) without sampling or "
        "similarity (a per-token ReCaLL ratio), for backends that only return log-probs.",
    )

    def __post_init__(self) -> None:
        check_shots("simmia", self.n_shots, self.separator)
        if self.mode in RENAMED_MODES:
            raise ConfigError(
                f"simmia mode={self.mode!r} is now mode={RENAMED_MODES[self.mode]!r}: it weights "
                "the top-k first tokens by probability and completes each greedily, which is not "
                "an expectation; for the exact expected next-word distribution use mode='exact'"
            )
        if self.mode not in MODES:
            raise ConfigError(f"simmia mode must be one of {MODES}, got {self.mode!r}")
        if self.disclosure not in DISCLOSURES:
            raise ConfigError(
                f"simmia disclosure must be one of {DISCLOSURES}, got {self.disclosure!r} "
                "(e.g. --param simmia.disclosure=token)"
            )
        if self.disclosure in TOKEN_DISCLOSURES and self.mode == "greedy_topk":
            raise ConfigError(
                f"simmia disclosure={self.disclosure!r} takes mode='sample' or mode='exact': "
                "greedy_topk completes words, and a single token has nothing to complete"
            )
        self.sampling_config()  # validates n_samples, top_k, temperature, max_word_tokens

    def sampling_config(self) -> NextWordConfig:
        return NextWordConfig(
            n=self.n_samples,
            top_k=self.top_k,
            temperature=self.temperature,
            max_word_tokens=self.max_word_tokens,
            mode=self.mode,
            min_mass=self.min_mass,
        )

    def columns(self) -> tuple[str, ...]:
        return ("simmia", "simmia_star")

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        shots = nonmember_shots(samples, run, self.n_shots, attack="simmia")
        prefix = shots.prefix(self.separator)
        return Preparation(
            attack=replace(self, shot_prefix=prefix),
            prefixes={PREFIX: prefix},
            removed_ids=shots.removed_ids,
            reason=f"simmia: {len(shots.samples)} non-member shots from {shots.source}",
        )

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` cannot serve this mode."""
        local = backend.local_model()
        if self.disclosure == "prob_ratio":
            if not backend.supports(LOGPROBS):
                raise CapabilityError(
                    "simmia disclosure='prob_ratio' needs log-probabilities of the text's "
                    f"tokens; {backend!r} only returns text — use disclosure='text'"
                )
            return
        if self.disclosure in TOKEN_DISCLOSURES and local is None:
            extra = " and their log-probabilities" if self.disclosure == "logprob" else ""
            raise CapabilityError(
                f"simmia disclosure={self.disclosure!r} needs the target's tokens of each text "
                f"and one-token draws{extra} after each token prefix (a local model); "
                f"{backend!r} does not disclose them — use disclosure='text'"
                + (" (or 'prob_ratio', not the paper's)" if self.disclosure == "logprob" else "")
            )
        if self.mode != "sample" and local is None:
            raise CapabilityError(
                f"simmia mode={self.mode!r} needs a local model's next-token distribution; "
                f"{backend!r} only returns text — use mode='sample'"
            )
        if not backend.supports(SAMPLING):
            raise CapabilityError(f"simmia needs text generation; {backend!r} cannot sample")
        if local is None:
            backend.text_backend()

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """Per text, without and with the shot prefix P: two log-prob passes (prob_ratio), two
        next-token requests (token laws), two next-word requests (a local target) or a sample
        request per word position (an API); the embeddings of the words or tokens it draws are
        known only from the answers."""
        prefix = self.shot_prefix or ""
        if self.disclosure == "prob_ratio":
            return AttackCalls.of(
                [("target", LogprobRequest(t, p or None)) for p in (None, prefix) for t in texts]
            )
        uncounted = ("embed (of the words or tokens it draws)",)
        out: list[tuple[str, Request]]
        if self.disclosure in TOKEN_DISCLOSURES:
            settings = self._token_settings()
            out = [("target", NextTokenRequest(text=t, prefix=p, **settings))
                   for p in (None, prefix) for t in texts]  # fmt: skip
        elif not target_local:  # one sample request per prompt P + x_<i
            out = [("target", r) for p in ("", prefix) for r in self._remote_requests(texts, p)]
        else:
            c = self.sampling_config()
            out = [
                ("target", NextWordRequest(text=t, prefix=p, n=c.n, top_k=c.top_k,
                                           temperature=c.temperature,
                                           max_word_tokens=c.max_word_tokens, mode=str(c.mode),
                                           seed=self.seed, min_mass=c.min_mass))
                for p in (None, prefix) for t in texts
            ]  # fmt: skip
        return AttackCalls.of(out, uncounted=uncounted)

    def _token_settings(self) -> dict[str, Any]:
        return {
            "n": self.n_samples,
            "top_k": self.top_k,
            "temperature": self.temperature,
            "mode": self.mode,
            "min_mass": self.min_mass,
            "seed": self.seed,
        }

    def score_with_requests(
        self,
        requests: ModelRequests,
        texts: Sequence[str],
        *,
        prefix: str | None = None,
        **kwargs: Any,
    ) -> dict[str, np.ndarray]:
        """Columns ``simmia`` and ``simmia_star``, shape (len(texts),), higher = member. Next
        words are ``next_word`` requests (local fast path) or ``sample`` requests (text-only
        targets); embeddings are ``embed`` requests."""
        prefix = prefix if prefix is not None else self.shot_prefix
        if not prefix:
            raise ConfigError(
                "simmia has no non-member prefix: score with the attack prepare(samples, run) "
                "returns, or pass prefix="
            )
        if self.disclosure == "prob_ratio":
            return self._score_prob_ratio(requests, texts, prefix)
        if self.disclosure in TOKEN_DISCLOSURES:
            return self._score_tokens(requests, texts, prefix)
        plain, prefixed = self.distributions(requests, texts, prefix)
        words = [[w.text for w in split_words(text)] for text in texts]
        vocab = set().union(
            *(word_vocabulary(w, d[t]) for t, w in enumerate(words) for d in (plain, prefixed))
        )
        vectors = embed_all(requests, vocab)  # each distinct word once, in one request
        out = {"simmia": np.full(len(texts), np.nan), "simmia_star": np.full(len(texts), np.nan)}
        for t in range(len(texts)):
            scores = [
                word_scores(
                    words[t],
                    d[t],
                    None,
                    n=self.n_samples,
                    exact_numbers=self.exact_numbers,
                    vectors=vectors,
                )
                for d in (plain, prefixed)
            ]
            out["simmia"][t] = relative_score(scores[1][0], scores[0][0])
            out["simmia_star"][t] = relative_score(scores[1][1], scores[0][1])
        return out

    def _score_prob_ratio(
        self, requests: ModelRequests, texts: Sequence[str], prefix: str
    ) -> dict[str, np.ndarray]:
        """disclosure='prob_ratio': planned log-prob passes without and with P."""
        plain = requests.token_stats("target", texts)
        prefixed = requests.token_stats("target", texts, prefix=prefix)
        pairs = [prob_ratio_scores(a, b) for a, b in zip(plain, prefixed, strict=True)]
        return {
            "simmia": np.array([p[0] for p in pairs], float).reshape(len(texts)),
            "simmia_star": np.array([p[1] for p in pairs], float).reshape(len(texts)),
        }

    def _score_tokens(
        self, requests: ModelRequests, texts: Sequence[str], prefix: str
    ) -> dict[str, np.ndarray]:
        """disclosure='token' or 'logprob': ``next_token`` requests without and with P (one
        forward pass per text and context gives every position's law), ``embed`` requests."""
        settings = self._token_settings()
        laws = [requests.next_tokens("target", texts, p, settings) for p in (None, prefix)]
        vocab = token_vocabulary([*laws[0], *laws[1]])
        vectors = dict(zip(vocab, requests.embed(vocab), strict=True)) if vocab else {}
        out = {"simmia": np.full(len(texts), np.nan), "simmia_star": np.full(len(texts), np.nan)}
        for t in range(len(texts)):
            plain, prefixed = (
                token_scores(
                    law[t],
                    vectors,
                    n=self.n_samples,
                    mode=self.mode,
                    exact_numbers=self.exact_numbers,
                    weighting="logprob" if self.disclosure == "logprob" else "draws",
                )
                for law in laws
            )
            for j, column in enumerate(("simmia", "simmia_star")):
                a, b = align_tail(plain[j], prefixed[j])
                out[column][t] = relative_score(b, a)
        return out

    def distributions(
        self, requests: ModelRequests, texts: Sequence[str], prefix: str
    ) -> tuple[list[list[WordDist]], list[list[WordDist]]]:
        """Next-word weights per text and word position, without and with the prefix P."""
        if requests.local("target") is not None:
            config = self.sampling_config()
            return (
                requests.next_words("target", texts, None, config, seed=self.seed),
                requests.next_words("target", texts, prefix, config, seed=self.seed),
            )
        return (
            self._sample_remote(requests, texts, ""),
            self._sample_remote(requests, texts, prefix),
        )

    def _remote_requests(self, texts: Sequence[str], prefix: str) -> list[SampleRequest]:
        """The ``sample`` requests of :meth:`_sample_remote`: one per prompt P + x_<i."""
        return [
            sample_request(prefix + t[: w.end], self.n_samples, self.max_word_tokens,
                           seed=self.seed + (1 if prefix else 0), temperature=self.temperature,
                           top_k=self.top_k, task="next_word")
            for t in texts
            for w in split_words(t)[:-1]
        ]  # fmt: skip

    def _sample_remote(
        self, requests: ModelRequests, texts: Sequence[str], prefix: str
    ) -> list[list[WordDist]]:
        """One ``sample`` request per prompt P + x_<i of every text."""
        spans = [split_words(t) for t in texts]
        prompts = [prefix + t[: w.end] for t, ws in zip(texts, spans, strict=True) for w in ws[:-1]]
        outputs = requests.sample(
            "target",
            prompts,
            self.n_samples,
            self.max_word_tokens,
            seed=self.seed + (1 if prefix else 0),
            temperature=self.temperature,
            top_k=self.top_k,
            task="next_word",
        )
        result: list[list[WordDist]] = []
        start = 0
        for ws in spans:
            chunk = outputs[start : start + max(len(ws) - 1, 0)]
            start += len(chunk)
            result.append([_count_words(samples) for samples in chunk])
        return result


def _count_words(samples: Sequence[str]) -> WordDist:
    dist: WordDist = {}
    for sample in samples:
        word = first_word(sample, ended=True)[0]
        dist[word] = dist.get(word, 0.0) + 1.0
    return dist
