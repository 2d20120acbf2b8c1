"""matplotlib for every report figure: the headless backend, and one way to write a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DPI", "pyplot", "save_png"]

DPI = 120  # every report PNG: readable embedded in the HTML page, small enough to inline


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display; imported only when drawing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: str | Path, *, tight: bool = False) -> Path:
    """Write ``fig`` to ``path`` (parents made) at :data:`DPI`, close it, return the path;
    ``tight`` crops to what is drawn (the ROC and forest legends sit outside their axes)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, format="png", bbox_inches="tight" if tight else None)
    pyplot().close(fig)
    return out
