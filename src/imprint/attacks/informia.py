"""Token-level InfoRMIA (Tao and Shokri 2025, "(Token-Level) InfoRMIA: Stronger Membership
Inference and Memorization Assessment for LLMs", arXiv 2510.05582, ICLR 2026).

InfoRMIA replaces RMIA's count (the fraction of population texts z that x's likelihood ratio
beats) by a continuous, Bayes-factor-like statistic in bits: the information x's likelihood
ratio carries, log LR(x) = log p(x|theta)/p(x), minus what a population draw z ~ p(z) carries on
average, E_z log LR(z) = -KL(p(z) || p(z|theta)):

    InfoRMIA(x) = log2 p(x|theta)/p(x) + KL(p(z) || p(z|theta))       [bits]

Token level (the paper's LLM part): at each scored token x_t, the population is the next token
z ~ p_ref(. | x_<t) itself, so the expectation is exact over the vocabulary:

    s_t = [log p(x_t | x_<t, theta) - log q(x_t | x_<t) + KL(q(.|x_<t) || p(.|x_<t, theta))] / ln 2

with q the reference distribution: the mean of the K reference models' next-token
distributions (one reference model in the paper's MIMIR setting; the mixture mirrors RMIA's
p(x) = mean over reference models). s_t is 0 for a token the target predicts no differently
from the reference, large for a token it has learnt; the sequence score is the mean of s_t
(bits per token). Higher = member. The per-token s_t are kept (:meth:`InfoRMIA.token_scores`),
with the tokens, so a report can show which tokens were memorised: a run writes them to
``token_scores.parquet`` (a row per sample, token and column: id, label, position, token_id,
token, score; :func:`imprint.scoring.write_token_scores`).

``temperature`` divides every model's logits before the softmax (1: none). Reference models
come from ``--references`` (a game's) or ``--ref NAME=SPEC``; every model must be a local
Hugging Face model with the target's tokenizer. The full distributions come from one
``pair_tokens`` request per text (:mod:`imprint.requests.pair_tokens`), stored like every
request.

Sources: the paper's text was not reachable from this environment. The formula above is the
statistic as the paper's published summaries state it (log p(x|theta)/p(x) in bits and the
correction D_KL(p(z) || p(z|theta))); the token-level form, with the reference's next-token
distribution as the population, is the one a public implementation uses (Soreseth/Masterthesis,
``TokenLevelInfoRMIA``), against which ``benchmarks/bench_authors_b.py`` checks this one. The
authors' code, found later in the first author's MIMIR fork (taojiashu/mimir,
``mimir/attacks/info_rmia.py``, ``InfoRMIAToken``), computes the same per-token statistic in
nats with one reference model (MIMIR's orientation: negated, lower = member); with several it
averages the references' log-probabilities (the token's, and the next-token law as exp of the
mean log-probability, not renormalised), where imprint averages their probabilities (a
mixture, RMIA's Pr(x) = the mean over reference models): the mixture is a distribution, so
the correction is a KL divergence and E_z log LR(z) = -KL holds, which an unnormalised
geometric mean does not give. ``benchmarks/bench_authors_b.py`` measures the difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import RunContext, ScoringInputs, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import Backend
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.pair_tokens import ModelGroup, PairTokensRequest
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import SignalSet

__all__ = ["InfoRMIA", "informia_tokens", "sequence_score"]

AGGREGATES = ("mean", "max")


def informia_tokens(target_logp: Any, mix_logp: Any, kl: Any) -> np.ndarray:
    """Per-token InfoRMIA in bits: (log p - log q + KL(q || p)) / ln 2, shapes (T,)."""
    t, q, d = (np.asarray(v, dtype=np.float64) for v in (target_logp, mix_logp, kl))
    return (t - q + d) / math.log(2.0)


def sequence_score(tokens: np.ndarray, aggregate: str = "mean") -> float:
    """The text's score from its per-token scores: mean (default) or max; NaN when empty."""
    if tokens.size == 0:
        return float("nan")
    return float(tokens.mean() if aggregate == "mean" else tokens.max())


@register("informia")
@dataclass(frozen=True)
class InfoRMIA(ModelCallAttack):
    models: tuple[str, ...] = ()
    temperature: float = 1.0
    aggregate: str = "mean"

    vocab_stats: ClassVar[bool] = True
    summary = (
        "token-level InfoRMIA: per token, log2 p_target/p_ref + KL(p_ref || p_target) in bits "
        "(the reference's next-token law as the population), mean over tokens; per-token "
        "scores kept; needs --references or --ref"
    )
    paper = (
        "Tao and Shokri 2025, (Token-Level) InfoRMIA: Stronger Membership Inference and "
        "Memorization Assessment for LLMs, arXiv 2510.05582 (ICLR 2026)"
    )
    deviations = (
        "The paper's text was not reachable: the formula is taken from the paper's published "
        "summaries and a public implementation (Soreseth/Masterthesis TokenLevelInfoRMIA), "
        "checked against it. The authors' code (the first author's MIMIR fork, "
        "taojiashu/mimir, mimir/attacks/info_rmia.py InfoRMIAToken) gives the same per-token "
        "score with one reference model (in nats, negated: MIMIR's lower = member; here bits, "
        "higher = member).",
        "Soreseth/Masterthesis defaults to temperature 2 and negates the score (it reports "
        "members scoring lower on pre-trained models); here temperature is 1 (the authors' "
        "code has none) and higher = member, as the formula's sign gives (log LR(x) above the "
        "population's -KL).",
        "With several reference models the reference law is the mean of their next-token "
        "probabilities (a mixture, RMIA's Pr(x) = the mean over reference models), all models "
        "alike, IN/OUT membership unused. The authors' code averages their log-probabilities "
        "instead (the token's, and exp of the mean log-probability as the law in the KL term, "
        "not renormalised): kept as the mixture because only a distribution makes the "
        "correction a KL divergence with E_z log LR(z) = -KL; scores differ (see "
        "benchmarks/bench_authors_b.py).",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        if not self.models:
            raise ConfigError(
                "attack 'informia' needs reference models with the target's tokenizer: "
                "--references DIR (a game's) or --ref NAME=SPEC"
            )
        if not self.temperature > 0:
            raise ConfigError(f"informia.temperature must be > 0, got {self.temperature}")
        if self.aggregate not in AGGREGATES:
            raise ConfigError(
                f"informia.aggregate must be one of {AGGREGATES}, got {self.aggregate!r}"
            )

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        if run.references is None and not run.refs:
            return "no reference model (--references DIR or --ref NAME=SPEC)"
        return None

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> InfoRMIA:
        if "models" not in params:
            params["models"] = run.references.names if run.references is not None else run.refs
        return cls(**params)

    def check_backend(self, backend: Backend) -> None:
        if backend.local_model() is None:
            raise CapabilityError(
                "informia needs the target's full next-token distribution from a local Hugging "
                f"Face model; {type(backend).__name__} gives none"
            )

    def _requests(self, texts: Sequence[str]) -> list[PairTokensRequest]:
        return [PairTokensRequest(text=t, temperature=float(self.temperature)) for t in texts]

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """One pair-tokens request per text to the target and its references together."""
        return AttackCalls.of([("target+references", r) for r in self._requests(texts)])

    def token_results(self, requests: Any, texts: Sequence[str]) -> list[dict[str, Any]]:
        """The ``pair_tokens`` result of every text (see :mod:`imprint.requests.pair_tokens`)."""
        group = ModelGroup(
            requests.backend("target"), [requests.backend(m) for m in self.models], self.models
        )
        reqs = self._requests(texts)
        return requests.ask("target+references", reqs, group)

    def token_scores(self, requests: Any, texts: Sequence[str]) -> list[dict[str, Any]]:
        """Per text: ``pieces`` (the scored tokens' text), ``ids`` and ``scores`` (s_t, bits)."""
        out = []
        for r in self.token_results(requests, texts):
            s = informia_tokens(r["target_logp"], r["mix_logp"], r["kl"])
            out.append({"ids": list(r["ids"]), "pieces": list(r["pieces"]), "scores": s})
        return out

    def _sequence_scores(self, tokens: list[dict[str, Any]]) -> np.ndarray:
        return np.array(
            [sequence_score(np.asarray(t["scores"]), self.aggregate) for t in tokens],
            dtype=np.float64,
        )

    def score_with_requests(
        self, requests: Any, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        return {self.name: self._sequence_scores(self.token_scores(requests, texts))}

    def score_tokens(
        self, inputs: ScoringInputs | SignalSet
    ) -> tuple[dict[str, np.ndarray], dict[str, list[dict[str, Any]]]]:
        """The sequence scores and the per-token scores behind them (one pass of requests)."""
        inputs = ScoringInputs.of(inputs)
        if inputs.requests is None:
            return self.score(inputs), {}  # raises: no request client
        tokens = self.token_scores(inputs.requests, inputs.texts)
        return {self.name: self._sequence_scores(tokens)}, {self.name: tokens}
