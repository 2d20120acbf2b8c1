"""Per-token statistics that need the target's and the reference models' full next-token
distributions at once (token-level InfoRMIA): a request kind over a :class:`ModelGroup`.

For each scored token x_t of a text (the tokens a log-prob pass scores: after the start token,
or from the second token without one), with p the target's next-token distribution and
q = (1/K) sum_r q_r the mixture of the K reference models' (each softened by ``temperature``):

- ``target_logp``: log p(x_t | x_<t), ``mix_logp``: log q(x_t | x_<t) (natural logs);
- ``kl``: KL(q || p) = sum_v q(v) (log q(v) - log p(v)), over the whole vocabulary;
- ``ids`` and ``pieces``: the token ids and the text each adds (:func:`token_pieces`: the pieces
  join into the text, a multi-byte character at the token that completes it), so a report can
  show which tokens.

The KL needs both distributions over the vocabulary at the same position, which no single-model
pass keeps (a log-prob pass reduces each model's distribution to a few numbers per token), so
the group runs all models on the text and reduces on the device. Every model must tokenise the
text the same way (a game's references share the target's tokenizer); a text longer than the
smallest context is refused (truncate it). Results are stored like every request, under the
group's fingerprint (the members' fingerprints, in order).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.errors import CapabilityError, ConfigError
from imprint.requests.kinds import Request

__all__ = ["ModelGroup", "PairTokensRequest", "pair_token_stats", "token_pieces"]


class ModelGroup:
    """A target and its reference models, run together (local Hugging Face models only)."""

    def __init__(self, target: Any, refs: Sequence[Any], names: Sequence[str]) -> None:
        self.target = target
        self.refs = list(refs)
        self.names = list(names)

    @property
    def fingerprint(self) -> str:
        parts = [str(self.target.fingerprint), *(str(r.fingerprint) for r in self.refs)]
        return "group:" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()

    def supports(self, capability: Any) -> bool:  # the runner never asks; kept for symmetry
        return False


@dataclass(frozen=True)
class PairTokensRequest(Request):
    """The per-token statistics above for ``text`` at ``temperature``. Result: a dict of lists
    (``ids``, ``pieces``, ``target_logp``, ``mix_logp``, ``kl``), each of length T."""

    kind: ClassVar[str] = "pair_tokens"
    batch_size: ClassVar[int] = 8
    text: str
    temperature: float = 1.0

    def size(self) -> int:
        return len(self.text)

    @classmethod
    def check(cls, role: str, backend: Any, requests: Sequence[Request]) -> None:
        for model, name in [
            (backend.target, "target"),
            *zip(backend.refs, backend.names, strict=True),
        ]:
            if model.local_model() is None:
                raise CapabilityError(
                    f"model {name!r} is not a local Hugging Face model; token-level InfoRMIA "
                    "needs every model's full next-token distribution (use a local folder, "
                    "an alias, gguf:PATH or game:DIR)"
                )

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        """The batch's results: texts of one temperature share each model's forwards (longest
        first, right-padded, masked), within :data:`FORWARD_TOKENS` per forward."""
        ids = [_checked_ids(backend, r.text) for r in batch]
        out: list[Any] = [None] * len(batch)
        by_temperature: dict[float, list[int]] = {}
        for i, r in enumerate(batch):
            by_temperature.setdefault(float(r.temperature), []).append(i)
        for temperature, rows in by_temperature.items():
            for chunk in _chunks(rows, ids):
                results = _forward(backend, [ids[i] for i in chunk], temperature)
                for i, res in zip(chunk, results, strict=True):
                    out[i] = res
        return out


#: most padded tokens (rows x width) in one forward of one model: the activations' memory, as
#: the log-prob pass's CPU budget; the logits never exist for the whole batch (see _forward)
FORWARD_TOKENS = 2048
#: positions whose full-vocabulary logits are reduced at once (K + 1 models, float64)
POSITION_CHUNK = 128


def _ids(model: Any, text: str) -> list[int]:
    return [*model.start_ids, *model.encode(text)]


def _checked_ids(group: ModelGroup, text: str) -> list[int]:
    """The text's ids (start token first), the same for every model, within every context."""
    target = group.target.local_model()
    ids = _ids(target, text)
    for ref, name in zip(group.refs, group.names, strict=True):
        if _ids(ref.local_model(), text) != ids:
            raise ConfigError(
                f"reference model {name!r} tokenises a text differently from the target "
                f"({text[:40]!r}...); token-level InfoRMIA compares the same tokens: use "
                "reference models with the target's tokenizer"
            )
    limit = min(m.local_model().max_length for m in [group.target, *group.refs])
    if len(ids) > limit:
        raise ConfigError(
            f"text {text[:40]!r}... has {len(ids)} tokens, more than the smallest model context "
            f"({limit}); token-level InfoRMIA scores a text in one window: truncate texts "
            "(--truncate N)"
        )
    if len(ids) < 2:
        raise ConfigError(f"text {text[:40]!r} has no token to score (one token, no start token)")
    return ids


def _chunks(rows: list[int], ids: list[list[int]]) -> list[list[int]]:
    """``rows`` longest first, grouped so that rows x longest <= FORWARD_TOKENS."""
    out: list[list[int]] = []
    for i in sorted(rows, key=lambda i: -len(ids[i])):  # stable: ties keep request order
        if out and (len(out[-1]) + 1) * len(ids[out[-1][0]]) <= FORWARD_TOKENS:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _hidden(model: Any, input_ids: Any, mask: Any, flat: Any) -> Any:
    """The last hidden states of the predicting positions ``flat`` (indices into the flattened
    rows x width), shape (N, d): the output head runs later, a few positions at a time."""
    import torch

    base = getattr(model.model, model.model.base_model_prefix)
    with torch.no_grad(), model.attention():
        hidden = base(
            input_ids=input_ids.to(model.device),
            attention_mask=mask.to(model.device),
            use_cache=False,
        ).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat.to(model.device))


def _forward(group: ModelGroup, rows: list[list[int]], temperature: float) -> list[dict[str, Any]]:
    """One forward per model over the right-padded ``rows``; position p of a row predicts its
    token p + 1 (pads sit after every real token, so the causal mask keeps them out of sight)."""
    import numpy as np
    import torch

    target = group.target.local_model()
    refs = [r.local_model() for r in group.refs]
    width = len(rows[0])
    input_ids = np.full((len(rows), width), target.pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, row in enumerate(rows):
        input_ids[r, : len(row)], mask[r, : len(row)] = row, 1
    predicting = np.arange(width)[None, :] < (mask.sum(1) - 1)[:, None]
    flat = torch.from_numpy(np.flatnonzero(predicting))
    targets = torch.from_numpy(np.concatenate([row[1:] for row in rows]))
    ids_t, mask_t = torch.from_numpy(input_ids), torch.from_numpy(mask)
    hidden = [_hidden(m, ids_t, mask_t, flat) for m in [target, *refs]]
    parts: dict[str, list[np.ndarray]] = {"target_logp": [], "mix_logp": [], "kl": []}
    with torch.no_grad():
        for a in range(0, len(targets), POSITION_CHUNK):
            logits = [
                m.head(h[a : a + POSITION_CHUNK]).float()
                for m, h in zip([target, *refs], hidden, strict=True)
            ]
            stats = pair_token_stats(
                logits[0], logits[1:], targets[a : a + POSITION_CHUNK], temperature
            )
            for k, v in stats.items():
                parts[k].append(v)
    joined = {k: np.concatenate(v) for k, v in parts.items()}
    bounds = np.cumsum([0, *(len(row) - 1 for row in rows)])
    out = []
    for row, lo, hi in zip(rows, bounds[:-1], bounds[1:], strict=True):
        scored = row[1:]
        pieces = token_pieces(target.tokenizer, row)[1:]
        out.append(
            {"ids": scored, "pieces": pieces, **{k: v[lo:hi].tolist() for k, v in joined.items()}}
        )
    return out


#: tokens decoded before each one to complete its characters (UTF-8: at most 4 bytes a character)
_PIECE_CONTEXT = 8


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The text each token adds, so that the pieces join into the decoded text: a character
    split over several byte tokens (CJK, Arabic, emoji in a byte-level BPE) is the piece of the
    token that completes it, the tokens before it add "" (decoded alone they are U+FFFD)."""

    def decode(part: Sequence[int]) -> str:
        text = tokenizer.decode(list(part), clean_up_tokenization_spaces=False)
        return str(text).rstrip("\ufffd")  # an incomplete character is not text yet

    pieces = []
    for i, token in enumerate(ids):
        lo = max(0, i - _PIECE_CONTEXT)
        before, now = decode(ids[lo:i]), decode(ids[lo : i + 1])
        if now.startswith(before):
            pieces.append(now[len(before) :])
        else:  # a tokenizer that rewrites earlier text when a token follows
            pieces.append(str(tokenizer.decode([token])))
    return pieces


def pair_token_stats(
    logits_p: Any, logits_q: Sequence[Any], targets: Any, temperature: float = 1.0
) -> dict[str, np.ndarray]:
    """(T, V) target logits, K (T, V) reference logits and (T,) target ids -> per-token
    ``target_logp``, ``mix_logp`` (log of the mean reference probability) and ``kl`` =
    KL(mixture || target), arrays of shape (T,), natural logs."""
    import math

    import torch

    if not logits_q:
        raise ConfigError("token-level InfoRMIA needs at least one reference model")
    width = min(logits_p.shape[-1], *(q.shape[-1] for q in logits_q))  # padded vocab rows
    log_p = torch.log_softmax(logits_p[..., :width].double() / temperature, dim=-1)
    stacked = torch.stack(
        [torch.log_softmax(q[..., :width].double() / temperature, dim=-1) for q in logits_q]
    )
    log_q = torch.logsumexp(stacked, dim=0) - math.log(len(logits_q))
    idx = targets.to(log_p.device).long().unsqueeze(-1)
    kl = (log_q.exp() * (log_q - log_p)).sum(-1).clamp_min(0.0)
    return {
        "target_logp": log_p.gather(-1, idx).squeeze(-1).cpu().numpy(),
        "mix_logp": log_q.gather(-1, idx).squeeze(-1).cpu().numpy(),
        "kl": kl.cpu().numpy(),
    }
