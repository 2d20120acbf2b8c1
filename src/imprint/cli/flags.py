"""The command line's shorthand flags, mapped to model options before a run is configured.

``--device``, ``--dtype``, ``--max-length`` and ``--start-token`` are options of every local
model (target and references): they become :attr:`RunConfig.shared_args` when changed from their
defaults. The ``--api-*`` flags are options of the target's HTTP backend: they become
:attr:`RunConfig.model_args` under the provider's own names. Everything else passes through.
"""

from __future__ import annotations

from typing import Any

from imprint.errors import ConfigError

#: flag (RunConfig keyword of the command line) -> its default; changed ones are shared_args
SHARED_FLAGS: dict[str, Any] = {
    "device": "auto",
    "dtype": "auto",
    "max_length": None,
    "start_token": "auto",
}
#: --api-* flag -> (the openai provider's option name, the flag's default)
API_FLAGS: dict[str, tuple[str, Any]] = {
    "api_mode": ("mode", "completions"),
    "api_key_env": ("key_env", "OPENAI_API_KEY"),
    "api_concurrency": ("concurrency", 8),
    "api_top_k": ("top_k", None),
    "api_timeout": ("timeout", 60.0),
    "api_max_retries": ("max_retries", 6),
}


def config_from_flags(**flags: Any) -> Any:
    """A :class:`~imprint.run.RunConfig` from the run options as the command line names them."""
    from imprint.run import RunConfig

    shared = dict(flags.pop("shared_args", {}))
    for name, default in SHARED_FLAGS.items():
        value = flags.pop(name, default)
        if value != default:
            shared[name] = value
    model_args = dict(flags.pop("model_args", {}))
    api = {}
    for name, (option, default) in API_FLAGS.items():
        value = flags.pop(name, default)
        if value != default:
            api[option] = value
    if api and flags.get("api_base") is None:
        given = ", ".join(f"--{n.replace('_', '-')}" for n, (o, _) in API_FLAGS.items() if o in api)
        raise ConfigError(f"{given} apply to an API target: add --api-base URL")
    for option, value in api.items():
        if option in model_args:
            raise ConfigError(
                f"option {option!r} is given twice: by --api-{option.replace('_', '-')} and by "
                f"--model-arg {option}=...; keep one"
            )
        model_args[option] = value
    return RunConfig(model_args=model_args, shared_args=shared, **flags)
