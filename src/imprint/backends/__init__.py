"""Backends: what a model can be asked, per access level, chosen by the ``--model`` scheme.

Importing this package imports no torch, vLLM or httpx: providers load them when a backend is
built (see :mod:`imprint.backends.registry`).
"""

# The built-in providers register themselves when imported. Importing any backends module (the
# registry included) runs this package face first, so they are always registered; the registry
# itself does not import them (they import it), which would be a circle.
from imprint.backends import providers as _providers  # noqa: F401
from imprint.backends.options import HFOptions, OpenAIOptions, VLLMOptions
from imprint.backends.registry import (
    BackendChoice,
    BackendProvider,
    LoadContext,
    available_backends,
    choose_backend,
    get_provider,
    register,
)

__all__ = [
    "BackendChoice",
    "BackendProvider",
    "HFOptions",
    "LoadContext",
    "OpenAIOptions",
    "VLLMOptions",
    "available_backends",
    "choose_backend",
    "get_provider",
    "register",
]
