"""The run report's ROC curves and AUC forest plot, drawn from what the evaluation computed.

Every curve is a :class:`~imprint.evaluation.curves.RocCurve`: the TPR at FPR <= k/n and its
bootstrap band (the same draws as the table's intervals). Drawn as steps on log-log axes; the
FPRs below the lowest the run resolves (4/n for n non-members, or n non-member documents where
the bands resample documents; the tables' rule:
:func:`~imprint.metrics.resolution.lowest_resolvable_fpr`) are shaded. A zero TPR has no
place on a log axis and is left out (never pinned to a floor), so no straight segment is ever
drawn between two measured points. Up to ``max_overlay`` columns share one panel, each in its
own colour; past that each column gets its own panel (small multiples), sorted by AUC. The
strongest blind baseline is the dashed curve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from imprint.errors import DataError
from imprint.evaluation.curves import RocCurve
from imprint.metrics import Interval
from imprint.metrics.resolution import MIN_FALSE_POSITIVES, lowest_resolvable_fpr
from imprint.report.cells import by_auc
from imprint.report.figure_files import pyplot as _pyplot
from imprint.report.figure_files import save_png

__all__ = ["forest_figure", "plot_auc_forest", "plot_roc", "roc_figure"]

MAX_OVERLAY = 10
BLIND_COLOUR = "black"
_SHADE = {"color": "0.85", "zorder": 0}


def _save(fig: Any, path: str | Path) -> Path:
    return save_png(fig, path, tight=True)  # the legends sit outside the axes


def _label(name: str, auc: Interval | None) -> str:
    if auc is None or math.isnan(auc.estimate):
        return name
    return f"{name} (AUC {auc.estimate:.3f} [{auc.low:.3f}, {auc.high:.3f}])"


def _draw_curve(ax: Any, curve: RocCurve, colour: Any, label: str, *, band: bool) -> None:
    fpr, tpr = np.asarray(curve.fpr), np.asarray(curve.tpr)
    ax.plot(fpr, tpr, drawstyle="steps-post", color=colour, lw=1.6, label=label)
    if band:
        # a band reaching TPR 0 runs to the axis' bottom edge: masking it on the log axis
        # would join the neighbouring points by slanted edges
        floor = ax.get_ylim()[0]
        low = np.maximum(np.nan_to_num(np.asarray(curve.low), nan=floor), floor)
        high = np.maximum(np.nan_to_num(np.asarray(curve.high), nan=floor), floor)
        ax.fill_between(
            fpr,
            low,
            high,
            step="post",
            color=colour,
            alpha=0.18,
            lw=0,
            label=f"{label.split(' (')[0]}: {curve.band_label()}",
        )


def _draw_frame(ax: Any, frame: _Frame, *, labels: bool = True) -> None:
    """Log axes from a decade below 1/n, the FPRs the tables do not resolve shaded (the one
    rule of :mod:`imprint.metrics.resolution`: non-member documents count where the bands
    resample documents), chance dashed."""
    n_nonmembers, n_members, (counted, what) = frame
    smallest = lowest_resolvable_fpr(counted)
    x0 = 10 ** math.floor(math.log10(0.5 / n_nonmembers))
    y0 = 10 ** math.floor(math.log10(0.5 / max(n_members, 1)))
    ax.set_xscale("log")
    ax.set_yscale("log", nonpositive="mask")
    ax.axvspan(
        x0,
        smallest,
        **_SHADE,
        label=f"FPR < {MIN_FALSE_POSITIVES}/{counted}: not measurable with {counted} {what}",
    )
    ax.plot([x0, 1], [x0, 1], ls=":", color="grey", lw=1, label="chance (TPR = FPR)")
    ax.set_xlim(x0, 1.0)
    ax.set_ylim(y0, 1.05)
    ax.minorticks_off()  # log minor ticks: many panels' layout would take seconds
    ax.grid(True, which="major", alpha=0.3)
    if labels:
        ax.set_xlabel("False positive rate")
        ax.set_ylabel("True positive rate")


#: (non-members, members, (what the resolution rule counts, its name))
_Frame = tuple[int, int, tuple[int, str]]


def _check(curves: Mapping[str, RocCurve]) -> _Frame:
    if not curves:
        raise DataError("plot_roc needs at least one curve; got an empty mapping")
    counts = {(c.n_nonmembers, c.n_members) for c in curves.values()}
    n_neg = min(n for n, _ in counts)
    if n_neg < 1:
        raise DataError("plot_roc: every curve needs at least one non-member")
    counted = min(
        (c.n_nonmembers, "non-members")
        if c.n_nonmember_units is None
        else (c.n_nonmember_units, f"non-member {c.resamples}")
        for c in curves.values()
    )
    return n_neg, min(m for _, m in counts), counted


def _colours(k: int) -> list[Any]:
    """k colours, none repeated: tab10, tab20, or an even walk round a perceptual map."""
    plt = _pyplot()
    if k <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(k)]
    if k <= 20:
        return [plt.get_cmap("tab20")(i) for i in range(k)]
    return [plt.get_cmap("turbo")(x) for x in np.linspace(0.05, 0.95, k)]


def roc_figure(
    curves: Mapping[str, RocCurve],
    *,
    aucs: Mapping[str, Interval],
    blind: tuple[str, RocCurve, Interval | None] | None = None,
    title: str = "ROC (log-log, step)",
    max_overlay: int = MAX_OVERLAY,
) -> Any:
    """The ROC figure (a matplotlib Figure): ``curves`` maps a column to its curve, ``aucs`` a
    column to its AUC interval (legend and order), ``blind`` the strongest blind baseline as
    (name, curve, its selection-adjusted AUC interval), drawn dashed without a band. One panel
    up to ``max_overlay`` columns, else one panel per column."""
    frame = _check(curves)
    order = by_auc({c: aucs.get(c, Interval(math.nan, math.nan, math.nan)) for c in curves})
    if len(order) <= max_overlay:
        return _overlay(curves, order, aucs, blind, title, frame)
    return _multiples(curves, order, aucs, blind, title, frame)


def _blind_line(ax: Any, blind: tuple[str, RocCurve, Interval | None] | None) -> None:
    if blind is None:
        return
    name, curve, auc = blind
    fpr, tpr = np.asarray(curve.fpr), np.asarray(curve.tpr)
    ax.plot(
        fpr,
        tpr,
        drawstyle="steps-post",
        ls="--",
        color=BLIND_COLOUR,
        lw=1.4,
        label=_blind_label(name, auc),
    )


def _blind_label(name: str, auc: Interval | None) -> str:
    """The AUC is the selection-adjusted interval; the curve is the chosen classifier's own."""
    label = f"blind baseline, no model: {name}"
    if auc is None or math.isnan(auc.estimate):
        return f"{label} (curve not selection-adjusted, no band)"
    return (
        f"{label} (AUC {auc.estimate:.3f} [{auc.low:.3f}, {auc.high:.3f}], selection-adjusted; "
        "curve not selection-adjusted, no band)"
    )


def _overlay(curves, order, aucs, blind, title, frame) -> Any:  # type: ignore[no-untyped-def]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    _draw_frame(ax, frame)
    for name, colour in zip(order, _colours(len(order)), strict=True):
        _draw_curve(ax, curves[name], colour, _label(name, aucs.get(name)), band=True)
    _blind_line(ax, blind)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    return fig


def _multiples(curves, order, aucs, blind, title, frame) -> Any:  # type: ignore[no-untyped-def]
    plt = _pyplot()
    ncols = min(6, len(order))
    nrows = math.ceil(len(order) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.3 * ncols, 2.2 * nrows), sharex=True, sharey=True, squeeze=False
    )
    flat = list(axes.ravel())
    colour = plt.get_cmap("tab10")(0)
    for ax, name in zip(flat, order, strict=False):
        _draw_frame(ax, frame, labels=False)
        _draw_curve(ax, curves[name], colour, name, band=True)
        _blind_line(ax, blind)
        auc = aucs.get(name)
        ax.set_title(_label(name, auc).replace(" (AUC ", "\nAUC ").rstrip(")"), fontsize="small")
        ax.tick_params(labelsize="x-small")
    for ax in flat[len(order) :]:
        ax.set_visible(False)
    handles, labels = flat[0].get_legend_handles_labels()
    labels = [_generic(label, order[0]) for label in labels]
    # laid out in inches, bottom up: the legend, the x label above it, the tick labels, the
    # panels, the title; so the legend never covers the x label whatever the rows (the figure
    # grows by what the legend needs)
    legend_in = 0.22 * math.ceil(len(labels) / 2) + 0.1
    label_in, ticks_in, top_in = 0.3, 0.3, 0.85  # top: the title over two-line panel titles
    bottom_in = legend_in + label_in + ticks_in
    height = 2.2 * nrows + bottom_in + top_in
    fig.set_size_inches(2.3 * ncols, height)
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.04 / height),
               ncols=2, fontsize="small", frameon=False)  # fmt: skip
    fig.supxlabel("False positive rate", y=(legend_in + 0.05) / height, va="bottom")
    fig.supylabel("True positive rate")
    fig.suptitle(f"{title}: one panel per column, by AUC", y=1 - 0.1 / height, va="top")
    fig.subplots_adjust(
        left=0.07,
        right=0.98,
        bottom=bottom_in / height,
        top=1 - top_in / height,
        hspace=0.55,
        wspace=0.12,
    )  # tight_layout: seconds per panel
    return fig


def _generic(label: str, first: str) -> str:
    """A shared legend entry: the first panel's column name made generic."""
    if label == first:
        return "attack (its own panel)"
    return label.replace(f"{first}: ", "attack: ")


def plot_roc(
    curves: Mapping[str, RocCurve],
    path: str | Path,
    *,
    aucs: Mapping[str, Interval],
    blind: tuple[str, RocCurve, Interval | None] | None = None,
    title: str = "ROC (log-log, step)",
    max_overlay: int = MAX_OVERLAY,
) -> Path:
    """:func:`roc_figure` written to ``path`` (PNG); returns the path."""
    fig = roc_figure(curves, aucs=aucs, blind=blind, title=title, max_overlay=max_overlay)
    return _save(fig, path)


def forest_figure(
    aucs: Mapping[str, Interval],
    *,
    blind: tuple[str, Interval] | None = None,
    interval_note: str = "95 % bootstrap intervals",
    verdict: Any = None,
    beats: Mapping[str, bool] | None = None,
) -> Any:
    """AUC with its interval per column (highest on top), chance at 0.5, and the blind
    baseline's interval as a shaded band labelled with ``verdict``'s state (a
    :class:`~imprint.diagnostics.blind_verdict.BlindVerdict`). With ``beats`` (column -> shown
    to beat the text by the paired test) those columns' markers are filled, the others hollow:
    a marker's place against the band decides nothing."""
    if not aucs:
        raise DataError("plot_auc_forest needs at least one AUC; got an empty mapping")
    plt = _pyplot()
    order = by_auc(aucs)[::-1]  # matplotlib counts rows from the bottom
    fig, ax = plt.subplots(figsize=(6.5, 0.28 * len(order) + 1.6))
    if blind is not None and not math.isnan(blind[1].estimate):
        name, b = blind
        ax.axvspan(
            b.low,
            b.high,
            color="0.8",
            zorder=0,
            label=_band_label(name, b, verdict),
        )
        ax.axvline(b.estimate, color=BLIND_COLOUR, ls="--", lw=1)
    ax.axvline(0.5, color="grey", ls=":", lw=1, label="chance (0.5)")
    y = np.arange(len(order))
    est = np.array([aucs[n].estimate for n in order])
    low = np.nan_to_num(est - np.array([aucs[n].low for n in order]), nan=0.0)
    high = np.nan_to_num(np.array([aucs[n].high for n in order]) - est, nan=0.0)
    xerr = np.vstack([np.maximum(low, 0), np.maximum(high, 0)])
    filled = np.array([beats is None or bool(beats.get(n)) for n in order])
    for mask, face, what in ((filled, "tab:blue", ""), (~filled, "white", "")):
        if not mask.any():
            continue
        if beats is not None:
            what = ", beats the text (paired)" if face != "white" else ", not shown to beat it"
        ax.errorbar(est[mask], y[mask], xerr=xerr[:, mask], fmt="o", color="tab:blue",
                    mfc=face, capsize=2, ms=4, label=f"AUC, {interval_note}{what}")  # fmt: skip
    ax.set_yticks(y, order, fontsize="small")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("AUC")
    ax.set_title("AUC per column, with intervals")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(0.0, -0.12 - 1.0 / (len(order) + 6)),
        fontsize="small",
        frameon=False,
    )
    return fig


def _band_label(name: str, b: Interval, verdict: Any) -> str:
    shown = f"{name} {b.estimate:.3f} [{b.low:.3f}, {b.high:.3f}]"
    state = f" ({verdict.headline})" if verdict is not None else ""
    return f"blind baseline, no model{state}: {shown}"


def plot_auc_forest(
    aucs: Mapping[str, Interval],
    path: str | Path,
    *,
    blind: tuple[str, Interval] | None = None,
    interval_note: str = "95 % bootstrap intervals",
    verdict: Any = None,
    beats: Mapping[str, bool] | None = None,
) -> Path:
    """:func:`forest_figure` written to ``path`` (PNG); returns the path."""
    fig = forest_figure(
        aucs, blind=blind, interval_note=interval_note, verdict=verdict, beats=beats
    )
    return _save(fig, path)
