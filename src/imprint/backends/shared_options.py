"""The model options a run gives once for every local model (target and references), declared once.

:class:`SharedModelOptions` is the one place these four options are named, typed, defaulted and
explained. Everything else derives from it: the command line's ``--device --dtype --max-length
--start-token`` (:mod:`imprint.cli.options`), ``RunConfig.shared_args`` and its check
(:mod:`imprint.run.plan`), the experiment file's ``settings`` keys (:mod:`imprint.study.spec`)
and the providers' option mapping (:mod:`imprint.backends.providers`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["SHARED_NAMES", "SharedModelOptions", "option", "settings_for"]


def option(default: Any, help: str, *flags: str) -> Any:
    """A declared option: its default, its help line and (where the flag is not ``--name`` with
    dashes) the command line's spellings, kept as field metadata for whoever derives from it."""
    return dataclasses.field(default=default, metadata={"help": help, "flags": flags})


@dataclass(frozen=True, kw_only=True)
class SharedModelOptions:
    """Options of every local model of a run; a provider takes those it has a field for."""

    device: str = option("auto", "cpu, cuda, cuda:N or auto")
    dtype: str = option("auto", "auto, float32, bfloat16, float16")
    max_length: int | None = option(None, "context window for scoring")
    start_token: str = option(
        "auto",
        "token each text is scored after: auto (the model's document separator, e.g. "
        "<|endoftext|> where BOS is a chat marker), bos, none, or a literal token",
    )

    def shared_args(self) -> dict[str, Any]:
        """The options changed from their defaults (``RunConfig.shared_args``)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(SharedModelOptions)
            if getattr(self, f.name) != f.default
        }


#: the shared option names, in declaration order
SHARED_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SharedModelOptions))


def settings_for(options: type, **renamed: str) -> dict[str, str]:
    """A provider's ``settings`` mapping (its option field -> the shared option feeding it):
    every shared option the provider's ``options`` dataclass has a field of the same name for,
    plus ``renamed`` (its field -> a shared name) where the provider names it otherwise."""
    unknown = sorted(set(renamed.values()) - set(SHARED_NAMES))
    if unknown:
        raise ValueError(f"{unknown} are not shared model options ({', '.join(SHARED_NAMES)})")
    fields = {f.name for f in dataclasses.fields(options)}
    return {**{n: n for n in SHARED_NAMES if n in fields}, **renamed}
