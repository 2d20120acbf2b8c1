"""The experiment grid's live display: one rich progress view for its cells and every run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imprint.report.progress import rich_bars

__all__ = ["GridProgress"]


class GridProgress:
    """One rich display for the whole grid: its cells bar and every run's scoring bars (handed
    to ``execute_run`` as its progress factory, so they share the one live display)."""

    def __init__(self, console: Any = None, *, enabled: bool = True) -> None:
        self._bars: Any = None
        if enabled:
            self._bars = rich_bars(console, unit="{task.fields[unit]}")
            self._bars.start()

    def __call__(self, label: str, total: int, *, unit: str = "tokens") -> Callable[[int], None]:
        if self._bars is None:
            return lambda n: None
        task = self._bars.add_task(label, total=total, unit=unit)
        return lambda n: self._bars.advance(task, n)

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
