"""Next-token laws at every token position of a text, for SimMIA's token-level disclosures.

A :class:`NextTokenRequest` asks, for every token x_t of ``text`` from the second on (tokenised on
its own, as the log-prob planner tokenises it, so positions agree with and without a prefix;
SimMIA's Eq. 4 starts at the second word, the token disclosures at the second token), what the
model discloses when asked for one token after [start token +] [P +] x_<t under top-k and
temperature sampling. One forward pass over the whole sequence serves every position; the
next-token law at t is the softmax of the top-k logits / temperature (the law ``generate``
samples from).

Per position the result keeps the true token's sampling probability q_t (exact, whatever the
mode) and the disclosed tokens with weights:

- ``sample``: ``n`` draws from the law (multinomial counts, seeded by the request), the same law
  as ``n`` one-token ``generate`` calls;
- ``exact``: the law itself, tokens of probability below ``min_mass`` left out (their mass is
  ``dropped``), so an expectation of a quantity in [0, 1] is off by at most that mass.

Each disclosed token v also keeps log p(v | ctx), the model's own log-probability (full
vocabulary, no top-k, no temperature: what an API's log-probs disclose), for the log-prob
disclosure (SimMIA's "Progressive Disclosure": sim weighted by these probabilities).

Tokens are keyed by id (two byte tokens of one multi-byte character both decode to U+FFFD but
are different tokens); ``strings`` maps each id to its decoded text for embeddings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.errors import ConfigError
from imprint.requests.kinds import Request, require_local

TOKEN_MODES = ("sample", "exact")
ROW_CHUNK = 256  # positions per vocabulary projection: bounds memory on 262k vocabularies


@dataclass(frozen=True)
class NextTokenRequest(Request):
    """Next-token law at every token position of ``text`` after ``prefix`` (see module doc).

    Result: ``{"ids": [x_t], "q": [q_t], "dists": [{id: weight}], "logp": [{id: log p}],
    "dropped": [mass], "strings": {id: text}}``, lists of one entry per scored position: the
    tokens of x from index ``start`` (0-based; 1 = from the second token, as Eq. 4)."""

    kind: ClassVar[str] = "next_token"
    text: str
    prefix: str | None
    n: int
    top_k: int
    temperature: float
    mode: str
    min_mass: float
    seed: int
    start: int = 1

    def __post_init__(self) -> None:
        if self.start < 1:
            raise ConfigError(
                f"a next-token request scores from token index start >= 1, got {self.start}"
            )
        if self.mode not in TOKEN_MODES:
            raise ConfigError(
                f"next-token mode must be one of {TOKEN_MODES}, got {self.mode!r} "
                "(greedy_topk completes words; one token has nothing to complete)"
            )
        if self.n < 1 or self.top_k < 0 or self.temperature <= 0:
            raise ConfigError(
                "a next-token request needs n >= 1, top_k >= 0 (0 = whole vocabulary) and "
                f"temperature > 0; got n={self.n}, top_k={self.top_k}, "
                f"temperature={self.temperature}"
            )

    batch_size: ClassVar[int] = 4

    def size(self) -> int:
        return len(self.text)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        local = require_local(backend, "next-token laws")
        return [token_laws(local, r) for r in batch]

    def rng(self) -> np.random.Generator:
        """The draws of this request, fixed by its seed, prefix and text (batch-independent)."""
        key = f"{self.seed}\x00{self.prefix or ''}\x00{self.text}"
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def context_ids(hf: Any, prefix: str | None) -> list[int]:
    """The tokens before x: the backend's start token(s), then P's tokens."""
    return [*hf.start_ids, *(hf.encode(prefix) if prefix else [])]


def check_fits(hf: Any, texts: list[str], prefix: str | None) -> None:
    """Refuse, before any forward, a context plus text longer than the model's context."""
    limit = hf.max_length
    if not limit:
        return
    size = len(context_ids(hf, prefix))
    for text in texts:
        n = len(hf.encode(text))
        if size + n > limit:
            raise ConfigError(
                f"simmia token-level disclosure: start token + prefix ({size} tokens) + text ({n} "
                f"tokens) exceeds the model context ({limit}); truncate texts (--truncate N) or "
                f"use fewer shots (--param simmia.n_shots=3) (text starts {text[:40]!r})"
            )


def token_laws(hf: Any, request: NextTokenRequest) -> dict[str, Any]:
    """Answer ``request`` with the local transformers backend ``hf`` (one forward pass)."""
    import torch

    ids = hf.encode(request.text)
    first = request.start  # >= 1: x_1 is never scored, so it always has a context
    out: dict[str, Any] = {
        "ids": [],
        "q": [],
        "dists": [],
        "logp": [],
        "dropped": [],
        "strings": {},
    }
    if len(ids) <= first:
        return out
    with torch.no_grad():
        # row j predicts x_j; P's KV cache is computed once for every text after it
        rows = hf.hidden_predicting(request.prefix, ids, first)
        targets = ids[first:]
        rng = request.rng()
        vocab = int(hf.model.config.vocab_size)
        for start in range(0, len(targets), ROW_CHUNK):
            logits = hf.head(rows[start : start + ROW_CHUNK]).float()[:, :vocab]
            log_z = torch.logsumexp(logits, dim=-1)
            laws = _laws(logits, vocab, request)
            chunk = targets[start : start + ROW_CHUNK]
            for r, ((top, probs), true) in enumerate(zip(laws, chunk, strict=True)):
                _add_position(out, request, top, probs, int(true), rng)
                shown = [int(t) for t in out["dists"][-1]]
                values = (logits[r, shown].double() - log_z[r].double()).tolist() if shown else []
                out["logp"].append(dict(zip(map(str, shown), values, strict=True)))
    strings = out["strings"]
    for token in {*out["ids"], *(int(t) for d in out["dists"] for t in d)}:
        strings[str(token)] = str(hf.tokenizer.decode([token], skip_special_tokens=False))
    return out


def _laws(logits: Any, vocab: int, request: NextTokenRequest) -> list[tuple[Any, Any]]:
    """(token ids, probabilities) of each row's sampling law: top-k, then temperature."""
    import torch

    logits = logits[:, :vocab] / request.temperature
    k = min(request.top_k or vocab, vocab)
    values, top = torch.topk(logits, k, dim=-1)
    probs = torch.softmax(values.double(), dim=-1).cpu().numpy()
    top_np = top.cpu().numpy()
    return [(top_np[r], probs[r] / probs[r].sum()) for r in range(len(top_np))]


def _add_position(
    out: dict[str, Any],
    request: NextTokenRequest,
    top: np.ndarray,
    probs: np.ndarray,
    true: int,
    rng: np.random.Generator,
) -> None:
    """Append one position's true token, its exact q_t and the disclosed tokens' weights."""
    where = np.flatnonzero(top == true)
    q = float(probs[where[0]]) if where.size else 0.0  # outside the top k: never sampled
    if request.mode == "sample":
        counts = rng.multinomial(request.n, probs)
        keep = np.flatnonzero(counts)
        weights, dropped = counts[keep].astype(float), 0.0
    else:
        keep = np.flatnonzero(probs >= request.min_mass)
        weights, dropped = probs[keep], float(1.0 - probs[keep].sum())
    out["ids"].append(true)
    out["q"].append(q)
    out["dists"].append({str(int(top[j])): float(w) for j, w in zip(keep, weights, strict=True)})
    out["dropped"].append(max(dropped, 0.0))
