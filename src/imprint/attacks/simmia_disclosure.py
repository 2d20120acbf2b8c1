"""SimMIA's progressive disclosure (Yi and Li 2026, section "Progressive Disclosure", Table 8).

When the target discloses more than text, SimMIA adapts (the paper's two steps, both here):

- ``token`` (tokenization visible): token-by-token instead of word-by-word sampling. Positions
  are the target's tokens x_t of x from the second on (x tokenised on its own, so positions agree
  with and without the prefix P; Eq. 4 starts at the second word). At each position the target
  discloses ``n_samples`` one-token draws after [P +] x_<t (or the exact top-k/temperature law
  with ``mode="exact"``). SimMIA: Eq. 3 over the draws, s = mean_j sim(x_t, v_j), sim = (cos + 1)
  / 2 of the token strings' embeddings (Eq. 2); SimMIA*: Eq. 1 with Laplace smoothing,
  s* = (N h_t + 1) / (N + 2), h_t = the drawn fraction of x_t (sample mode) or its sampling
  probability q_t (exact mode: the expected rate).
- ``logprob`` (log-probabilities visible as well): the same draws, with sim "weighted by the
  ground-truth model probabilities (normalized across unique next tokens)":

      s(x_t | ctx) = sum_{v in U} [p(v | ctx) / sum_{u in U} p(u | ctx)] sim(x_t, v),

  U the unique drawn tokens (exact mode: the law's tokens of probability >= ``min_mass``) and
  p the model's own, untempered, full-vocabulary probability. SimMIA* (the paper reports none
  with log-probs): the same weights on the indicator, (N w_t + 1) / (N + 2), w_t the weight of
  x_t (0 when it was not drawn).

Every variant aggregates by Eq. 4 relative to the non-member prefix,
simmia = -mean_t s(x_t | P + x_<t) / s(x_t | x_<t) (higher = member).

A true token with no embeddable text (whitespace only, or a piece of a multi-byte character that
decodes to U+FFFD) uses its exact-match rate, as ``exact_numbers`` does for numbers; a disclosed
token without embeddable text has similarity 0 (it matches only itself, by id).

``prob_ratio`` is NOT the paper's: s(x_t | ctx) = p(x_t | ctx) from log-prob passes alone (no
draws, no similarity), simmia = -mean_t p(x_t | P + x_<t) / p(x_t | x_<t), a per-token ReCaLL
ratio that one tiny p(x_t | x_<t) can dominate (unbounded), and simmia_star = -mean_t of its log.
It needs only a backend that scores log-probs (an API, vLLM), where ``logprob`` needs draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.data.words import is_number

DISCLOSURES = ("text", "token", "logprob", "prob_ratio")
TOKEN_DISCLOSURES = ("token", "logprob")  # answered by next_token requests


def aligned_logp(plain: Any, prefixed: Any) -> tuple[np.ndarray, np.ndarray]:
    """log p of x_2 .. x_T under both passes (float64, shape (T-1,)), plain then prefixed.

    The prefixed pass scores every token of x (P precedes x_1); the plain pass scores x_1 only
    after a start token. Both are cut to their last T - 1 tokens: x_1 is never scored (Eq. 4)."""
    n = min(len(plain.logp), len(prefixed.logp) - 1)
    if n <= 0:
        return np.zeros(0), np.zeros(0)
    return (
        np.asarray(plain.logp[len(plain.logp) - n :], np.float64),
        np.asarray(prefixed.logp[len(prefixed.logp) - n :], np.float64),
    )


def prob_ratio_scores(plain: Any, prefixed: Any) -> tuple[float, float]:
    """(simmia, simmia_star) of ``prob_ratio`` from the TokenStats of x without and with P;
    NaN with no scored token."""
    a, b = aligned_logp(plain, prefixed)
    if a.size == 0:
        return float("nan"), float("nan")
    diff = b - a  # log [p(x_t | P + x_<t) / p(x_t | x_<t)], never 0/0 even where p underflows
    return -float(np.mean(np.exp(diff))), -float(np.mean(diff))


def embeddable(token: str) -> bool:
    """Whether a token's text means something to a sentence embedder."""
    return bool(token.strip()) and "\ufffd" not in token


def _similarity(
    strings: dict[str, str], vectors: dict[str, np.ndarray], true: str, v: str
) -> float:
    """sim(x_t, v) = (cos + 1) / 2 (Eq. 2) of two token ids' texts; 0 for a text-less ``v``."""
    if not embeddable(strings[v]):
        return 0.0
    return (float(vectors[strings[v].strip()] @ vectors[strings[true].strip()]) + 1.0) / 2.0


def token_scores(
    law: dict[str, Any],
    vectors: dict[str, np.ndarray],
    *,
    n: int,
    mode: str,
    exact_numbers: bool,
    weighting: str = "draws",
) -> tuple[np.ndarray, np.ndarray]:
    """(embedding scores, exact-match scores), shape (T-1,), of one text under one context.

    ``law`` is a ``next_token`` result; ``vectors`` maps stripped token strings to unit vectors.
    ``weighting="draws"`` (disclosure ``token``): each disclosed token weighs its draw count
    (sample mode) or sampling probability (exact mode). ``weighting="logprob"`` (disclosure
    ``logprob``): each unique disclosed token weighs p(v | ctx) / sum_u p(u | ctx)."""
    strings = law["strings"]
    emb, exact = [], []
    for i, (true, q, dist) in enumerate(zip(law["ids"], law["q"], law["dists"], strict=True)):
        true = str(true)
        if weighting == "logprob":
            weights = _normalised(law["logp"][i])
            hit = weights.get(true, 0.0)
        else:
            total = float(sum(dist.values()))
            weights = {t: w / total for t, w in dist.items()} if total > 0 else {}
            hit = dist.get(true, 0.0) / n if mode == "sample" else q
        rate = (n * hit + 1.0) / (n + 2.0)
        exact.append(rate)
        text = strings[true]
        if not embeddable(text) or (exact_numbers and is_number(text.strip())):
            emb.append(rate)
            continue
        emb.append(sum(w * _similarity(strings, vectors, true, t) for t, w in weights.items()))
    return np.asarray(emb, float), np.asarray(exact, float)


def _normalised(logp: dict[str, float]) -> dict[str, float]:
    """p(v) / sum_u p(u) over the unique disclosed tokens, from their log-probabilities."""
    if not logp:
        return {}
    values = np.fromiter(logp.values(), float, len(logp))
    weights = np.exp(values - values.max())
    return dict(zip(logp, (weights / weights.sum()).tolist(), strict=True))


def token_vocabulary(laws: Sequence[dict[str, Any]]) -> list[str]:
    """Every stripped embeddable token string the laws mention, sorted (one embed call)."""
    return sorted({s.strip() for law in laws for s in law["strings"].values() if embeddable(s)})


def align_tail(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The common last positions of two per-position arrays."""
    n = min(len(a), len(b))
    return a[len(a) - n :], b[len(b) - n :]
