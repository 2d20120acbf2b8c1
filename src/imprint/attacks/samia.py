"""SaMIA (Kaneko et al. 2024): sampling-based pseudo-likelihood from generated text only.

The prefix is the first ``floor(prefix_ratio * n_words)`` whitespace words of x (default 50 %;
each character of a script written without spaces, such as Chinese, counts as a word); the model
continues it ``n_samples`` times (default 10, top-k 50, temperature 1) and each continuation is
compared with the true suffix by ROUGE-1 recall (clipped unigram overlap / reference unigrams, on
NFKC-normalised, case-folded Unicode words; see :func:`imprint.data.words.rouge_tokens`):

    samia(x)      = (1/n) sum_j ROUGE1(c_j, suffix)
    samia_zlib(x) = (1/n) sum_j ROUGE1(c_j, suffix) * zlib_bytes(c_j)

Members are reproduced more often, so both are higher for members (higher = member). The zlib
variant (the paper's SaMIA*zlib) weights each candidate by its zlib-compressed length, which
down-weights degenerate, repetitive candidates.

Deviations from the reference code, following the paper instead: every text gets its own
``n_samples`` candidates and its own average (no single shared candidate, no averaging across a
batch); prefix and suffix are split at the same word index (the reference splits the suffix at a
nominal length). Candidates are capped at ``max_tokens`` new tokens (0 = 3 tokens per suffix
word) where the reference generates up to 1,024 tokens in total.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from imprint.attacks.base import check_fraction, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, Access, Backend
from imprint.data.words import rouge1_recall, rouge_tokens, split_units
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.kinds import sample_request
from imprint.requests.plan import AttackCalls


def split_prefix(text: str, ratio: float) -> tuple[str, str]:
    """(prefix, reference suffix): the text up to the end of its first ``floor(ratio * n)`` words
    (:func:`imprint.data.words.split_units`) and the text from the next word on, as written."""
    units = split_units(text)
    k = int(len(units) * ratio)
    prefix = text[: units[k - 1].end] if k > 0 else ""
    suffix = text[units[k].start :].rstrip() if k < len(units) else ""
    return prefix, suffix


def zlib_size(text: str) -> int:
    """Bytes of the zlib-compressed, stripped UTF-8 text."""
    return len(zlib.compress(text.strip().encode("utf-8")))


def samia_scores(candidates: Sequence[str], suffix: str) -> tuple[float, float]:
    """(samia, samia_zlib) of one text from its candidates; see the module docstring."""
    if not candidates:
        raise ConfigError("SaMIA needs at least one candidate continuation per text")
    if not rouge_tokens(suffix):  # nothing to recall (e.g. emoji only): no score, not a 0
        return float("nan"), float("nan")
    rouge = np.array([rouge1_recall(c, suffix) for c in candidates])
    sizes = np.array([zlib_size(c) for c in candidates], dtype=float)
    return float(rouge.mean()), float((rouge * sizes).mean())


@register("samia")
@dataclass(frozen=True)
class SaMIA(ModelCallAttack):
    n_samples: int = 10
    prefix_ratio: float = 0.5
    max_tokens: int = 0  # 0 = 3 new tokens per reference suffix word
    top_k: int = 50
    temperature: float = 1.0
    seed: int = 0

    summary = "ROUGE-1 recall of sampled continuations of the first half (and x zlib size)"
    paper = "Kaneko et al. 2024, Sampling-based Pseudo-Likelihood for Membership Inference Attacks"
    access = Access.BLACK_BOX

    def __post_init__(self) -> None:
        check_fraction("samia prefix_ratio", self.prefix_ratio)
        if self.prefix_ratio == 1:
            raise ConfigError("samia prefix_ratio must leave a suffix to compare: use < 1")
        if self.n_samples < 1 or self.max_tokens < 0 or self.top_k < 0 or self.temperature < 0:
            raise ConfigError(
                "samia needs n_samples >= 1, max_tokens >= 0, top_k >= 0, temperature >= 0; "
                f"got {self.n_samples}, {self.max_tokens}, {self.top_k}, {self.temperature}"
            )

    def columns(self) -> tuple[str, ...]:
        return ("samia", "samia_zlib")

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` cannot generate text."""
        if not backend.supports(SAMPLING):
            raise CapabilityError(f"samia needs text generation; {backend!r} cannot sample")
        backend.text_backend()

    def _budget(self, suffix: str) -> int:
        return self.max_tokens or max(8, 3 * len(split_units(suffix)))

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """One ``sample`` request per text, as :meth:`score_with_requests` sends it."""
        out = []
        for text in texts:
            prompt, suffix = split_prefix(text, self.prefix_ratio)
            budget = self._budget(suffix)
            out.append(("target", sample_request(prompt, self.n_samples, budget,
                                                 seed=self.seed + budget,
                                                 temperature=self.temperature,
                                                 top_k=self.top_k)))  # fmt: skip
        return AttackCalls.of(out)

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Columns ``samia``, ``samia_zlib``, each of shape (len(texts),), higher = member.
        Continuations are ``sample`` requests (seeded per prompt, stored, counted)."""
        splits = [split_prefix(t, self.prefix_ratio) for t in texts]
        out = {"samia": np.zeros(len(texts)), "samia_zlib": np.zeros(len(texts))}
        groups: dict[int, list[int]] = {}  # one sample() call per token budget
        for i, (_, suffix) in enumerate(splits):
            groups.setdefault(self._budget(suffix), []).append(i)
        for budget, idx in sorted(groups.items()):
            candidates = requests.sample(
                "target",
                [splits[i][0] for i in idx],
                self.n_samples,
                budget,
                seed=self.seed + budget,
                temperature=self.temperature,
                top_k=self.top_k,
            )
            for i, cands in zip(idx, candidates, strict=True):
                out["samia"][i], out["samia_zlib"][i] = samia_scores(cands, splits[i][1])
        return out
