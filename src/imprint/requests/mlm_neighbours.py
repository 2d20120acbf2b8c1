"""Masked-LM neighbour generation (Mattern et al. 2023, SoK settings): the model-running half of
the neighbourhood attack, executed as ``neighbours`` requests (see
:meth:`imprint.requests.client.ModelRequests.neighbours`). The attack-side description (dropout on
the swapped position's embedding, top-k candidates per position, the ``ratio`` / ``logp``
rankings) is in :mod:`imprint.attacks.neighbours`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from imprint.backends.models import pick_device
from imprint.data.sample import text_seed
from imprint.errors import ConfigError

# how candidates are ranked across positions: Mattern et al.'s p(c) / (1 - p(x_i)), or log p(c)
RANKINGS = ("ratio", "logp")


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


def model_fingerprint(spec: str) -> str:
    """The content fingerprint of a model spec (its name when it cannot be resolved locally)."""
    from imprint.backends.models import fingerprint_source, resolve_model

    try:
        return fingerprint_source(resolve_model(spec))
    except ConfigError:
        return spec


class MaskedLMNeighbours:
    """Proposes single-token swaps with a transformers masked LM (see the module docstring)."""

    def __init__(self, spec: str, *, device: str = "auto") -> None:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        self.fingerprint = model_fingerprint(spec)  # a Ray worker's replica is checked by it

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
