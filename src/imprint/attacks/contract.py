"""The attack contract: what an attack is, what a run offers it, what it receives to score.

An attack is a frozen dataclass of its hyperparameters (validated in ``__post_init__``), declares
the signals it needs, and maps them to one score per sample. Higher score = more likely member,
always: signs are flipped in attacks, never in metrics.

One entry point: :meth:`Attack.score` takes :class:`ScoringInputs` (the texts, the signals of the
attack's needs and the run's model requests). Log-prob attacks implement
:meth:`Attack.score_signals`; attacks that call models themselves subclass
:class:`~imprint.attacks.model_calls.ModelCallAttack` and implement ``score_with_requests``.

Below the registry (:mod:`imprint.attacks.registry` checks entries against :class:`Attack`) and
:mod:`imprint.attacks.base` (which builds attacks by name and re-exports these names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from imprint.backends.base import Access, Backend
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import ReferenceSet

if TYPE_CHECKING:
    from imprint.requests.client import ModelRequests

__all__ = [
    "Attack",
    "Preparation",
    "RunContext",
    "ScoringInputs",
    "hyperparameters",
    "prepared_field",
]


@dataclass(frozen=True)
class RunContext:
    """What a run offers attacks beyond their own hyperparameters."""

    refs: tuple[str, ...] = ()  # names of reference models
    seed: int = 0
    # the target's tokenizer (text -> token ids) and fingerprint, for attacks that count tokens
    tokenize: Callable[[str], list[int]] | None = None
    target_fingerprint: str = ""
    # the target's vocabulary size (rows of its output layer), for attacks that smooth token
    # counts over the vocabulary (DC-PDD); None when the target does not say
    vocab_size: int | None = None
    # named data pools the user declared (e.g. "members", "nonmembers" shots for ReCaLL)
    pools: dict[str, tuple[Sample, ...]] = field(default_factory=dict)
    # what the target gives: gray-box (a local model: log-probs, and text by sampling it),
    # token-logprobs (vLLM: the prompt's per-token log p) or black-box (an API: text only);
    # its string value is accepted too
    target_access: Access = Access.GRAY_BOX
    # the run's request client (imprint.requests.client.ModelRequests): model work an attack's
    # set-up needs (masked-LM neighbours, corpus token counts) goes through it, stored and counted
    requests: Any = None
    # reference models with known training data (--references: a game's, or a training
    # manifest): names, each model's IN/OUT membership per sample id, population texts
    references: ReferenceSet | None = None
    # the target's model spec as the user gave it (``--model``), for attacks whose defaults
    # depend on which model the target is (PETAL's surrogate); "" when unknown
    target_spec: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_access", _access(self.target_access))


def _access(value: str) -> Access:
    try:
        return Access(value)
    except ValueError:
        raise ConfigError(
            f"unknown target access {value!r}; use one of {[a.value for a in Access]}"
        ) from None


@dataclass(frozen=True)
class ScoringInputs:
    """What :meth:`Attack.score` receives: the texts to score (one per sample, in order), the
    signals of the attack's declared needs (log-prob passes; None when it declares none) and the
    run's request client for attacks that call models themselves (None outside a run)."""

    texts: tuple[str, ...]
    signals: SignalSet | None = None
    requests: ModelRequests | None = None

    @classmethod
    def of(cls, value: ScoringInputs | SignalSet) -> ScoringInputs:
        """``value`` itself, or a bare :class:`SignalSet` (library use) with its texts."""
        if isinstance(value, ScoringInputs):
            return value
        return cls(tuple(value.texts), signals=value)


@dataclass(frozen=True)
class Preparation:
    """What an attack sets up before planning: named prefixes, and samples it takes out of the
    evaluation (e.g. ReCaLL's non-member shots). Removed samples leave every attack's evaluation,
    so all attacks are compared on the same samples; the manifest counts them."""

    prefixes: dict[str, str] = field(default_factory=dict)
    removed_ids: frozenset[str] = frozenset()
    reason: str = ""
    # the attack with its prepared state filled in (typed fields marked ``prepared``, see
    # :func:`prepared_field`); the run scores with it. None: the attack needs no state.
    attack: Attack | None = None


@dataclass(frozen=True)
class Attack:
    """Base class. Subclasses set ``name``, ``summary``, ``paper`` and implement ``needs`` and
    ``score_signals`` (or subclass :class:`~imprint.attacks.model_calls.ModelCallAttack`)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    access: ClassVar[Access] = Access.GRAY_BOX
    # needs the mean/variance of log p over the vocabulary (or other full-distribution statistics);
    # False = reads only per-token log p, rank or top-1, so a token-logprob backend (vLLM) serves it
    vocab_stats: ClassVar[bool] = True
    # where this implementation's defaults or formula differ from the paper or the authors' code:
    # one sentence each, what differs and why; printed by ``imprint attacks``, written to the
    # manifest (``attack_deviations``) and listed in the README
    deviations: ClassVar[tuple[str, ...]] = ()
    # takes the run's held-out non-members (shots, fitting texts: imprint.attacks.shots), which
    # leave the evaluation; a command that must score every text (imprint audit) refuses it
    takes_held_out: ClassVar[bool] = False

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        """Why ``all`` must skip this attack in this run (e.g. no reference model), else None."""
        return None

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> Attack:
        """Build the attack for a run (override when it depends on the run, e.g. refs)."""
        return cls(**params)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        """Set-up before planning (prefixes, shots); most attacks need none."""
        return Preparation()

    def needs(self) -> tuple[Need, ...]:
        raise NotImplementedError  # abstract: every registered attack overrides it

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """The model calls this attack makes for ``texts`` beyond its :meth:`needs` (as
        prepared), by role: the same typed requests it executes, so the run's plan counts what
        then runs (:mod:`imprint.requests.plan`); ``target_local``: the target is a local model,
        not an API. A log-prob attack makes none."""
        return AttackCalls()

    def columns(self) -> tuple[str, ...]:
        """Names of the score columns this attack writes (one per variant)."""
        return (self.name,)

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` (the target) cannot serve this
        attack beyond its declared needs, which the planner checks; most attacks need nothing."""

    def score(self, inputs: ScoringInputs | SignalSet) -> dict[str, np.ndarray]:
        """The one entry point: column name -> scores of shape (len(inputs.texts),), higher =
        member. A bare :class:`SignalSet` (library use) is taken as the inputs' signals."""
        signals = ScoringInputs.of(inputs).signals
        if signals is None:
            raise ConfigError(
                f"attack {self.name!r} scores log-prob signals, but none were given; pass "
                "ScoringInputs(texts, signals=...) with the signals of its needs()"
            )
        return self.score_signals(signals)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        """Column name -> scores of shape (n_samples,) from the signals of :meth:`needs`."""
        raise NotImplementedError  # abstract: every log-prob attack overrides it

    def score_tokens(
        self, inputs: ScoringInputs | SignalSet
    ) -> tuple[dict[str, np.ndarray], dict[str, list[dict[str, Any]]]]:
        """:meth:`score`, plus per-token scores for attacks that have them (token-level
        InfoRMIA): column -> one dict per text with ``pieces`` (the tokens' text), ``ids`` and
        ``scores`` (arrays of shape (T,)). The run writes them to ``token_scores.parquet``;
        most attacks have none (an empty dict)."""
        return self.score(inputs), {}


def prepared_field(*, record: bool = False) -> Any:
    """A dataclass field for state an attack's set-up fills in (not a hyperparameter: no
    ``--param`` sets it, equality and hashing ignore it). The manifest leaves it out unless
    ``record`` (a choice the run made for the user, e.g. which surrogate model it picked)."""
    metadata = {"prepared": True, "record": record}
    return field(default=None, repr=False, compare=False, metadata=metadata)


def hyperparameters(attack: Attack) -> dict[str, Any]:
    """The attack's hyperparameters (for the manifest): every field but prepared state, save
    the prepared choices marked ``record``."""
    return {
        f.name: getattr(attack, f.name)
        for f in fields(attack)
        if (not f.metadata.get("prepared") or f.metadata.get("record"))
        and not f.name.startswith("_")
    }
