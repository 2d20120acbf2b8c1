"""Resolve a run once: from what the user asked (:class:`RunConfig`) to what the run will do.

:func:`resolve` reads the reference manifest, picks every model's provider with typed options,
decides the target's access level, types the attack parameters and builds the attacks, once,
without a model (so names, parameters and access fail here, before data or models load). Every
stage after it takes the :class:`RunPlan`; nothing is recomputed: scoring takes the plan's
attacks (``all`` read again once the held-out texts are known, building nothing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.attacks import BuiltAttacks, RunContext, TypedParams, build_attacks, check_params
from imprint.backends.base import LOGPROBS, Access
from imprint.backends.models import default_cache_path, resolve_model
from imprint.backends.registry import BackendChoice, LoadContext, choose_backend, provider_for
from imprint.backends.shared_options import SHARED_NAMES
from imprint.errors import ConfigError
from imprint.executors import BackendFactory, Executor, make_executor
from imprint.run.config import SHARED_NAMESPACE, RunConfig
from imprint.training_manifest import ReferenceSet, check_reference_names, load_reference_set

#: the backend options every model may take, given once (``RunConfig.shared_args``)
SHARED_ARGS = SHARED_NAMES


@dataclass(frozen=True)
class RunPlan:
    """A run as resolved: the config, every model's provider choice (by role), the reference
    models with their training data, the target's access level, the typed attack params and the
    attacks built with them."""

    config: RunConfig
    choices: dict[str, BackendChoice]
    references: ReferenceSet | None
    target_access: Access
    params: TypedParams  # checked once, here; build_attacks does not check them again
    cache_path: Path
    attacks: BuiltAttacks  # built once, here; scoring reads them (BuiltAttacks.in_run)

    @property
    def refs(self) -> tuple[tuple[str, str], ...]:
        """(name, spec) of every model besides the target: --ref models, then --references."""
        extra = tuple((m.name, m.spec) for m in self.references.models) if self.references else ()
        return (*self.config.refs, *extra)

    def context(self, role: str, cache: Any = None) -> LoadContext:
        """What the provider of ``role`` is loaded with besides its options."""
        config = self.config
        return LoadContext(
            name=role, seed=config.seed, token_budget=config.token_budget, cache=cache
        )

    def attack_context(self, **run: Any) -> RunContext:
        """The attacks' view of the run (``run`` adds what only loaded models know)."""
        return attack_context(self.config, self.target_access, self.references, **run)


def attack_context(
    config: RunConfig, access: Access, references: ReferenceSet | None, **run: Any
) -> RunContext:
    """What the attacks see of a run resolved from ``config`` (``run``: what loaded data and
    models add: held-out texts, the target's tokenizer and vocabulary, the request client)."""
    return RunContext(
        refs=tuple(n for n, _ in config.refs),
        target_access=access,
        references=references,
        target_spec=config.model,
        seed=config.seed,
        **run,
    )


def resolve(config: RunConfig) -> RunPlan:
    """Resolve ``config`` once (see the module docstring); fails before any data or model."""
    params = check_params(config.params)  # a bad --param fails before data or models load
    references = load_reference_set(config.references) if config.references else None
    extra = tuple((m.name, m.spec) for m in references.models) if references else ()
    if extra:  # the config checked its own --ref names; with the manifest's, once more
        check_reference_names([n for n, _ in (*config.refs, *extra)], note=SHARED_NAMESPACE)
    choices = backend_choices(config, (*config.refs, *extra))
    access = Access.of(choices["target"].provider.capabilities)
    # the plan's config holds the typed parameters: the manifest records them as before, and
    # an earlier run of the same --param text compares equal to this one
    typed = dataclasses.replace(config, params=params) if config.params != params else config
    context = attack_context(config, access, references)
    attacks = build_attacks(config.attacks, context, params=params)  # names, access, values
    cache = config.cache or default_cache_path()
    return RunPlan(typed, choices, references, access, params, cache, attacks)


def backend_choices(
    config: RunConfig, refs: tuple[tuple[str, str], ...]
) -> dict[str, BackendChoice]:
    """The target's and the reference models' providers with typed options (nothing loaded).

    ``model_args`` apply to the target; ``shared_args`` to every model whose provider takes
    them. A shared option no model takes is refused rather than ignored.
    """
    shared = dict(config.shared_args)
    unknown = sorted(set(shared) - set(SHARED_ARGS))
    if unknown:
        raise ConfigError(
            f"shared model option(s) {unknown} are not among {list(SHARED_ARGS)}; give a "
            "target-only option with --model-arg KEY=VALUE"
        )
    choices = {
        "target": choose_backend(
            config.model, api_base=config.api_base, args=config.model_args, settings=shared
        )
    }
    for name, spec in refs:
        choices[name] = _reference_choice(name, spec, shared)
    used = set().union(*(c.settings_used for c in choices.values()))
    for setting in sorted(set(shared) - used):
        provider = choices["target"].provider
        raise ConfigError(
            f"--{setting.replace('_', '-')} {shared[setting]!r} has no effect: the target is "
            f"served by {provider.name!r}, whose options are "
            f"{', '.join(f.name for f in dataclasses.fields(provider.options))} "
            "(set them with --model-arg KEY=VALUE); drop the flag"
        )
    return choices


def _reference_choice(name: str, spec: str, shared: dict[str, Any]) -> BackendChoice:
    """A reference model's provider choice; a model that cannot give log-probabilities, or
    whose files cannot be found, fails here, naming the reference, before any model loads."""
    provider, _ = provider_for(spec)
    if LOGPROBS not in provider.capabilities:
        raise ConfigError(
            f"reference model {name}={spec!r} is served by {provider.name!r}, which gives no "
            "log-probabilities; reference attacks need a local model (an alias, a folder, "
            "gguf:PATH or a hub id)"
        )
    try:
        if provider.whole_spec:  # a local model's files: found now, not after the target loads
            resolve_model(spec)
        return choose_backend(spec, settings=shared)
    except ConfigError as err:
        raise ConfigError(f"reference model {name}={spec!r}: {err}") from None


def load_backends(plan: RunPlan, cache: Any = None) -> dict[str, Any]:
    """The target and reference backends, each built by its provider; an API target answers
    from ``cache`` when it can."""
    return {role: choice.load(plan.context(role, cache)) for role, choice in plan.choices.items()}


def run_executor(plan: RunPlan) -> Executor:
    """The run's executor; a Ray worker builds its replica of each model from the same provider
    choice and options as :func:`load_backends` (never a pickled model)."""
    factories = {
        role: BackendFactory(choice, plan.context(role)) for role, choice in plan.choices.items()
    }
    return make_executor(plan.config.executor, factories)
