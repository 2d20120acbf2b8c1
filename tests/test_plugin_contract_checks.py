"""A third-party attack's mistakes are refused in one line naming the attack (issue 33): a class
with no scoring hook or malformed class attributes at registration, and a wrong count of
scores, an exception inside its scoring or an unknown model role where the run collects scores.

Classes are registered in-process (the path an entry point's class takes too: the registry's
check), and scored through the run's own scoring step over a real in-memory request client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from imprint.attacks.api import Attack, ModelCallAttack, ModelRequests, Need, SignalSet
from imprint.attacks.registry import ATTACKS, register
from imprint.data import Sample
from imprint.errors import ConfigError, ImprintError
from imprint.requests.client import in_memory_requests
from imprint.scoring import WorkReport, compute_scores

TEXTS = [f"sample text number {i}" for i in range(10)]


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names this test registers, removed afterwards (the registry is process-wide)."""
    names: list[str] = []
    yield names
    for name in names:
        if name in ATTACKS:
            ATTACKS.remove(name)


def _register(names: list[str], name: str, cls: type) -> type:
    names.append(name)
    return register(name)(cls)


def _score(attack: Attack) -> dict[str, np.ndarray]:
    samples = [Sample(str(i), t, i % 2) for i, t in enumerate(TEXTS)]
    requests = in_memory_requests(object())
    return compute_scores(
        [attack],
        samples,
        {},
        requests.runner.store,
        prefixes={},
        requests=requests,
        work=WorkReport(),
    )


# --- 1. no scoring hook ---------------------------------------------------------------------


@dataclass(frozen=True)
class TypoSignals(Attack):
    summary = "typo'd log-prob hook"
    paper = "test"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signal(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {self.name: np.zeros(len(signals.texts))}


@dataclass(frozen=True)
class TypoRequests(ModelCallAttack):
    summary = "typo'd model-call hook"
    paper = "test"

    def score_with_request(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        return {self.name: np.zeros(len(texts))}


def test_a_class_without_a_scoring_hook_is_refused_at_registration(
    registered: list[str],
) -> None:
    with pytest.raises(ConfigError) as err:
        _register(registered, "typo_signals", TypoSignals)
    message = str(err.value)
    assert "TypoSignals" in message and "score_signals" in message
    assert "score_signal()" in message  # the closest name it did define
    assert "\n" not in message
    with pytest.raises(ConfigError, match=r"score_with_requests.*score_with_request\(\)"):
        _register(registered, "typo_requests", TypoRequests)
    assert "typo_signals" not in ATTACKS.names()


def test_a_lazy_entry_without_a_scoring_hook_is_listed_as_broken(registered: list[str]) -> None:
    registered.append("typo_lazy")
    ATTACKS.add("typo_lazy", f"{__name__}:TypoSignals", origin="plugin typo-dist")
    with pytest.warns(UserWarning):
        ATTACKS.load_all()
    broken = {e.name: e.broken for e in ATTACKS.entries() if e.name == "typo_lazy"}
    assert broken["typo_lazy"] is not None and "score_signal()" in broken["typo_lazy"]


# --- 4. class attributes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Fine(Attack):
    summary = "a fine attack"
    paper = "test"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {self.name: np.array([float(np.mean(s.logp)) for s in signals.get()])}


@dataclass(frozen=True)
class StringDeviations(Fine):
    deviations = "uses a different k"  # type: ignore[assignment]


@dataclass(frozen=True)
class NumberSummary(Fine):
    summary = 3  # type: ignore[assignment]


def test_malformed_class_attributes_are_refused_at_registration(registered: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"deviations must be a tuple.*\('uses a different k',\)"):
        _register(registered, "string_deviations", StringDeviations)
    with pytest.raises(ConfigError, match="summary must be a string"):
        _register(registered, "number_summary", NumberSummary)
    _register(registered, "fine_attack", Fine)  # the well-formed one passes


# --- 2, 3, 5. where the run collects scores -----------------------------------------------------


@dataclass(frozen=True)
class Calls(ModelCallAttack):
    """Scores through a request client; ``mode`` picks the mistake."""

    summary = "misbehaves on purpose"
    paper = "test"
    mode: str = "short"

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        if self.mode == "short":
            return {self.name: np.zeros(3)}
        if self.mode == "none":
            return {self.name: [None] * len(texts)}  # type: ignore[dict-item]
        if self.mode == "raise":
            raise ValueError("boom inside plugin scoring")
        requests.sample("oracle", list(texts), 1, 4, seed=0, temperature=0)
        return {self.name: np.zeros(len(texts))}


def test_a_wrong_count_of_scores_names_the_attack(registered: list[str]) -> None:
    _register(registered, "short_scores", Calls)
    with pytest.raises(ImprintError) as err:
        _score(Calls(mode="short"))
    message = str(err.value)
    assert "'short_scores'" in message and "(3,)" in message and "(10,)" in message
    with pytest.raises(ImprintError, match="'short_scores'.*non-numeric"):
        _score(Calls(mode="none"))


def test_an_exception_inside_scoring_names_the_attack(registered: list[str]) -> None:
    _register(registered, "raiser", Calls)
    with pytest.raises(ImprintError) as err:
        _score(Calls(mode="raise"))
    assert str(err.value).startswith(
        "attack 'raiser' (module test_plugin_contract_checks) failed while scoring: "
        "ValueError: boom inside plugin scoring"
    )
    assert isinstance(err.value.__cause__, ValueError)


def test_an_unknown_role_names_the_attack(registered: list[str]) -> None:
    _register(registered, "bad_role", Calls)
    with pytest.raises(ConfigError, match=r"^attack 'bad_role'.*no model in role 'oracle'"):
        _score(Calls(mode="role"))


def test_a_built_in_attack_that_raises_keeps_its_exception_and_traceback(
    registered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from imprint.registry import BUILTIN

    _register(registered, "raiser", Calls)
    monkeypatch.setattr(ATTACKS, "origin", lambda name: BUILTIN)  # as if it shipped with imprint
    with pytest.raises(ValueError, match="boom inside plugin scoring"):  # a bug: not re-worded
        _score(Calls(mode="raise"))
