"""Backends: what a model can be asked, per access level, chosen by the ``--model`` scheme.

Importing this package imports no torch, vLLM or httpx: providers load them when a backend is
built (see :mod:`imprint.backends.registry`).
"""

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
