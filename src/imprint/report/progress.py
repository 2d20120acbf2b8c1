"""Progress for long passes: rich bars on a terminal (stderr), one line per finished stage in a
log, progress events with ``--log-format jsonl``, nothing with ``--quiet``
(:mod:`imprint.report.terminal`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from imprint.report.terminal import bars_wanted, event, settings, status


def rich_bars(console: Any = None, *, unit: str | None = "tokens", **options: Any) -> Any:
    """A rich ``Progress`` with imprint's columns: description, bar, done/total, ``unit`` (a
    literal, or a template such as ``"{task.fields[unit]}"``; None: no unit column), elapsed
    and remaining time. ``options`` go to ``Progress`` (``disable``, ``transient``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    units = [] if unit is None else [TextColumn(unit)]
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *units]
    if not bars_wanted():  # a log, a pipe, --quiet or jsonl: no bar (no carriage returns)
        options["disable"] = True
    elif not getattr(console, "stderr", False):
        from rich.console import Console

        console = Console(stderr=True)  # bars on stderr: stdout keeps the results
        # prints to stdout go above the bars only when stdout is the same terminal
        options.setdefault("redirect_stdout", sys.stdout.isatty())
    return Progress(
        *columns, TimeElapsedColumn(), TimeRemainingColumn(), console=console, **options
    )


class _Stage:
    """One progress task outside a terminal: counted, said once when done."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, int(total), 0
        self.started = self.said = time.monotonic()
        self.ended = False


#: seconds between two ``progress`` events of one stage (jsonl)
EVENT_INTERVAL_S = 1.0


class ProgressFactory:
    """Callable ``(label, total) -> advance(n)``; one shared rich Progress for the run on a
    terminal. Elsewhere each task is one stage: a ``label: done/total in S s`` line when it
    ends (jsonl: ``stage_start``, ``progress`` at most every second, ``stage_end`` events)."""

    def __init__(self, console: Any = None, *, enabled: bool = True) -> None:
        self._progress: Any = None
        self._console = console
        self._enabled = enabled
        self._stages: list[_Stage] = []
        if enabled and bars_wanted():
            self._progress = rich_bars(console, transient=False)
            self._progress.start()

    def __call__(self, label: str, total: int) -> Callable[[int], None]:
        if not self._enabled:
            return lambda n: None
        if self._progress is not None:
            task = self._progress.add_task(label, total=total)
            return lambda n: self._progress.advance(task, n)
        stage = _Stage(label, total)
        self._stages.append(stage)
        event("stage_start", stage=label, total=stage.total)

        def advance(n: int) -> None:
            stage.done += int(n)
            now = time.monotonic()
            if stage.done >= stage.total:
                self._end(stage)
            elif now - stage.said >= EVENT_INTERVAL_S:
                stage.said = now
                event("progress", stage=label, done=stage.done, total=stage.total)

        return advance

    def _end(self, stage: _Stage, how: str = "done") -> None:
        if stage.ended:
            return
        stage.ended = True
        seconds = round(time.monotonic() - stage.started, 3)
        if settings().log_format == "jsonl":
            event("stage_end", stage=stage.label, done=stage.done, total=stage.total,
                  seconds=seconds, status=how)  # fmt: skip
            return
        stopped = "" if how == "done" else f" ({how})"
        status(self._console, f"{stage.label}: {stage.done:,}/{stage.total:,} in {seconds:.1f} s"
               f"{stopped}")  # fmt: skip

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        for stage in self._stages:  # a stage cut short (Ctrl-C, an error) says where it stopped
            if stage.done:
                self._end(stage, "stopped")
            stage.ended = True


def silence_third_party_bars() -> None:
    """Turn off the progress bars of Hugging Face libraries (transformers' "Loading weights",
    the hub's downloads, datasets' map and load bars): imprint draws its own, and theirs fill
    piped logs with carriage returns. Where imprint draws no bars (not a terminal, --quiet,
    jsonl), every other tqdm bar too (transformers' GGUF conversion, ~20 carriage-return
    updates per model): ``TQDM_DISABLE`` for tqdm imported later, a patched default for a
    tqdm imported already. Libraries imported already are told now; the environment tells
    those imported later (this process and its workers)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if not bars_wanted():
        os.environ["TQDM_DISABLE"] = "1"  # read by tqdm when it is imported (tqdm >= 4.66)
        if "tqdm" in sys.modules:
            _disable_tqdm(sys.modules["tqdm"])


def _disable_tqdm(tqdm_module: Any) -> None:
    """Make ``disable=True`` the default of a tqdm imported before :func:`silence_third_party_bars`
    (a bar asked for with ``disable=False`` explicitly still shows)."""
    import functools

    cls = tqdm_module.std.tqdm
    if getattr(cls, "_imprint_disabled", False):
        return
    init = cls.__init__

    @functools.wraps(init)
    def quiet_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("disable", True)
        init(self, *args, **kwargs)

    cls.__init__ = quiet_init
    cls._imprint_disabled = True
