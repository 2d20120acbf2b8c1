"""What a grid checks about its models before any work: each model's run options as its runs
will get them (``RunConfig`` types and checks them, so a ``dtype: float99`` or ``device: tpu``
fails as the run would), and that each local model's files exist (resolved as loading resolves
them, without loading). Errors name the experiment file and the place in it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from imprint.errors import ConfigError
from imprint.run import resolve
from imprint.study.spec import ModelEntry, Settings, StudySpec

__all__ = ["check_games", "check_models", "model_place", "raise_all"]


def check_models(
    spec: StudySpec, models: Sequence[ModelEntry], config_for: Callable[[ModelEntry], Any]
) -> list[ConfigError]:
    """Every model (and reference) whose options a run refuses or whose files do not exist,
    found before any data or model loads, as one error each (naming the file and the place);
    ``config_for(model)`` builds one of its runs' configs. Empty: all can run."""
    found: list[ConfigError] = []
    for name, ref in spec.refs:
        try:
            _resolve(ref, spec, f"refs.{name}")
        except ConfigError as err:
            found.append(err)
    for model in models:
        try:
            config = config_for(model)
            resolve(config)  # every option and provider as the run resolves them
            if _resolve(model.model, spec, None):
                _device(config, spec, model)
        except ConfigError as err:
            if str(err).startswith(f"{spec.source}: "):
                found.append(err)
            else:
                found.append(ConfigError(f"{spec.source}: {model_place(spec, model, err)}: {err}"))
    return found


def check_games(spec: StudySpec) -> list[Exception]:
    """Every game sweep its build would refuse before training (a DP game swept over several
    epoch counts, a pool smaller than pool_size + heldout, ...), by the build's own check
    (:func:`~imprint.game.build.check_games`), one error each naming the file and the game."""
    from imprint.errors import DataError
    from imprint.game.build import check_games as check_build
    from imprint.game.config import GameConfig

    found: list[Exception] = []
    for i, sweep in enumerate(spec.games):
        try:
            check_build(GameConfig(**{**sweep.config, "epochs": max(sweep.epochs)}), sweep.epochs)
        except (ConfigError, DataError) as err:
            found.append(type(err)(f"{spec.source}: games[{i}] ({sweep.name}): {err}"))
    return found


def raise_all(source: str, problems: Sequence[Exception]) -> None:
    """Raise ``problems`` (models, then data sets) as one error that lists every one: a grid
    missing seven data sets says all seven at once, not the first of them per invocation."""
    if not problems:
        return
    if len(problems) == 1:
        raise problems[0]
    prefix = f"{source}: "
    parts = [str(p).removeprefix(prefix) for p in problems]
    listed = " ".join(f"({i}) {part}" for i, part in enumerate(parts, 1))
    kind = type(problems[0]) if all(type(p) is type(problems[0]) for p in problems) else ConfigError
    raise kind(f"{source}: {len(problems)} problems, every one listed: {listed}")


def _resolve(model: str, spec: StudySpec, place: str | None) -> bool:
    """A local model's files, found as :func:`~imprint.backends.models.resolve_model` finds
    them when the model loads (a hub id or an API is only named, not reached); False for a
    model another provider serves."""
    from imprint.backends.models import resolve_model
    from imprint.backends.registry import provider_for

    if not provider_for(model)[0].whole_spec:
        return False
    try:
        resolve_model(model)
    except ConfigError as err:
        if place is None:
            raise
        raise ConfigError(f"{spec.source}: {place}: {err}") from None
    return True


def _device(config: Any, spec: StudySpec, model: ModelEntry) -> None:
    """The device as the local model's load picks it (``cuda`` without CUDA is refused there)."""
    from imprint.backends.models import pick_device

    device = config.model_args.get("device", config.shared_args.get("device", "auto"))
    try:
        pick_device(device)
    except ConfigError as err:
        index = next((i for i, m in enumerate(spec.models) if m is model), None)
        where = "settings.device" if "device" not in model.args else f"models[{index}].args.device"
        raise ConfigError(f"{spec.source}: {where} (model {model.name!r}): {err}") from None


def model_place(spec: StudySpec, model: ModelEntry, err: Exception) -> str:
    """Where in the file an error about ``model`` comes from: ``models[1].args.dtype``,
    ``settings.dtype`` (a setting every model gets) or ``models[1]``."""
    index = next((i for i, m in enumerate(spec.models) if m is model), None)
    at = f"models[{index}]" if index is not None else f"game {model.name!r}"
    found = re.search(r"option '([^']+)'", str(err))
    key = found.group(1) if found else None
    if key is not None and key in model.args:
        return f"{at}.args.{key} (model {model.name!r})"
    if key is not None and key in Settings.__dataclass_fields__:
        return f"settings.{key} (model {model.name!r})"
    return f"{at} (model {model.name!r})"
