"""PNG plots for run reports: score histograms, metric-vs-x curves (the ROC curves and the AUC
forest plot are in :mod:`imprint.report.roc_plots`, re-exported here).

Plots are kept apart from the maths: every function takes already-computed arrays, writes one
PNG and returns its path. matplotlib is imported lazily (with the non-interactive Agg backend)
so that importing ``imprint`` never pulls it in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.errors import DataError
from imprint.report.figure_files import pyplot as _pyplot
from imprint.report.figure_files import save_png as _save
from imprint.report.roc_plots import plot_auc_forest, plot_roc

__all__ = ["plot_auc_forest", "plot_metric_vs", "plot_roc", "plot_score_histograms"]


def _histogram_panel(ax: Any, name: str, values: np.ndarray, labels: np.ndarray) -> None:
    finite = np.isfinite(values)
    dropped = int((~finite).sum())
    kind = "NaN" if np.isnan(values[~finite]).all() else "non-finite"
    title = name if not dropped else f"{name} ({dropped} {kind} ignored)"
    ax.set_title(title, fontsize="small")
    if not finite.any():
        ax.text(0.5, 0.5, "no finite scores", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    edges = np.histogram_bin_edges(values[finite], bins=min(30, max(5, int(finite.sum()) // 4)))
    for label, colour, legend in ((1, "tab:red", "member"), (0, "tab:blue", "non-member")):
        group = values[finite & (labels == label)]
        ax.hist(group, bins=edges, alpha=0.5, color=colour, label=f"{legend} ({group.size})")
    ax.legend(fontsize="x-small")
    ax.tick_params(labelsize="x-small")


def plot_score_histograms(
    scores: Mapping[str, np.ndarray],
    labels: np.ndarray,
    path: str | Path,
    *,
    max_cols: int = 4,
) -> Path:
    """Member vs non-member score histograms, one panel per attack; write a PNG, return its path.

    ``scores`` maps an attack name to an array of shape (n,) (higher = member), ``labels`` has
    shape (n,) with 1 = member, 0 = non-member. Each panel overlays both groups on shared bins.
    Non-finite scores (NaN, inf) are left out of the histograms and counted in the panel title.
    Panels are laid out ``max_cols`` per row.
    """
    if not scores:
        raise DataError("plot_score_histograms needs at least one attack; got an empty mapping")
    if max_cols < 1:
        raise DataError(f"max_cols must be >= 1, got {max_cols}")
    y = np.asarray(labels)
    if y.ndim != 1 or not np.isin(y, (0, 1)).all():
        raise DataError("labels must be a 1-D array of 0 (non-member) and 1 (member)")
    arrays = {name: np.asarray(s, dtype=float) for name, s in scores.items()}
    for name, values in arrays.items():
        if values.shape != y.shape:
            raise DataError(
                f"scores for {name!r} have shape {values.shape}, labels have shape {y.shape}; "
                "pass one score per labelled sample"
            )
    plt = _pyplot()
    ncols = min(max_cols, len(arrays))
    nrows = math.ceil(len(arrays) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows), squeeze=False)
    flat = axes.ravel()
    for ax, (name, values) in zip(flat, arrays.items(), strict=False):
        _histogram_panel(ax, name, values, y)
    for ax in flat[len(arrays) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return _save(fig, path)


def plot_metric_vs(
    x: Sequence[float],
    series: Mapping[str, tuple[list[float], list[float], list[float]]],
    path: str | Path,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
) -> Path:
    """Lines with error bars of a metric against ``x``; write a PNG, return its path.

    ``x`` has shape (m,) (e.g. epochs or canary repetitions); ``series`` maps a name to
    ``(estimate, low, high)``, three lists of length m (e.g. AUC and its 95 % bootstrap
    interval). NaN points are left as gaps; a NaN bound draws no bar on that side. ``logx``
    puts ``x`` on a log scale (useful for repetitions 1, 10, 100).
    """
    if not series:
        raise DataError("plot_metric_vs needs at least one series; got an empty mapping")
    xs = np.asarray(x, dtype=float)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, triple in series.items():
        est, low, high = (np.asarray(v, dtype=float) for v in triple)
        if not (est.shape == low.shape == high.shape == xs.shape):
            plt.close(fig)
            raise DataError(
                f"series {name!r}: estimate, low and high must each have {xs.size} values "
                f"(one per x), got {est.size}, {low.size} and {high.size}"
            )
        below = np.nan_to_num(est - low, nan=0.0)
        above = np.nan_to_num(high - est, nan=0.0)
        if (below < 0).any() or (above < 0).any():
            plt.close(fig)
            raise DataError(f"series {name!r}: every interval must satisfy low <= estimate <= high")
        ax.errorbar(xs, est, yerr=np.vstack([below, above]), marker="o", capsize=3, label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)
