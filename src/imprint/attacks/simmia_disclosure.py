"""SimMIA's token- and log-prob "progressive disclosure" (imprint's reading; see below).

The SimMIA paper is not available offline and its project page does not define the term, so
imprint implements the reading of its own design notes: the same relative score, computed as the
target discloses progressively more than text.

- ``token``: positions are the target's tokens x_t of x (x tokenised on its own, so positions
  agree with and without the prefix P). At each position the target discloses next tokens after
  [P +] x_<t (``n_samples`` draws, or the exact law with ``mode="exact"``), compared to x_t:
  SimMIA* by exact match (token id), s* = (N q_t + 1) / (N + 2) with q_t the sampling probability
  of x_t under top-k and temperature (mode exact; the expected Laplace rate) or the drawn
  fraction (mode sample); SimMIA by the embedding similarity (cos + 1) / 2 of the token strings.
  A true token with no embeddable text (whitespace only, or a piece of a multi-byte character
  that decodes to U+FFFD) uses its exact-match rate, as ``exact_numbers`` does for numbers;
  such a disclosed token matches only itself.
- ``logprob``: the target discloses log-probabilities; s(x_t | ctx) = p(x_t | ctx), and

      simmia = -mean_t p(x_t | P + x_<t) / p(x_t | x_<t),
      simmia_star = -mean_t [log p(x_t | P + x_<t) - log p(x_t | x_<t)],

  the log-ratio variant: one position where p(x_t | x_<t) is tiny cannot dominate the text,
  and it is minus the log of the geometric-mean ratio (a per-token ReCaLL).

Both keep SimMIA's aggregation -mean_t s(x_t | P + x_<t) / s(x_t | x_<t): higher = member.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.data.words import is_number

DISCLOSURES = ("text", "token", "logprob")


def aligned_logp(plain: Any, prefixed: Any) -> tuple[np.ndarray, np.ndarray]:
    """log p of the tokens both passes scored (float64, shape (T,)), plain then prefixed.

    With no start token the plain pass cannot score x's first token while the prefixed pass
    can, so the two are aligned on their common last tokens."""
    n = min(len(plain.logp), len(prefixed.logp))
    if n == 0:
        return np.zeros(0), np.zeros(0)
    return (
        np.asarray(plain.logp[len(plain.logp) - n :], np.float64),
        np.asarray(prefixed.logp[len(prefixed.logp) - n :], np.float64),
    )


def logprob_scores(plain: Any, prefixed: Any) -> tuple[float, float]:
    """(simmia, simmia_star) from the TokenStats of x without and with P; NaN with no token."""
    a, b = aligned_logp(plain, prefixed)
    if a.size == 0:
        return float("nan"), float("nan")
    diff = b - a  # log [p(x_t | P + x_<t) / p(x_t | x_<t)], never 0/0 even where p underflows
    return -float(np.mean(np.exp(diff))), -float(np.mean(diff))


def embeddable(token: str) -> bool:
    """Whether a token's text means something to a sentence embedder."""
    return bool(token.strip()) and "\ufffd" not in token


def token_scores(
    law: dict[str, Any],
    vectors: dict[str, np.ndarray],
    *,
    n: int,
    mode: str,
    exact_numbers: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(embedding scores, exact-match scores), shape (T,), of one text under one context.

    ``law`` is a ``next_token`` result; ``vectors`` maps stripped token strings to unit vectors.
    The exact-match score is the Laplace rate (N h + 1) / (N + 2), h = q_t (exact mode) or the
    drawn fraction (sample mode: the weights are counts summing to N)."""
    strings = law["strings"]
    emb, exact = [], []
    for true, q, dist in zip(law["ids"], law["q"], law["dists"], strict=True):
        total = float(sum(dist.values()))
        hit = dist.get(str(true), 0.0) / n if mode == "sample" else q
        rate = (n * hit + 1.0) / (n + 2.0)
        exact.append(rate)
        text = strings[str(true)]
        if not embeddable(text) or (exact_numbers and is_number(text.strip())):
            emb.append(rate)
            continue
        target = vectors[text.strip()]
        acc = sum(
            w * (float(vectors[strings[t].strip()] @ target) + 1.0) / 2.0
            for t, w in dist.items()
            if embeddable(strings[t])
        )
        emb.append(acc / total if total > 0 else 0.0)
    return np.asarray(emb, float), np.asarray(exact, float)


def token_vocabulary(laws: Sequence[dict[str, Any]]) -> list[str]:
    """Every stripped embeddable token string the laws mention, sorted (one embed call)."""
    return sorted({s.strip() for law in laws for s in law["strings"].values() if embeddable(s)})


def align_tail(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The common last positions of two per-position arrays (see :func:`aligned_logp`)."""
    n = min(len(a), len(b))
    return a[len(a) - n :], b[len(b) - n :]
