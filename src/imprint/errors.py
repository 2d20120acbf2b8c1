"""Errors that teach: each says what went wrong, which input, and how to fix it."""

from __future__ import annotations


class ImprintError(Exception):
    """Base class for every error imprint raises on purpose."""


class DataError(ImprintError, ValueError):
    """A data file or dataset is unusable (names the file, the line and the fix)."""


class ConfigError(ImprintError, ValueError):
    """An attack, backend or run option is invalid."""


class CapabilityError(ImprintError):
    """An attack needs something the backend cannot serve (raised before any work)."""


class MissingDependencyError(ImprintError, ImportError):
    """An optional dependency is missing; the message names the pip extra."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package!r} is not installed; install it with: pip install 'llm-imprint[{extra}]'"
        )


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run's model work; the message says what the store kept (the CLI prints
    it and exits 130). Still a ``KeyboardInterrupt``: nothing catches it by mistake."""
