"""Membership inference attacks: higher score = more likely member, always."""

from imprint.attacks import (  # noqa: F401 (register)
    con_recall,
    dc_pdd,
    gradnorm,
    loss,
    lowercase,
    min_k,
    min_k_pp,
    neighborhood,
    pac,
    petal,
    recall,
    ref,
    samia,
    simmia,
    surp,
    zlib,
)
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
