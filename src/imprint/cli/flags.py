"""The command line's shorthand flags, mapped to model options before a run is configured.

``--device``, ``--dtype``, ``--max-length`` and ``--start-token`` are options of every local
model (target and references): they become :attr:`RunConfig.shared_args` when changed from their
defaults. The ``--api-*`` flags are options of the target's HTTP backend: they become
:attr:`RunConfig.model_args` under the provider's own names. Everything else passes through.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from imprint.backends.shared_options import SharedModelOptions
from imprint.cli.options import RunOptions
from imprint.errors import ConfigError

_RUN_DEFAULTS = {f.name: f.default for f in fields(RunOptions)}  # the one declaration's

#: flag (RunConfig keyword of the command line) -> its default; changed ones are shared_args
SHARED_FLAGS: dict[str, Any] = {f.name: f.default for f in fields(SharedModelOptions)}
_API_OPTIONS = {
    "api_mode": "mode",
    "api_key_env": "key_env",
    "api_concurrency": "concurrency",
    "api_top_k": "top_k",
    "api_timeout": "timeout",
    "api_max_retries": "max_retries",
}
#: --api-* flag -> (the openai provider's option name, the flag's default, from RunOptions)
API_FLAGS: dict[str, tuple[str, Any]] = {
    flag: (option, _RUN_DEFAULTS[flag]) for flag, option in _API_OPTIONS.items()
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


#: lm-evaluation-harness's ``--model`` names -> imprint's scheme for ``--model SCHEME:ID``
LM_EVAL_MODELS = {"hf": "hf", "hf-auto": "hf", "huggingface": "hf", "vllm": "vllm"}


def lm_eval_model(model: str, pairs: list[str]) -> tuple[str, list[str], str | None]:
    """lm-eval's spelling ``--model hf --model-args pretrained=ID,...`` as imprint's
    ``--model hf:ID`` with the other model args kept: (model, the ``KEY=VALUE`` pairs left, a
    line saying so, or None when ``model`` is not an lm-eval model name)."""
    scheme = LM_EVAL_MODELS.get(model)
    if scheme is None:
        return model, pairs, None
    named = [p for p in pairs if p.split("=", 1)[0].strip() == "pretrained"]
    if not named:
        raise ConfigError(
            f"--model {model} names no model: write --model {scheme}:ID (e.g. --model "
            f"{scheme}:HuggingFaceTB/SmolLM2-135M), or lm-eval's --model {model} --model-args "
            "pretrained=ID"
        )
    if len(named) > 1:
        raise ConfigError(f"--model-args names pretrained= {len(named)} times; keep one")
    name = named[0].split("=", 1)[1].strip()
    spec = f"{scheme}:{name}"
    note = f"--model {model} --model-args pretrained={name} is read as --model {spec}"
    return spec, [p for p in pairs if p is not named[0]], note


def n_per_label_from_limit(limit: int | None, n_per_label: int | None) -> int | None:
    """``--limit N`` (lm-eval's name): N texts in all, N/2 members and N/2 non-members, i.e.
    ``--n-per-label N/2``; given with a different ``--n-per-label`` it is refused."""
    if limit is None:
        return n_per_label
    if limit < 2 or limit % 2:
        raise ConfigError(
            f"--limit {limit}: give an even number >= 2; --limit N takes N texts, half members "
            "and half non-members (the same as --n-per-label N/2), e.g. --limit 100"
        )
    if n_per_label is not None and n_per_label != limit // 2:
        raise ConfigError(
            f"--limit {limit} means --n-per-label {limit // 2}, but --n-per-label {n_per_label} "
            "is given too; keep one"
        )
    return limit // 2


def flag_spelling(message: str, flags: dict[str, str]) -> str:
    """``message`` with each Python option name (``n_per_label``, ``label_field=``) written as
    the flag the user typed (``--n-per-label``): errors raised below the command line name
    the Python API's arguments. ``flags``: option name -> flag. A name inside a longer word, a
    path or a flag (``--n-per-label``) is left alone."""
    import re

    for name in sorted(flags, key=len, reverse=True):
        if "_" in name:  # one-word names (model, data, seed) are ordinary words in a message
            message = re.sub(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", flags[name], message)
    return message
