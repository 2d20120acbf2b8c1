"""Plots of the benchmark-validity diagnostics (matplotlib imported lazily, Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["plot_group_histograms", "plot_overlap_histograms"]

_LABELS = ((1, "tab:red", "member"), (0, "tab:blue", "non-member"))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n_panels: int, max_cols: int) -> tuple[Any, Any, NDArray[Any]]:
    plt = _pyplot()
    ncols = min(max_cols, n_panels)
    nrows = math.ceil(n_panels / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.8 * nrows), squeeze=False)
    flat = axes.ravel()
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return plt, fig, flat


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_overlap_histograms(
    overlaps: Mapping[int, NDArray[np.float64]],
    labels: NDArray[np.int64],
    path: str | Path,
    *,
    bins: int = 20,
    max_cols: int = 3,
) -> Path:
    """Histograms of ``overlap_n`` per label, one panel per n (MIMIR Figure 3 layout).

    ``overlaps`` maps n to an array of shape (t,) in [0, 1] with NaN for undefined texts (left
    out and counted in the title); ``labels`` has shape (t,), 1 = member. The legend gives each
    label's count and mean overlap.
    """
    plt, fig, flat = _grid(len(overlaps), max_cols)
    edges = np.linspace(0.0, 1.0, bins + 1)
    y = np.asarray(labels)
    for ax, (n, values) in zip(flat, sorted(overlaps.items()), strict=False):
        values = np.asarray(values, dtype=float)
        undefined = int(np.isnan(values).sum())
        title = f"{n}-gram overlap"
        ax.set_title(title + (f" ({undefined} undefined)" if undefined else ""), fontsize="small")
        for label, colour, name in _LABELS:
            group = values[(y == label) & ~np.isnan(values)]
            mean = f", mean {group.mean():.3f}" if group.size else ""
            label_text = f"{name} ({group.size}{mean})"
            ax.hist(group, bins=edges, alpha=0.5, color=colour, label=label_text)
        ax.set_xlabel(f"fraction of {n}-grams in the corpus", fontsize="x-small")
        ax.set_ylabel("texts", fontsize="x-small")
        ax.legend(fontsize="x-small")
        ax.tick_params(labelsize="x-small")
    return _save(plt, fig, path)


def plot_group_histograms(
    scores: Mapping[str, NDArray[np.float64]],
    groups: Sequence[str],
    path: str | Path,
    *,
    order: Sequence[str] | None = None,
    max_cols: int = 3,
) -> Path:
    """Score histograms per group (e.g. natural members, non-members, edit10, ...), one panel
    per attack. ``scores`` maps an attack to shape (t,) (higher = member; NaN left out),
    ``groups`` gives each row's group name, ``order`` the legend order."""
    names = list(order) if order is not None else sorted(set(groups))
    g = np.asarray(groups)
    plt, fig, flat = _grid(len(scores), max_cols)
    for ax, (attack, values) in zip(flat, scores.items(), strict=False):
        values = np.asarray(values, dtype=float)
        finite = np.isfinite(values)
        ax.set_title(attack, fontsize="small")
        if not finite.any():
            ax.text(0.5, 0.5, "no finite scores", ha="center", va="center", transform=ax.transAxes)
            continue
        edges = np.histogram_bin_edges(values[finite], bins=30)
        for name in names:
            group = values[(g == name) & finite]
            if group.size:
                ax.hist(
                    group, bins=edges, histtype="step", density=True, label=f"{name} ({group.size})"
                )
        ax.legend(fontsize="xx-small")
        ax.tick_params(labelsize="x-small")
    return _save(plt, fig, path)
