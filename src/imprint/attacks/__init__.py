"""Membership inference attacks: higher score = more likely member, always.

Every module of this package is imported here, and an attack module registers its attacks when
imported (``@register``): adding an attack is one new file (see the README's worked example).
"""

import importlib
import pkgutil

from imprint.attacks.base import (
    Attack,
    Preparation,
    RunContext,
    available_attacks,
    build_attacks,
    get_attack_class,
    register,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "Attack",
    "Preparation",
    "RunContext",
    "available_attacks",
    "build_attacks",
    "get_attack_class",
    "register",
]
