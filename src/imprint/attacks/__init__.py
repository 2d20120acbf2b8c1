"""Membership inference attacks: higher score = more likely member, always.

Importing this package imports no attack: the registry (:mod:`imprint.attacks.registry`) imports
an attack's module when the attack is first asked for. Adding an attack is one new file in this
package that registers itself (``@register``, see the worked example in docs/extending.md), or,
outside it, a package declaring an ``imprint.attacks`` entry point.
"""

from imprint.attacks.base import (
    Attack,
    Preparation,
    RunContext,
    available_attacks,
    build_attacks,
    get_attack_class,
    register,
)

__all__ = [
    "Attack",
    "Preparation",
    "RunContext",
    "available_attacks",
    "build_attacks",
    "get_attack_class",
    "register",
]
