"""How this process talks to its terminal: ``--quiet``, ``--log-format``, and the JSON-lines event
stream, one setting for every stage that prints (the command line sets it once per command).

- text (default): tables and results on stdout; progress bars on stderr only when stderr is a
  terminal, otherwise one line per finished stage (:class:`imprint.report.ProgressFactory`).
- quiet: only results (tables, verdicts, warnings about them, output paths) and errors.
- jsonl: the results as in text; instead of bars and status lines, one JSON object per line on
  stderr (:func:`event`; fields in docs/cli.md, "Output for pipelines").
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOG_FORMATS",
    "Settings",
    "bars_wanted",
    "configure",
    "event",
    "print_wrapped",
    "settings",
    "stage",
    "status",
]

LOG_FORMATS = ("text", "jsonl")


@dataclass
class Settings:
    quiet: bool = False
    log_format: str = "text"


_SETTINGS = Settings()


def configure(*, quiet: bool = False, log_format: str = "text") -> Settings:
    """Set this process's output (the command line's ``--quiet`` and ``--log-format``)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(
            f"--log-format {log_format!r} is not one of {', '.join(LOG_FORMATS)}; use "
            "--log-format jsonl for a JSON-lines event stream on stderr"
        )
    _SETTINGS.quiet, _SETTINGS.log_format = bool(quiet), log_format
    return _SETTINGS


def settings() -> Settings:
    return _SETTINGS


def stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def bars_wanted() -> bool:
    """Progress bars are drawn only on a terminal (stderr), never with --quiet or jsonl."""
    return _SETTINGS.log_format == "text" and not _SETTINGS.quiet and stderr_is_terminal()


def event(name: str, /, **fields: Any) -> None:
    """With ``--log-format jsonl``, one JSON object on stderr: ``{"event": name, "time": Unix
    seconds, **fields}``; nothing otherwise. Values that are not JSON become text."""
    if _SETTINGS.log_format != "jsonl":
        return
    record = {"event": name, "time": round(time.time(), 3), **fields}
    sys.stderr.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
    sys.stderr.flush()


@contextmanager
def stage(name: str) -> Iterator[None]:
    """A stage of a command: ``stage_start`` and ``stage_end`` events (with its seconds, and
    ``status`` done or failed) around it with jsonl; nothing in text mode."""
    started = time.monotonic()
    event("stage_start", stage=name)
    how = "failed"
    try:
        yield
        how = "done"
    finally:
        event("stage_end", stage=name, seconds=round(time.monotonic() - started, 3), status=how)


def status(console: Any, message: str, *, stage: str | None = None) -> None:
    """A line about the work, not its result (a plan, a stage done): printed in text mode,
    an ``info`` event in jsonl, nothing with --quiet."""
    if _SETTINGS.quiet:
        return
    if _SETTINGS.log_format == "jsonl":
        event("info", message=message, **({"stage": stage} if stage else {}))
        return
    if console is not None:
        print_wrapped(console, message)


def print_wrapped(
    console: Any, message: str, *, label: str = "", style: str = "", indent: str = ""
) -> None:
    """Print ``label message`` as plain text (brackets and ``:name:`` codes stay literal)
    wrapped at spaces to the console's width after ``indent``, continuation lines indented two
    spaces more; a word longer than the width (a path, a URL) is kept whole on its own line,
    never cut."""
    import textwrap

    from rich.text import Text

    plain = f"{label} {message}" if label else message
    width = max(20, int(getattr(console, "width", 80) or 80))
    lines = textwrap.wrap(
        plain,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]
    for i, text in enumerate(lines):
        if i == 0 and label and text.startswith(indent + label):
            cut = len(indent) + len(label)
            shown = Text.assemble(indent, (label, style), text[cut:])
        else:
            shown = Text(text)
        console.print(shown, soft_wrap=True)
