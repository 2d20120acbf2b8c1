"""What every command shares: the console, the error handler, the list and KEY=VALUE parsers,
the progress factory, JSON output and :func:`run_attacks`, a run from command-line options.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TypeVar, overload

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from imprint.errors import ConfigError, ImprintError, RunInterrupted

__all__ = [
    "add_row",
    "check_out_file",
    "check_out_folder",
    "console",
    "fail",
    "fit_console",
    "handle_errors",
    "on_interrupt",
    "parse_key_values",
    "parse_list",
    "progress_bars",
    "run_attacks",
    "say",
    "split_key_value",
    "table",
    "warn",
    "write_json",
]


class _Console(Console):
    """A rich console whose rules are one short plain line when the output is not a terminal
    (a rule spans the width, and a pipe's width is :data:`PIPE_WIDTH`)."""

    def rule(self, title: Any = "", *args: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().rule(title, *args, **kwargs)
        else:
            self.print(Text(f"-- {title} --" if title else "--"), soft_wrap=True)


#: columns the output takes when it is a pipe or a file (CI logs, ``| tee``) and ``COLUMNS``
#: is not set: a classic terminal's width; tables wrap their cells (at spaces, nothing cut)
#: and lines wrap at spaces, a path or URL kept whole on its own line
PIPE_WIDTH = 80
console = _Console()


def fit_console() -> None:
    """Lay the console out for where it prints now: a terminal's own width, or (a pipe, a file,
    a test's captured output) :data:`PIPE_WIDTH` columns, unless ``COLUMNS`` says otherwise
    (``COLUMNS=200 imprint ... | less -S`` for wide tables)."""
    import os

    piped = not console.is_terminal and not os.environ.get("COLUMNS")
    console.width = PIPE_WIDTH if piped else None  # type: ignore[assignment]  # None: measure


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
#: ``progress(label, total) -> advance(n)``
ProgressFn = Callable[[str, int], Callable[[int], None]]


def say(message: str, *, label: str = "", style: str = "") -> None:
    """Print ``message`` as plain text: brackets (``llm-imprint[vllm]``) and ``:name:`` emoji
    codes are printed as they are, never parsed; wrapped at spaces to the console's width, a
    long path or URL kept whole (:func:`imprint.report.terminal.print_wrapped`)."""
    from imprint.report.terminal import print_wrapped

    print_wrapped(console, message, label=label, style=style)


def warn(message: str) -> None:
    """Print ``warning: <message>`` (also a ``warning`` event with ``--log-format jsonl``)."""
    from imprint.report.terminal import event

    event("warning", message=message)
    say(message, label="warning:", style="bold yellow")


def fail(err: Exception) -> NoReturn:
    """Print ``error: <message>`` on one line, never wrapped (a log's grep finds it whole), no
    traceback (also an ``error`` event with ``--log-format jsonl``), and exit with code 2."""
    from imprint.report.terminal import event

    message = " ".join(str(err).splitlines()) or type(err).__name__
    event("error", message=message)
    console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    raise typer.Exit(2)


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command: an :class:`ImprintError` or ``ValueError`` raised anywhere in it
    becomes :func:`fail`'s one-line error and exit code 2 (typer's own usage errors, e.g. from
    :func:`parse_list`, keep click's usage message, also exit 2)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with warnings.catch_warnings():  # restores the previous handler after the command
            warnings.showwarning = functools.partial(_show_warning, warnings.showwarning)
            try:
                return command(*args, **kwargs)
            except (ImprintError, ValueError) as err:
                fail(err)
            except KeyboardInterrupt as err:  # Ctrl-C: what the store kept, exit 130 (SIGINT)
                from imprint.report.terminal import event

                line = str(err) if isinstance(err, RunInterrupted) else INTERRUPTED
                event("interrupted", message=line)
                say(line)
                raise typer.Exit(130) from None

    return wrapper


#: Ctrl-C outside a run's model work (which counts what its store kept, RunInterrupted)
INTERRUPTED = (
    "interrupted: the model requests already made are kept in the store; rerun the same "
    "command to resume"
)


def on_interrupt(line: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a command (under :func:`handle_errors`): a Ctrl-C outside a run's model work
    (which says what its store kept, :class:`RunInterrupted`) prints ``line``, e.g. what the
    command keeps on disk and that the same command resumes, and exits 130."""

    def decorate(command: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(command)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return command(*args, **kwargs)
            except RunInterrupted:
                raise
            except KeyboardInterrupt as err:
                raise RunInterrupted(line) from err

        return wrapper

    return decorate


_PACKAGE = str(Path(__file__).resolve().parents[1])  # the imprint package folder


def _show_warning(
    fallback: Callable[..., None],
    message: Any,
    category: type,
    filename: str,
    *args: Any,
    **kwargs: Any,
) -> None:
    """imprint's own warnings (its classes, e.g. LabelConflictWarning, or raised in its code) as
    one ``warning:`` line, without Python's ``path:line: Category:`` prefix; other libraries'
    warnings go to ``fallback``."""
    ours = category.__module__.split(".")[0] == "imprint" or filename.startswith(_PACKAGE)
    if ours:
        warn(str(message))
        return
    from imprint.report.terminal import event, settings

    if settings().log_format == "jsonl":  # stderr stays one JSON object per line
        event("warning", message=str(message), category=category.__name__, source=filename)
    else:
        fallback(message, category, filename, *args, **kwargs)


@overload
def parse_list(text: str, *, option: str, example: str = ...) -> tuple[str, ...]: ...
@overload
def parse_list(
    text: str, *, option: str, convert: Callable[[str], T], example: str = ...
) -> tuple[T, ...]: ...
def parse_list(
    text: str, *, option: str, convert: Callable[[str], Any] = str, example: str = "a,b"
) -> tuple[Any, ...]:
    """``"a, b,,c"`` -> ``(a, b, c)``: comma-separated, items stripped, empty items skipped
    (so ``""`` is the empty list), each passed through ``convert``. An item ``convert`` refuses
    is a usage error naming the option, the item, its position and an example."""
    out: list[Any] = []
    for position, part in enumerate(text.split(","), 1):
        item = part.strip()
        if not item:
            continue
        try:
            out.append(convert(item))
        except ValueError:
            kind = getattr(convert, "__name__", "value")
            raise typer.BadParameter(
                f"item {position}, {item!r}, is not a valid {kind}; use a comma-separated list "
                f"such as {example}",
                param_hint=option,
            ) from None
    return tuple(out)


def split_key_value(item: str, *, option: str, example: str) -> tuple[str, str]:
    """``"KEY=VALUE"`` -> (KEY stripped, VALUE as given; it may hold ``=`` and be empty)."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise typer.BadParameter(
            f"{item!r}: use KEY=VALUE, e.g. {option} {example}", param_hint=option
        )
    return key, value


def parse_key_values(items: Sequence[str], *, option: str, example: str) -> dict[str, str]:
    """Repeated ``KEY=VALUE`` options into {key: value}, in order; a key given twice is a usage
    error (which one was meant is unknowable). Values stay text: the consumer types them."""
    out: dict[str, str] = {}
    for item in items:
        key, value = split_key_value(item, option=option, example=example)
        if key in out:
            raise typer.BadParameter(f"{option} {key} is given twice; keep one", param_hint=option)
        out[key] = value
    return out


@contextmanager
def progress_bars(*, enabled: bool = True) -> Iterator[ProgressFn]:
    """A progress factory ``(label, total) -> advance(n)`` drawing rich bars on the console
    (silent when ``enabled`` is false or the console is not a terminal); stopped on exit."""
    if not enabled:
        yield lambda label, total: lambda n: None
        return
    from imprint.report.progress import rich_bars

    bars = rich_bars(console, unit=None)

    def factory(label: str, total: int) -> Callable[[int], None]:
        task = bars.add_task(label, total=total)
        return lambda n: bars.advance(task, n)

    with bars:
        yield factory


def table(title: str, columns: Sequence[str]) -> Table:
    """A rich table whose title and headers are plain text (paths, data-derived names)."""
    out = Table(title=Text(title))
    for column in columns:
        out.add_column(Text(column))
    return out


def add_row(to: Table, *cells: str) -> None:
    """Add a row of plain-text cells (a ``[`` in a text or feature is never markup)."""
    to.add_row(*(Text(cell) for cell in cells))


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as indented JSON (numpy values and paths converted) and say so."""
    from imprint.report import to_jsonable

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_jsonable(payload), indent=2) + "\n")
    say(f"wrote {path}")


def check_out_file(
    path: Path | None,
    *,
    overwrite: bool = False,
    option: str = "--out",
    config: dict[str, Any] | None = None,
) -> bool:
    """Refuse, before any work, an output file path that cannot or must not be written: a
    folder, a path under a file or an unwritable folder, a file inside an imprint output folder
    (even with ``overwrite``: that output would be left half replaced), or (without
    ``overwrite``) an existing file, unless it is a JSON output whose ``"config"`` equals
    ``config`` (the same command again: True, it is rewritten). Creates nothing (a probe folder
    is made and removed)."""
    if path is None:
        return False
    if path.is_dir():
        raise ConfigError(
            f"{option} {path} is a folder; this command writes one JSON file there. Pass a file "
            f"path, e.g. {option} {path / 'result.json'}"
        )
    from imprint.outdir import KINDS, check_writable, output_kind

    found = output_kind(path.absolute().parent) if path.exists() else None
    if found is not None:  # replacing it would leave half of that output (even with --overwrite)
        raise ConfigError(
            f"{option} {path} is a file of {KINDS[found]}; pass a file path outside it"
        )
    same = False
    if path.exists() and not overwrite:
        differences = _recorded_differences(path, config)
        same = differences == []
        if not same:
            which = f" and holds another configuration ({'; '.join(differences or [])})"
            raise ConfigError(
                f"{option} {path} already exists{which if differences else ''}; pass a new "
                "file path, or add --overwrite to replace it"
            )
    check_writable(path, option)
    return same


def _recorded_differences(path: Path, config: dict[str, Any] | None) -> list[str] | None:
    """How ``config`` differs from the ``"config"`` recorded in the JSON output at ``path``;
    None when there is nothing to compare (no ``config``, or a file that records none)."""
    from imprint.outdir import describe_differences

    if config is None:
        return None
    try:
        earlier = json.loads(path.read_text(encoding="utf-8")).get("config")
    except (OSError, ValueError, AttributeError):
        return None
    return describe_differences(earlier, config) if isinstance(earlier, dict) else None


def check_out_folder(
    path: Path,
    *,
    writes: Sequence[str],
    overwrite: bool = False,
    option: str = "--out",
    kind: str | None = None,
) -> None:
    """Refuse, before any work, an output folder that cannot or must not be written: a file, a
    path under a file or an unwritable folder, an imprint output of another kind than ``kind``
    (even with ``overwrite``; see :func:`imprint.outdir.check_kind`), or (without
    ``overwrite``) a non-empty folder imprint did not write (with ``kind``) or one that already
    holds any of the files ``writes`` names. Creates
    nothing (a probe folder is made and removed)."""
    from imprint.outdir import KINDS, check_writable, output_kind

    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"{option} {path} is a file; this command writes a folder. Pass a folder path (a "
            "new one is made)"
        )
    found = output_kind(path) if kind is not None and path.is_dir() else None
    if found is not None and found != kind:
        raise ConfigError(
            f"{option} {path} is {KINDS[found]}; this command writes {KINDS[kind or found]}, and "
            "--overwrite replaces only an earlier output of the same kind. Pass a new folder"
        )
    clash = [name for name in writes if (path / name).exists()]
    if clash and not overwrite:
        raise ConfigError(
            f"{option} {path} already holds {', '.join(clash)} from an earlier run; pass a new "
            "folder, or add --overwrite to replace them"
        )
    if kind is not None and found is None and not overwrite and path.is_dir():
        names = sorted(p.name for p in path.iterdir())
        if names:  # a folder imprint did not write: writing there would make it count as one
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ConfigError(
                f"{option} {path} is a folder that imprint did not write (not {KINDS[kind]}) and "
                f"holds {len(names)} entries ({shown}). Pass a new folder, or add --overwrite to "
                "write there (files of the same names are replaced, the others kept)"
            )
    check_writable(path, option)


def run_attacks(*, console: Any = None, **flags: Any) -> Any:
    """One run from the command line's options (shorthand flags mapped by
    :func:`imprint.cli.flags.config_from_flags`); returns its ``RunResult``."""
    from imprint.cli.flags import config_from_flags
    from imprint.run import execute_run

    return execute_run(config_from_flags(**flags), console=console)
