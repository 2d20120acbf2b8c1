"""Backend registry: the scheme of a ``--model`` string picks the provider that serves it.

A provider is a loader function registered with :func:`register` together with its typed options
(a frozen dataclass, filled from ``--model-arg KEY=VALUE`` and the run's shorthand flags), the
capabilities its backends have (:data:`~imprint.backends.base.LOGPROBS`, ``GRADIENTS``,
``SAMPLING``) and the optional packages it needs. Looking a provider up imports nothing heavy:
torch, vLLM and httpx are imported by the loader when a backend is built, and a missing optional
package is reported at lookup, naming the pip extra. Providers live in :data:`BACKENDS` (a
:class:`~imprint.registry.Registry`): the built-in ones are lazy entries naming the
:class:`BackendProvider` objects of :mod:`imprint.backends.providers` (imported on first lookup:
that module imports this one, so this one never imports it at import time), and installed
packages add providers through the entry-point group ``imprint.backends`` (``name =
"package.module:PROVIDER"``, a :class:`BackendProvider` made with :func:`make_provider`).
Built-in schemes:

- ``hf:ID``, an alias, a local folder, a bare hub id ``owner/name`` -> ``hf`` (transformers)
- ``gguf:PATH`` -> ``gguf`` (transformers over a de-quantised GGUF file)
- ``vllm:SPEC`` -> ``vllm`` (text sampling only)
- ``openai:MODEL``, or any model name with ``--api-base URL`` -> ``openai`` (text only)
- model schemes registered with :func:`imprint.backends.models.register_model_scheme` (e.g.
  ``game:DIR`` from :mod:`imprint.game`) resolve to a folder and are served by ``hf``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.backends.models import model_schemes
from imprint.backends.options import BackendOptionError, parse_options
from imprint.errors import ConfigError, MissingDependencyError
from imprint.registry import Registry

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9_+.-]+):(.*)", re.DOTALL)
DEFAULT_PROVIDER = "hf"  # a spec without a scheme: alias, folder or hub id


@dataclass(frozen=True)
class LoadContext:
    """What a run gives every loader besides the provider's own options."""

    name: str = "target"  # "target" or a reference model's name
    seed: int = 0
    token_budget: int | None = None  # padded tokens per forward (local); None = auto
    cache: Any = None  # a SignalCache: API answers are stored as they arrive (resumable)


Loader = Callable[["BackendChoice", LoadContext], Any]


@dataclass(frozen=True)
class BackendProvider:
    """One registered scheme: how to build its backend and what the backend can do."""

    name: str
    loader: Loader
    options: type  # a frozen dataclass; see imprint.backends.options
    capabilities: frozenset[str]
    summary: str
    example: str  # a --model value that selects this provider
    # option key -> the run setting (RunConfig field; CLI flag --field-name) that fills it
    settings: Mapping[str, str] = field(default_factory=dict)
    # (module, pip extra) pairs that must be importable; checked with find_spec, never imported
    requires: tuple[tuple[str, str], ...] = ()
    whole_spec: bool = False  # the loader gets the spec with its scheme (hf resolves it itself)


@dataclass(frozen=True)
class BackendChoice:
    """A model string resolved to a provider and typed options; nothing is loaded yet."""

    provider: BackendProvider
    spec: str  # as the user wrote it
    target: str  # what the loader loads: the spec without the provider's scheme (hf: whole)
    options: Any  # an instance of provider.options
    args: Mapping[str, Any] = field(default_factory=dict)  # the --model-arg values, typed
    settings_used: frozenset[str] = frozenset()  # run settings that filled options
    api_base: str | None = None  # the API root (openai)

    def load(self, context: LoadContext | None = None) -> Any:
        """Build the backend (this is where torch, vLLM or httpx get imported)."""
        return self.provider.loader(self, context or LoadContext())

    def describe(self) -> dict[str, Any]:
        """The manifest's record of this choice: provider, its options, its capabilities."""
        return {
            "provider": self.provider.name,
            "options": dataclasses.asdict(self.options),
            "capabilities": sorted(self.provider.capabilities),
        }


def make_provider(
    name: str,
    loader: Loader,
    *,
    options: type,
    capabilities: frozenset[str],
    summary: str,
    example: str,
    settings: Mapping[str, str] | None = None,
    requires: tuple[tuple[str, str], ...] = (),
    whole_spec: bool = False,
) -> BackendProvider:
    """A checked :class:`BackendProvider` (what a plugin's ``imprint.backends`` entry point names).

    ``name`` is 2+ characters (one letter would read a Windows drive as a scheme) made of
    lowercase letters, digits, ``_``, ``+``, ``.``, ``-``; ``options`` is a dataclass.
    """
    provider = BackendProvider(
        name, loader, options, frozenset(capabilities), summary, example,
        dict(settings or {}), tuple(requires), whole_spec,
    )  # fmt: skip
    return _check_provider(name, provider)


def _check_provider(name: str, provider: Any) -> BackendProvider:
    if not isinstance(provider, BackendProvider):
        raise ConfigError(
            f"backend {name!r} must be an imprint.backends.BackendProvider (made with "
            f"make_provider), got {type(provider).__name__}"
        )
    if not _SCHEME.fullmatch(f"{name}:") or name != name.lower():
        raise ConfigError(
            f"backend name {name!r} must be 2+ lowercase characters (letters, digits, _ + . -) "
            "starting with a letter, e.g. 'myapi'"
        )
    if provider.name != name:
        raise ConfigError(
            f"backend {name!r}: its provider is named {provider.name!r}; make them equal"
        )
    if not dataclasses.is_dataclass(provider.options):
        raise ConfigError(
            f"backend {name!r}: options must be a dataclass, got {provider.options!r}"
        )
    return provider


#: scheme -> provider; built-ins are lazy (imported on first lookup), plugins come from entry points
BACKENDS: Registry[BackendProvider] = Registry(
    "backend", group="imprint.backends", check=_check_provider
)
for _name, _attr in (("hf", "HF"), ("gguf", "GGUF"), ("vllm", "VLLM"), ("openai", "OPENAI")):
    BACKENDS.add(_name, f"imprint.backends.providers:{_attr}")
BACKENDS.add("openai-logprobs", "imprint.backends.providers:OPENAI_LOGPROBS")
#: providers served over HTTP: they take --api-base (openai is the default one)
API_PROVIDERS = ("openai", "openai-logprobs")


def register(
    name: str,
    *,
    options: type,
    capabilities: frozenset[str],
    summary: str,
    example: str,
    settings: Mapping[str, str] | None = None,
    requires: tuple[tuple[str, str], ...] = (),
    whole_spec: bool = False,
    force: bool = False,
) -> Callable[[Loader], Loader]:
    """Decorator registering a loader as the provider of ``name:...`` model strings (see
    :func:`make_provider` for the checks); duplicate names raise unless ``force``."""
    made = functools.partial(
        make_provider, name, options=options, capabilities=capabilities, summary=summary,
        example=example, settings=settings, requires=requires, whole_spec=whole_spec,
    )  # fmt: skip
    made(lambda choice, context: None)  # check the name and options now, before decorating

    def wrap(loader: Loader) -> Loader:
        BACKENDS.add(name, made(loader), force=force)
        return loader

    return wrap


def available_backends() -> dict[str, BackendProvider]:
    """Registered providers by name, sorted (a plugin that fails to load is warned of, left out)."""
    return BACKENDS.load_all()


def get_provider(name: str) -> BackendProvider:
    """The provider registered as ``name``; unknown names say what is close and what exists."""
    if name not in BACKENDS:
        raise ConfigError(_unknown(name, f"backend {name!r}"))
    return BACKENDS.get(name)


def _unknown(scheme: str, what: str) -> str:
    known = sorted({*BACKENDS.names(), *model_schemes()})
    close = difflib.get_close_matches(scheme.lower(), known, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return (
        f"unknown {what}{hint} Known schemes: {', '.join(f'{k}:' for k in known)}; without a "
        "scheme: an alias, a folder with config.json, or a hub id owner/name"
    )


def provider_for(spec: str, *, api_base: str | None = None) -> tuple[BackendProvider, str]:
    """The provider serving ``spec`` and what its loader loads (see the module docstring)."""
    if api_base is not None:  # the API's own model name, whole (it may hold a colon: llama3:8b)
        scheme = "openai-logprobs" if spec.startswith("openai-logprobs:") else "openai"
        name = spec.removeprefix(f"{scheme}:")
        if not name.strip():
            raise ConfigError("--model is empty: give the model name the API serves, e.g. gpt-4o")
        return get_provider(scheme), name
    match = _SCHEME.fullmatch(spec)
    scheme = match.group(1) if match else ""
    if match and scheme in BACKENDS:
        provider = BACKENDS.get(scheme)
        rest = match.group(2)
        if not rest.strip():
            raise ConfigError(
                f"model {spec!r} names no model after {scheme}:; e.g. --model {provider.example}"
            )
        return provider, spec if provider.whole_spec else rest
    if match and scheme not in model_schemes() and not Path(spec).expanduser().exists():
        raise ConfigError(_unknown(scheme, f"model scheme {scheme + ':'!r} in {spec!r}"))
    return get_provider(DEFAULT_PROVIDER), spec


def choose_backend(
    spec: str,
    *,
    api_base: str | None = None,
    args: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> BackendChoice:
    """Resolve ``spec`` to a provider with typed, validated options (nothing is loaded).

    ``args`` are ``--model-arg`` values (``-`` in keys reads as ``_``); ``settings`` are the
    run's shorthand settings that differ from their defaults (RunConfig field -> value): each
    fills the option its provider maps it to. A key given both ways is refused.
    """
    provider, target = provider_for(spec, api_base=api_base)
    if provider.name in API_PROVIDERS and not api_base:
        raise ConfigError(
            f"model {spec!r} is served over HTTP: add --api-base URL, the server's API root "
            "(e.g. http://127.0.0.1:8000/v1)"
        )
    _check_installed(provider)
    explicit = _normalise_keys(args or {})
    values, sources = dict(explicit), dict[str, str]()
    for key, setting in provider.settings.items():
        if settings and setting in settings:
            if key in explicit:
                raise BackendOptionError(
                    f"backend {provider.name!r}, option {key!r} is given twice: by "
                    f"{_flag(setting)} and by --model-arg {key}=...; keep one"
                )
            values[key], sources[key] = settings[setting], _flag(setting)
    options: Any = parse_options(provider.name, provider.options, values, sources=sources)
    return BackendChoice(
        provider,
        spec,
        target,
        options,
        args={k: getattr(options, k) for k in explicit},
        settings_used=frozenset(provider.settings[k] for k in sources),
        api_base=api_base,
    )


def _normalise_keys(args: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw, value in args.items():
        key = str(raw).strip().replace("-", "_")
        if key in out:
            raise ConfigError(f"--model-arg {key} is given twice; keep one")
        out[key] = value
    return out


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def _check_installed(provider: BackendProvider) -> None:
    for module, extra in provider.requires:
        if not _importable(module):
            raise MissingDependencyError(module, extra)


def _importable(module: str) -> bool:
    """Whether ``import module`` would find it, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: import blocked on purpose
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
