"""Rich progress bars for long passes (silent when disabled or not on a terminal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ProgressFactory:
    """Callable ``(label, total) -> advance(n)``; one shared rich Progress for the run."""

    def __init__(self, console: Any = None, *, enabled: bool = True) -> None:
        self._progress: Any = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tokens"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
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
