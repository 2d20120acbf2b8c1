"""The attack registry: name -> attack class.

Kept apart from :mod:`imprint.attacks.base` (the contract) and :mod:`imprint.attacks.params`
(parameter checks), which both use it, so that neither imports the other. It imports no module of
the attacks package, not even for annotations, so it holds classes as plain ``type``;
:mod:`imprint.attacks.base` re-exports these names typed as ``type[Attack]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, TypeVar

from imprint.errors import ConfigError

C = TypeVar("C", bound=type)
_REGISTRY: dict[str, type[Any]] = {}


def register(name: str, *, force: bool = False) -> Callable[[C], C]:
    """Class decorator adding an attack under ``name``; duplicates raise unless ``force``."""

    def wrap(cls: C) -> C:
        if name in _REGISTRY and not force:
            raise ConfigError(f"attack {name!r} is already registered (pass force=True)")
        cls.name = name  # type: ignore[attr-defined]  # every attack class declares ``name``
        _REGISTRY[name] = cls
        return cls

    return wrap


def available_attacks() -> dict[str, type[Any]]:
    """Registered attacks by name, sorted."""
    return dict(sorted(_REGISTRY.items()))


def get_attack_class(name: str) -> type[Any]:
    """The attack class registered as ``name``; unknown names raise with the closest matches."""
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown attack {name!r}{hint} (known: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]
