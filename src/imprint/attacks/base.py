"""Attack contract; the registry (:mod:`imprint.attacks.registry`) is re-exported here, typed.

An attack is a frozen dataclass of its hyperparameters (validated in ``__post_init__``), declares
the signals it needs, and maps them to one score per sample. Higher score = more likely member,
always: signs are flipped here, never in metrics.

One entry point: :meth:`Attack.score` takes :class:`ScoringInputs` (the texts, the signals of the
attack's needs and the run's model requests). Log-prob attacks implement
:meth:`Attack.score_signals`; attacks that call models themselves subclass
:class:`~imprint.attacks.model_calls.ModelCallAttack` and implement ``score_with_requests``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from imprint.attacks import registry
from imprint.attacks.params import check_params
from imprint.attacks.registry import register as register
from imprint.backends.base import Access, Backend
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import ReferenceSet

if TYPE_CHECKING:
    from imprint.requests.client import ModelRequests


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


def available_attacks() -> dict[str, type[Attack]]:
    """Registered attacks by name, sorted (the registry's, typed as attack classes)."""
    return registry.available_attacks()


def get_attack_class(name: str) -> type[Attack]:
    """The attack class registered as ``name``; unknown names raise with the closest matches."""
    cls: type[Attack] = registry.get_attack_class(name)
    return cls


def build_attacks(
    names: Sequence[str],
    run: RunContext | None = None,
    *,
    params: dict[str, dict[str, Any]] | None = None,
) -> list[Attack]:
    """Instantiate attacks by name. ``"all"`` = every attack the run can serve at the target's
    access level: the gray-box ones for a local model, the black-box ones for a text-only API;
    it may be combined with named attacks (``all,samia,simmia``), each taken once."""
    run = run or RunContext()
    params = params or {}
    if "all" in names:
        everything = [
            n
            for n, c in available_attacks().items()
            if _served(c, run.target_access) and c.unavailable_reason(run) is None
        ]
        expanded = [m for n in names for m in (everything if n == "all" else [n])]
        names = list(dict.fromkeys(expanded))
    if run.target_access == Access.BLACK_BOX:
        needing_logits = [n for n in names if get_attack_class(n).access != Access.BLACK_BOX]
        if needing_logits:
            raise ConfigError(
                f"attack(s) {needing_logits} need the target's log-probabilities, but the target "
                "is a text-only API; choose black-box attacks ("
                + ", ".join(
                    n for n, c in available_attacks().items() if c.access == Access.BLACK_BOX
                )
                + ") or 'all'"
            )
    if run.target_access == TOKEN_ACCESS:
        _refuse_vocab_attacks(names)
    for key in params:
        get_attack_class(key)
        if key not in names:
            raise ConfigError(f"parameters given for attack {key!r}, which is not selected")
    attacks = []
    typed = check_params(params)  # unknown names and ill-typed values fail before any work
    for name in names:
        cls = get_attack_class(name)
        try:
            attacks.append(cls.for_run(run, **typed.get(name, {})))
        except TypeError as err:
            raise ConfigError(f"attack {name!r}: {err}") from err
    return attacks


TOKEN_ACCESS = Access.TOKEN_LOGPROBS  # a target that returns only its prompt's per-token log p


def _served(cls: type[Attack], target_access: Access) -> bool:
    """Whether ``all`` includes this attack at the target's access level."""
    if target_access == Access.TOKEN_LOGPROBS:
        return cls.access == Access.GRAY_BOX and not cls.vocab_stats
    return cls.access == target_access


def _refuse_vocab_attacks(names: Sequence[str]) -> None:
    """Before any work: a token-logprob target cannot serve full-vocabulary statistics."""
    refused = [
        n
        for n in names
        if get_attack_class(n).access == Access.WHITE_BOX
        or (get_attack_class(n).access == Access.GRAY_BOX and get_attack_class(n).vocab_stats)
    ]
    if refused:
        served = [n for n, c in available_attacks().items() if _served(c, TOKEN_ACCESS)]
        raise ConfigError(
            f"attack(s) {refused} need full-vocabulary statistics (mean/variance of log p, "
            "entropy or gradients), which the target's backend (vLLM prompt log-probs) does not "
            "return; run them on a local model (an alias, a folder, gguf:PATH, game:DIR or a hub "
            "id: the hf backend), or choose from " + ", ".join(served) + " and the black-box "
            "attacks"
        )


def mean_logp(values: np.ndarray) -> float:
    """Mean log-likelihood per token (= minus the LOSS)."""
    return float(np.mean(values))


def lowest_fraction_mean(values: np.ndarray, k: float) -> float:
    """Mean of the ``max(1, floor(k * T))`` smallest values (Min-K% style selection)."""
    n = max(1, int(len(values) * k))
    return float(np.mean(np.partition(values, n - 1)[:n]))


def check_fraction(name: str, value: float) -> None:
    if not 0 < value <= 1:
        raise ConfigError(f"{name} must be in (0, 1], got {value}")
