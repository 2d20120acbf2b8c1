"""Per-token statistics that need the target's and the reference models' full next-token
distributions at once (token-level InfoRMIA): a request kind over a :class:`ModelGroup`.

For each scored token x_t of a text (the tokens a log-prob pass scores: after the start token,
or from the second token without one), with p the target's next-token distribution and
q = (1/K) sum_r q_r the mixture of the K reference models' (each softened by ``temperature``):

- ``target_logp``: log p(x_t | x_<t), ``mix_logp``: log q(x_t | x_<t) (natural logs);
- ``kl``: KL(q || p) = sum_v q(v) (log q(v) - log p(v)), over the whole vocabulary;
- ``ids`` and ``pieces``: the token ids and their text, so a report can show which tokens.

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

__all__ = ["ModelGroup", "PairTokensRequest", "pair_token_stats"]


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
        return [_one(backend, r.text, r.temperature) for r in batch]


def _ids(model: Any, text: str) -> list[int]:
    return [*model.start_ids, *model.encode(text)]


def _one(group: ModelGroup, text: str, temperature: float) -> dict[str, list[Any]]:
    import torch

    target = group.target.local_model()
    refs = [r.local_model() for r in group.refs]
    ids = _ids(target, text)
    for ref, name in zip(refs, group.names, strict=True):
        if _ids(ref, text) != ids:
            raise ConfigError(
                f"reference model {name!r} tokenises a text differently from the target "
                f"({text[:40]!r}...); token-level InfoRMIA compares the same tokens: use "
                "reference models with the target's tokenizer"
            )
    limit = min(m.max_length for m in [target, *refs])
    if len(ids) > limit:
        raise ConfigError(
            f"a text of {len(ids)} tokens exceeds the smallest model context ({limit}); "
            "token-level InfoRMIA scores a text in one window: truncate texts (--truncate N)"
        )
    if len(ids) < 2:
        raise ConfigError(f"text {text[:40]!r} has no token to score (one token, no start token)")
    with torch.no_grad():
        tensor = torch.tensor([ids], device=target.device)
        logits_p = target.model(input_ids=tensor).logits[0, :-1].float()
        logits_q = [r.model(input_ids=tensor.to(r.device)).logits[0, :-1].float() for r in refs]
        stats = pair_token_stats(logits_p, logits_q, torch.tensor(ids[1:]), temperature)
    scored = ids[1:]  # position p predicts ids[p + 1]
    pieces = [target.tokenizer.decode([i]) for i in scored]
    return {"ids": scored, "pieces": pieces, **{k: v.tolist() for k, v in stats.items()}}


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
