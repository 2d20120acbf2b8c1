"""The model calls the run's attacks will make, by role and request kind, counted before the work.

Each attack declares its own calls (:meth:`~imprint.attacks.base.Attack.planned_requests`: the
typed requests it executes, built by the same constructors), so this module only adds them up
(:class:`~imprint.requests.plan.CallPlan`): requests shared between attacks are one call, as in
the runner, so the counts are those the runner then executes on an empty store. Calls whose
number depends on the answers are named in ``uncounted``, as each attack says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imprint.requests.plan import CallPlan

__all__ = ["CallPlan", "plan_calls"]


def plan_calls(
    attacks: Sequence[Any], texts: Sequence[str], *, target_local: bool = True
) -> CallPlan:
    """The :class:`CallPlan` of ``attacks`` (as prepared) over the evaluation ``texts``;
    ``target_local``: the target is a local model (else an API: some attacks ask it otherwise)."""
    plan = CallPlan()
    for attack in attacks:
        plan.add_attack(attack.name, attack.planned_requests(texts, target_local=target_local))
    return plan
