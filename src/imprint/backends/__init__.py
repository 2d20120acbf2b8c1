"""Backends: what a model can be asked, per access level, chosen by the ``--model`` scheme.

Importing this package imports no torch, vLLM or httpx, nor the built-in providers: the registry
(:mod:`imprint.backends.registry`) imports a provider on first lookup, and the provider loads
its heavy dependency when a backend is built.
"""

from imprint.backends.options import HFOptions, OpenAIOptions, VLLMOptions
from imprint.backends.registry import (
    BACKENDS,
    BackendChoice,
    BackendProvider,
    LoadContext,
    available_backends,
    choose_backend,
    get_provider,
    make_provider,
    register,
)

__all__ = [
    "BACKENDS",
    "BackendChoice",
    "BackendProvider",
    "HFOptions",
    "LoadContext",
    "OpenAIOptions",
    "VLLMOptions",
    "available_backends",
    "choose_backend",
    "get_provider",
    "make_provider",
    "register",
]
