"""Issue 24: the small-multiples ROC figure (more columns than one panel shows, as the demo's 27)
lays its shared legend out below the x label: no text of the legend covers the label, the tick
labels or a panel, whatever the number of rows; the figure's title covers no panel title."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.evaluation.curves import RocCurve
from imprint.metrics import Interval
from imprint.report.roc_plots import roc_figure


def _curve(shift: float, n: int = 74) -> RocCurve:
    fpr = tuple(k / n for k in range(1, n + 1))
    tpr = tuple(float(min(1.0, f ** (1 / (1 + shift)))) for f in fpr)
    return RocCurve(fpr=fpr, tpr=tpr, low=tuple(t * 0.8 for t in tpr),
                    high=tuple(min(1.0, t * 1.2) for t in tpr), n_members=74, n_nonmembers=n,
                    n_resamples=1000, confidence=0.95, resamples="texts", method="bca")  # fmt: skip


@pytest.mark.parametrize("columns", [11, 27])
def test_the_shared_legend_never_covers_the_x_label_or_a_panel(columns: int):
    curves = {f"attack_{i}": _curve(i / 10) for i in range(columns)}
    aucs = {c: Interval(0.5 + i / 100, 0.45 + i / 100, 0.55 + i / 100)
            for i, c in enumerate(curves)}  # fmt: skip
    blind = ("greedy_ngrams", _curve(0.05), Interval(0.51, 0.2, 0.8))
    fig = roc_figure(curves, aucs=aucs, blind=blind)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    xlabel = fig._supxlabel.get_window_extent(renderer)
    assert legend.y1 <= xlabel.y0 + 1, (legend, xlabel)  # the label sits above the legend
    assert not legend.overlaps(xlabel)
    for ax in fig.axes:
        if ax.get_visible():  # every panel and its tick labels stay above both
            assert ax.get_tightbbox(renderer).y0 >= xlabel.y1 - 1, ax.get_title()
    width, height = fig.get_size_inches() * fig.dpi
    assert legend.y0 >= 0 and legend.x0 >= 0 and legend.x1 <= width  # inside the figure
    title = fig._suptitle.get_window_extent(renderer)
    assert title.y1 <= height + 1
    for ax in fig.axes:  # nor does the figure's title cover a panel's own title
        if ax.get_visible():
            assert not title.overlaps(ax.title.get_window_extent(renderer)), ax.get_title()
    assert np.isfinite([legend.y0, xlabel.y0]).all()
