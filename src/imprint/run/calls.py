"""The model calls each attack will make, by role and request kind, counted before the work.

Attacks that call the model beyond their declared log-prob passes (:class:`~imprint.attacks.
model_calls.ModelCallAttack`, and the few that fit on held-out texts) build their requests while
they score, so the plan cannot read them off ``needs()``. This module builds the same typed
requests from each attack's own settings and the run's texts (the same keys: requests shared
between attacks are one call, as in the runner), so the counts are those the runner then
executes on an empty store. An attack may define ``planned_requests(texts)`` returning
``[(role, request), ...]`` itself; it is asked first. Calls whose number depends on the answers
(SimMIA's embeddings of the words it drew, PETAL's of the tokens the models predict, DE-COP's
questions, asked only of the texts whose paraphrases came back usable) are named in
``uncounted``, and so are the calls of model-call attacks this module does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from imprint.attacks import Attack
from imprint.attacks.model_calls import ModelCallAttack
from imprint.requests.kinds import (
    EmbedRequest,
    GradNormRequest,
    GreedyRequest,
    NextWordRequest,
    Request,
    SampleRequest,
)
from imprint.requests.logprobs import LogprobRequest

__all__ = ["CallPlan", "plan_calls"]

Planned = list[tuple[str, Request]]  # (role, request)


@dataclass
class CallPlan:
    """Distinct requests per (role, kind) the attacks make beyond their needs; ``logprobs`` rows
    as (text, prefix) per role, to merge with the needs' passes; ``uncounted``: attack -> kinds
    it calls whose number is known only from the answers."""

    logprobs: dict[str, dict[tuple[str, str | None], None]] = field(default_factory=dict)
    keys: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    uncounted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    target_local: bool = True  # a local model (SimMIA's next words) or an API (sampled words)

    def add(self, role: str, request: Request) -> None:
        if isinstance(request, LogprobRequest):
            self.logprobs.setdefault(role, {})[(request.text, request.prefix)] = None
        else:
            self.keys.setdefault((role, request.kind), set()).add(request.key())

    @property
    def counts(self) -> dict[tuple[str, str], int]:
        return {k: len(v) for k, v in self.keys.items()}


def plan_calls(
    attacks: Sequence[Attack], texts: Sequence[str], *, target_local: bool = True
) -> CallPlan:
    """The :class:`CallPlan` of ``attacks`` (as prepared) over the evaluation ``texts``."""
    plan = CallPlan(target_local=target_local)
    for attack in attacks:
        own = getattr(attack, "planned_requests", None)
        planner = _PLANNERS.get(type(attack).__name__)
        found: Planned | None = None
        if callable(own):
            found = list(own(texts))
        elif planner is not None:
            found = planner(attack, texts, plan)
        if found is None:  # an attack calling the model in ways this plan cannot count
            if isinstance(attack, ModelCallAttack):
                plan.uncounted[attack.name] = ("its model calls",)
            continue
        for role, request in found:
            plan.add(role, request)
    return plan


def _sample(
    prompt: str, n: int, max_tokens: int, *, seed: int, temperature: float,
    top_k: int | None, task: str = "continue",
) -> Request:  # fmt: skip
    """The request :meth:`ModelRequests.sample` builds for one prompt."""
    cls = GreedyRequest if temperature == 0 and n == 1 else SampleRequest
    return cls(prompt=prompt, n=n, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
               seed=seed, task=task)  # fmt: skip


def _samia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.attacks.samia import split_prefix
    from imprint.data.words import split_units

    out: Planned = []
    for text in texts:
        prompt, suffix = split_prefix(text, attack.prefix_ratio)
        budget = attack.max_tokens or max(8, 3 * len(split_units(suffix)))
        request = _sample(prompt, attack.n_samples, budget, seed=attack.seed + budget,
                          temperature=attack.temperature, top_k=attack.top_k)  # fmt: skip
        out.append(("target", request))
    return out


def _ngram(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.attacks.ngram_coverage import split_prefix_suffix

    out: Planned = []
    for text in texts:
        split = split_prefix_suffix(text, attack.prefix_ratio)
        if split is not None:  # a text of one unit is not sent
            out.append(("target", _sample(split[0], attack.n_samples, attack._budget(split[1]),
                                          seed=attack.seed, temperature=attack.temperature,
                                          top_k=attack.top_k)))  # fmt: skip
    return out


def _qmia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    train = tuple(attack._train or ())
    out: Planned = [("target", LogprobRequest(t)) for t in train]
    return out + [("embedder", EmbedRequest(text=s.strip())) for s in (*train, *texts)]


def _gradnorm(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    return [("target", GradNormRequest(text=t, norm=attack.norm, aggregate=attack.aggregate))
            for t in texts]  # fmt: skip


def _camia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.attacks.camia import REPEAT

    reference = tuple(attack._reference or ())
    rows = [*reference, *(v for t in reference for v in REPEAT.apply(t))]
    return [("target", LogprobRequest(t)) for t in rows]


def _informia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.requests.pair_tokens import PairTokensRequest

    temperature = float(attack.temperature)
    return [("target+references", PairTokensRequest(text=t, temperature=temperature))
            for t in texts]  # fmt: skip


def _probe(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.attacks.probe import PROXY_ROLE
    from imprint.requests.hidden_states import HiddenStatesRequest

    train = tuple(attack._train or ())
    out: Planned = [(PROXY_ROLE, HiddenStatesRequest(text=t, template=attack.template))
                    for t in train]  # fmt: skip
    return out + [("target", HiddenStatesRequest(text=t, template=attack.template)) for t in texts]


def _simmia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.data.words import split_words
    from imprint.requests.next_token import NextTokenRequest

    prefix = attack.shot_prefix or ""
    if attack.disclosure == "prob_ratio":
        return [("target", LogprobRequest(t, p or None)) for p in (None, prefix) for t in texts]
    plan.uncounted[attack.name] = ("embed (of the words or tokens it draws)",)
    contexts = (None, prefix)  # without and with the shot prefix P
    if attack.disclosure != "text":  # token laws: one next_token request per text and context
        settings = {"n": attack.n_samples, "top_k": attack.top_k, "mode": attack.mode,
                    "temperature": attack.temperature, "min_mass": attack.min_mass,
                    "seed": attack.seed}  # fmt: skip
        return [("target", NextTokenRequest(text=t, prefix=p, **settings))
                for p in contexts for t in texts]  # fmt: skip
    if not plan.target_local:  # an API: one sample request per prompt P + x_<i
        return [
            ("target", _sample(p + t[: w.end], attack.n_samples, attack.max_word_tokens,
                               seed=attack.seed + (1 if p else 0), temperature=attack.temperature,
                               top_k=attack.top_k, task="next_word"))
            for p in ("", prefix) for t in texts for w in split_words(t)[:-1]
        ]  # fmt: skip
    c = attack.sampling_config()
    return [
        ("target", NextWordRequest(text=t, prefix=p, n=c.n, top_k=c.top_k,
                                   temperature=c.temperature, max_word_tokens=c.max_word_tokens,
                                   mode=str(c.mode), seed=attack.seed, min_mass=c.min_mass))
        for p in contexts for t in texts
    ]  # fmt: skip


def _tag_tab(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    return [("target", LogprobRequest(t)) for t in texts]


def _acmia(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    # the plain pass and one pass per temperature, each temperature a role of its own
    roles = ["target", *(f"target@t={t:g}" for t in attack.temperatures)]
    return [(role, LogprobRequest(t)) for role in roles for t in texts]


def _petal(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    out: Planned = [("surrogate", LogprobRequest(t)) for t in texts]
    kinds = ["embed (of the tokens the models predict)"]
    if plan.target_local:  # the target's greedy tokens come from its own pass
        out += [("target", LogprobRequest(t)) for t in texts]
    else:  # one greedy token per surrogate-token prefix: known once the surrogate is loaded
        kinds.append("greedy (one per surrogate token of each text)")
    plan.uncounted[attack.name] = tuple(kinds)
    return out


def _de_cop(attack: Any, texts: Sequence[str], plan: CallPlan) -> Planned:
    from imprint.attacks.de_cop import PARAPHRASE_PROMPTS
    from imprint.requests.kinds import ParaphraseRequest

    asks = "letter_logprobs" if attack.rule(None) == "letter_logits" else "multiple_choice"
    # a question per ordering of each text whose three paraphrases are usable: known after them
    plan.uncounted[attack.name] = (f"{asks} (asked of the texts with usable paraphrases)",)
    if attack.paraphrase_fields:  # read from the data: no paraphrase calls
        return []
    role = "target" if attack.paraphraser == "target" else "paraphraser"
    return [
        (role, ParaphraseRequest(prompt=p.format(text=t), max_tokens=attack._paraphrase_budget(t)))
        for t in texts
        for p in PARAPHRASE_PROMPTS
    ]


_PLANNERS: dict[str, Callable[[Any, Sequence[str], CallPlan], Planned | None]] = {
    "SaMIA": _samia,
    "NGramCoverage": _ngram,
    "QMIA": _qmia,
    "GradNorm": _gradnorm,
    "CAMIA": _camia,
    "InfoRMIA": _informia,
    "Probe": _probe,
    "SimMIA": _simmia,
    "TagTab": _tag_tab,
    "Acmia": _acmia,
    "PETAL": _petal,
    "DECOP": _de_cop,
}
