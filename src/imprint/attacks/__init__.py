"""Membership inference attacks: higher score = more likely member, always.

Importing this package imports no attack: the registry (:mod:`imprint.attacks.registry`) imports
an attack's module when the attack is first asked for. Adding an attack is one new file in this
package that registers itself (``@register``, see the worked example in docs/extending.md), or,
outside it, a package declaring an ``imprint.attacks`` entry point.
"""

from imprint.attacks.base import (
    Attack,
    BuiltAttacks,
    Preparation,
    RunContext,
    available_attacks,
    build_attacks,
    get_attack_class,
    hyperparameters,
    left_out_of_all,
    register,
)
from imprint.attacks.params import TypedParams, check_params
from imprint.attacks.shots import HELDOUT_KEY, HeldOut, hold_out

# what the run reads of attacks: these names, never an attack's own module
__all__ = [
    "HELDOUT_KEY",
    "Attack",
    "BuiltAttacks",
    "HeldOut",
    "Preparation",
    "RunContext",
    "TypedParams",
    "available_attacks",
    "build_attacks",
    "check_params",
    "get_attack_class",
    "hold_out",
    "hyperparameters",
    "left_out_of_all",
    "register",
]
