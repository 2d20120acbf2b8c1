"""Attacks by name: the registry (:mod:`imprint.attacks.registry`) re-exported typed, ``all``
expanded per access level, and the small helpers attack formulas share.

The contract itself (:class:`Attack`, :class:`RunContext`, :class:`ScoringInputs`,
:class:`Preparation`) lives in :mod:`imprint.attacks.contract` and is re-exported here, so an
attack module imports everything it needs from this one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from imprint.attacks import registry
from imprint.attacks.contract import (
    Attack,
    Preparation,
    RunContext,
    ScoringInputs,
    hyperparameters,
    prepared_field,
)
from imprint.attacks.params import TypedParams, check_params
from imprint.attacks.registry import register as register
from imprint.backends.base import Access
from imprint.errors import ConfigError

__all__ = [
    "TOKEN_ACCESS",
    "Attack",
    "BuiltAttacks",
    "Preparation",
    "RunContext",
    "ScoringInputs",
    "available_attacks",
    "build_attacks",
    "check_fraction",
    "get_attack_class",
    "hyperparameters",
    "left_out_of_all",
    "lowest_fraction_mean",
    "mean_logp",
    "prepared_field",
    "register",
]


def available_attacks() -> dict[str, type[Attack]]:
    """Registered attacks by name, sorted (the registry's, typed as attack classes)."""
    return registry.available_attacks()


def get_attack_class(name: str) -> type[Attack]:
    """The attack class registered as ``name``; unknown names raise with the closest matches."""
    cls: type[Attack] = registry.get_attack_class(name)
    return cls


@dataclass(frozen=True)
class BuiltAttacks(Sequence[Attack]):
    """The attacks :func:`build_attacks` built, each once. As a sequence: those the run context
    they were built with serves (``all`` expanded with it). A run builds them when it is resolved,
    before its data loads; ``all`` may then serve more (an attack that takes held-out texts, once
    they are known): :meth:`in_run` reads ``all``'s choice again with the fuller context of the
    same run, building nothing.
    """

    names: tuple[str, ...]  # as asked, "all" included
    served: tuple[str, ...]  # what "all" may choose at the target's access level, built
    by_name: dict[str, Attack]  # every attack named or in ``served``
    usable: tuple[Attack, ...]  # the sequence: in_run(the context they were built with)

    def in_run(self, run: RunContext) -> list[Attack]:
        """The attacks, in the order asked, with ``all`` = those of ``served`` that ``run``
        serves (:meth:`Attack.unavailable_reason`), each taken once."""
        by_name = self.by_name
        everything = [n for n in self.served if type(by_name[n]).unavailable_reason(run) is None]
        expanded = [m for n in self.names for m in (everything if n == "all" else [n])]
        return [by_name[n] for n in dict.fromkeys(expanded)]

    def __len__(self) -> int:
        return len(self.usable)

    @overload
    def __getitem__(self, index: int) -> Attack: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Attack]: ...
    def __getitem__(self, index: int | slice) -> Attack | Sequence[Attack]:
        return self.usable[index]


def build_attacks(
    names: Sequence[str],
    run: RunContext | None = None,
    *,
    params: dict[str, dict[str, Any]] | None = None,
) -> BuiltAttacks:
    """Instantiate attacks by name. ``"all"`` = every attack the run can serve at the target's
    access level: the gray-box ones for a local model, the black-box ones for a text-only API;
    it may be combined with named attacks (``all,samia,simmia``), each taken once.

    Every attack ``all`` may choose at that access level is built too (one that cannot be built
    for this run is one ``run`` does not serve), so that a later, fuller context of the same run
    re-reads the choice without building again (:meth:`BuiltAttacks.in_run`)."""
    run = run or RunContext()
    params = params or {}
    asked, served = tuple(names), []
    if "all" in names:
        served = [n for n, c in available_attacks().items() if _served(c, run.target_access)]
        now = [n for n in served if get_attack_class(n).unavailable_reason(run) is None]
        names = list(dict.fromkeys(m for n in names for m in (now if n == "all" else [n])))
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
    # unknown names and ill-typed values fail before any work; typed ones (resolve's) are not
    # checked twice
    typed = params if isinstance(params, TypedParams) else check_params(params)
    by_name: dict[str, Attack] = {}
    for name in dict.fromkeys([*names, *served]):
        cls = get_attack_class(name)
        try:
            by_name[name] = cls.for_run(run, **typed.get(name, {}))
        except ConfigError:
            if name in names:  # chosen now: the error is the user's to see
                raise
        except TypeError as err:
            if name in names:
                raise ConfigError(f"attack {name!r}: {err}") from err
    served = [n for n in served if n in by_name]
    chosen = BuiltAttacks(asked, tuple(served), by_name, ())
    return dataclasses.replace(chosen, usable=tuple(chosen.in_run(run)))


TOKEN_ACCESS = Access.TOKEN_LOGPROBS  # a target that returns only its prompt's per-token log p


def left_out_of_all(run: RunContext) -> list[tuple[str, str]]:
    """(name, why) of each attack served at the target's access level that ``all`` skips in
    this run (e.g. qmia with fewer held-out texts than it fits on), so a run can say so."""
    return [
        (n, reason)
        for n, c in available_attacks().items()
        if _served(c, run.target_access) and (reason := c.unavailable_reason(run)) is not None
    ]


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
            "entropy or gradients), which the target's backend (prompt log-probs: vLLM, or a "
            "server's echo + logprobs) does not return; run them on a local model (an alias, a "
            "folder, gguf:PATH, game:DIR or a hub id: the hf backend), or choose from "
            + ", ".join(served)
            + " and the black-box attacks"
            + (
                " (min_k_pp_topk approximates Min-K%++ from a server's top-k candidates: "
                "openai-logprobs with --model-arg topk_moments=true)"
                if "min_k_pp" in refused
                else ""
            )
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
