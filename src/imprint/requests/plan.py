"""The model calls an attack declares before the work, and their sum over a run.

An attack says what it will ask (:meth:`imprint.attacks.base.Attack.planned_requests`): the
same typed requests it executes, by role, built by the same constructors
(:func:`~imprint.requests.kinds.sample_request`, the request classes), so the counts are those
the runner then executes on an empty store. The run only adds them up (:class:`CallPlan`:
requests shared between attacks are one call, as in the runner), and an HTTP target's request
count is read off the same declarations (:func:`http_requests`). These types sit below the
attacks so that both the attacks and the run can use them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from imprint.requests.kinds import ParaphraseRequest, Request, SampleRequest
from imprint.requests.logprobs import LogprobRequest

__all__ = ["AttackCalls", "CallPlan", "http_requests"]

#: how the run finds the model of a role an attack builds itself (for the store's fingerprint),
#: from the run's loaded backends by role; None when it cannot be had without loading
RoleModel = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class AttackCalls:
    """One attack's declared model calls over the run's texts.

    ``requests``: (role, request) pairs, those whose number is known before any answer;
    ``uncounted``: kinds it also calls whose number is known only from the answers (said in the
    plan line); ``estimated``: role -> text requests of those uncounted calls as an HTTP target
    would receive them, estimated (the HTTP request line); ``roles``: role -> how to find the
    model of a role the attack adds itself (:meth:`ModelRequests.add_role`)."""

    requests: tuple[tuple[str, Request], ...] = ()
    uncounted: tuple[str, ...] = ()
    estimated: dict[str, int] = field(default_factory=dict)
    roles: dict[str, RoleModel] = field(default_factory=dict)

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, Request]], **kw: Any) -> AttackCalls:
        return cls(tuple(pairs), **kw)


@dataclass
class CallPlan:
    """Distinct requests per (role, kind) the attacks make beyond their needs; ``logprobs`` rows
    as (text, prefix) per role, to merge with the needs' passes; ``uncounted``: attack -> kinds
    it calls whose number is known only from the answers; ``roles``: the models of the roles the
    attacks add themselves."""

    logprobs: dict[str, dict[tuple[str, str | None], None]] = field(default_factory=dict)
    keys: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    uncounted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    roles: dict[str, RoleModel] = field(default_factory=dict)

    def add(self, role: str, request: Request) -> None:
        if isinstance(request, LogprobRequest):
            self.logprobs.setdefault(role, {})[(request.text, request.prefix)] = None
        else:
            self.keys.setdefault((role, request.kind), set()).add(request.key())

    def add_attack(self, name: str, calls: AttackCalls) -> None:
        for role, request in calls.requests:
            self.add(role, request)
        if calls.uncounted:
            self.uncounted[name] = calls.uncounted
        self.roles.update(calls.roles)

    @property
    def counts(self) -> dict[tuple[str, str], int]:
        return {k: len(v) for k, v in self.keys.items()}


def http_requests(calls: AttackCalls, choices_per_request: int) -> int | None:
    """HTTP requests the target receives for ``calls`` at ``choices_per_request`` choices per
    request: ``ceil(n / c)`` per distinct text request of role ``target`` (a request asking for
    ``n`` samples), plus the estimated ones; None when the attack calls the target in ways known
    only from the answers and gives no estimate, 0 when it sends it no text request."""
    c = max(1, choices_per_request)
    seen: dict[str, int] = {}
    for role, request in calls.requests:
        if role != "target":
            continue
        if isinstance(request, SampleRequest):
            seen[request.key()] = math.ceil(request.n / c)
        elif isinstance(request, ParaphraseRequest):
            seen[request.key()] = 1
    if calls.uncounted and "target" not in calls.estimated and not seen:
        return None
    return sum(seen.values()) + calls.estimated.get("target", 0)
