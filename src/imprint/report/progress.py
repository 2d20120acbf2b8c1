"""Rich progress bars for long passes (silent when disabled or not on a terminal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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
    return Progress(
        *columns, TimeElapsedColumn(), TimeRemainingColumn(), console=console, **options
    )


class ProgressFactory:
    """Callable ``(label, total) -> advance(n)``; one shared rich Progress for the run."""

    def __init__(self, console: Any = None, *, enabled: bool = True) -> None:
        self._progress: Any = None
        if enabled:
            self._progress = rich_bars(console, transient=False)
            self._progress.start()

    def __call__(self, label: str, total: int) -> Callable[[int], None]:
        if self._progress is None:
            return lambda n: None
        task = self._progress.add_task(label, total=total)
        return lambda n: self._progress.advance(task, n)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def silence_third_party_bars() -> None:
    """Turn off the progress bars of Hugging Face libraries (transformers' "Loading weights",
    the hub's downloads, datasets' map and load bars): imprint draws its own, and theirs fill
    piped logs with carriage returns. Libraries imported already are told now; the environment
    tells those imported later (this process and its workers)."""
    import os
    import sys

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
