"""The attack API, versioned: every name an attack file (in this package or a plugin) imports.

An attack written against this module keeps working while ``API_VERSION`` stays the same; a
change that breaks such a file raises it and says, in :data:`VERSIONS`, what to change. A class
written for an earlier version that overrides a renamed hook is refused when it is registered,
with one line saying what to rename (:mod:`imprint.attacks.registry`).

Version 1 (the previous release): log-prob attacks overrode ``score(self, signals)``.
Version 2: ``score(inputs)`` is the one entry point, taking :class:`ScoringInputs`; log-prob
attacks implement ``score_signals(self, signals)``; attacks that call models subclass
:class:`ModelCallAttack`, implement ``score_with_requests(requests, texts)`` and declare their
calls in ``planned_requests(texts, *, target_local)`` (an :class:`AttackCalls` of the same typed
requests, by role), so the run plans, counts and stores them.
"""

from __future__ import annotations

from imprint.attacks.base import (
    Attack,
    Preparation,
    RunContext,
    ScoringInputs,
    check_fraction,
    mean_logp,
    prepared_field,
    register,
)
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, Access, Backend, TokenStats
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.kinds import EmbedRequest, sample_request
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet

__all__ = [
    "API_VERSION",
    "SAMPLING",
    "VERSIONS",
    "Access",
    "Attack",
    "AttackCalls",
    "Backend",
    "CapabilityError",
    "ConfigError",
    "EmbedRequest",
    "LogprobRequest",
    "ModelCallAttack",
    "ModelRequests",
    "Need",
    "Preparation",
    "RunContext",
    "ScoringInputs",
    "SignalSet",
    "TokenStats",
    "check_fraction",
    "mean_logp",
    "prepared_field",
    "register",
    "sample_request",
]

#: the version of this API; an attack may say which it was written for (``api_version``)
API_VERSION = 2

#: each documented version and what a file written for it must change to run on this one
VERSIONS = {
    1: "rename score(self, signals) to score_signals(self, signals)",
    2: "current",
}
