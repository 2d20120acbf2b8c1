"""Report plots: each writes a readable, non-empty PNG; the ROC figure draws the evaluated step
curves exactly, its bands, the blind baseline and the unmeasurable region."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from imprint.errors import DataError
from imprint.evaluation.curves import RocCurve, roc_with_band
from imprint.evaluation.evaluate import column_metrics
from imprint.metrics import Interval
from imprint.report.plots import plot_auc_forest, plot_metric_vs, plot_roc, plot_score_histograms
from imprint.report.roc_plots import forest_figure, roc_figure

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.exists()
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[0] > 0 and image.shape[1] > 0


def _curve(n: int = 40, shift: float = 1.0, seed: int = 0) -> tuple[RocCurve, Interval]:
    """A real evaluated curve: n members, n non-members, scores shifted by ``shift``."""
    rng = np.random.default_rng(seed)
    labels = np.array([1] * n + [0] * n)
    scores = np.concatenate([rng.normal(shift, 1, n), rng.normal(0, 1, n)])
    curve = roc_with_band(labels, scores, n_bootstrap=200, seed=0)
    assert curve is not None
    auc = column_metrics(labels, scores, n_bootstrap=200, seed=0).auc
    return curve, auc


def _curves(k: int, n: int = 40) -> tuple[dict[str, RocCurve], dict[str, Interval]]:
    pairs = {f"attack{i:02d}": _curve(n, shift=0.1 * i, seed=i) for i in range(k)}
    return {c: p[0] for c, p in pairs.items()}, {c: p[1] for c, p in pairs.items()}


def _span(patch) -> tuple[float, float]:
    """The x extent (data units) of an axvspan."""
    return patch.get_x(), patch.get_x() + patch.get_width()


def _attack_lines(ax, names):
    return [line for line in ax.get_lines() if line.get_label().split(" (")[0] in names]


def test_roc_is_a_step_curve_from_one_over_n_with_the_unmeasurable_region_shaded():
    curves, aucs = _curves(3, n=40)
    fig = roc_figure(curves, aucs=aucs)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = _attack_lines(ax, curves)
    assert len(lines) == 3
    for line in lines:
        assert line.get_drawstyle() == "steps-post"
        name = line.get_label().split(" (")[0]
        x, y = (np.asarray(v, float) for v in line.get_data())
        # drawn exactly as evaluated: starts at 1/n, no rate pinned to a floor, no extra points
        assert x.min() == pytest.approx(1 / 40)
        np.testing.assert_array_equal(x, curves[name].fpr)
        np.testing.assert_array_equal(y, curves[name].tpr)
    lo, _ = ax.get_xlim()
    assert lo < 1 / 40
    shaded = [p for p in ax.patches if "not measurable" in p.get_label()]
    assert len(shaded) == 1
    # shaded up to the lowest FPR the tables resolve: 4 false positives, 4/40
    assert _span(shaded[0]) == pytest.approx((lo, 4 / 40))


def test_roc_bands_are_the_evaluation_bootstrap_and_say_what_they_resample():
    curves, aucs = _curves(2)
    ax = roc_figure(curves, aucs=aucs).axes[0]
    bands = [c for c in ax.collections if "bootstrap band" in str(c.get_label())]
    assert len(bands) == 2
    assert all("200 resamples of texts" in b.get_label() for b in bands)


def test_blind_baseline_curve_is_dashed():
    curves, aucs = _curves(2)
    blind_curve, blind_auc = _curve(shift=2.0, seed=9)
    ax = roc_figure(curves, aucs=aucs, blind=("greedy_ngrams", blind_curve, blind_auc)).axes[0]
    blind = [line for line in ax.get_lines() if "greedy_ngrams" in line.get_label()]
    assert len(blind) == 1 and blind[0].get_linestyle() == "--"
    assert "blind" in blind[0].get_label()
    # review 14: the AUC beside it is selection-adjusted, the curve (the strongest classifier's
    # own) is not, and it has no band
    assert "selection-adjusted" in blind[0].get_label()
    assert "curve not selection-adjusted" in blind[0].get_label()
    assert not [c for c in ax.collections if "greedy_ngrams" in str(c.get_label())]


def test_roc_legend_is_outside_the_axes_and_colours_never_repeat():
    curves, aucs = _curves(10)
    fig = roc_figure(curves, aucs=aucs)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1
    colours = [tuple(line.get_color()) for line in _attack_lines(ax, curves)]
    assert len(colours) == 10 and len(set(colours)) == 10
    # the legend lists the columns by AUC, highest first
    names = [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()]
    listed = [n for n in names if n in curves]
    assert listed == sorted(curves, key=lambda c: -aucs[c].estimate)


def test_roc_past_ten_columns_is_small_multiples_sorted_by_auc():
    curves, aucs = _curves(27, n=20)
    fig = roc_figure(curves, aucs=aucs)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_lines()]
    assert len(panels) == 27
    titles = [ax.get_title().split("\n")[0] for ax in panels]
    assert titles == sorted(curves, key=lambda c: -aucs[c].estimate)
    for ax in panels:
        assert len(_attack_lines(ax, curves)) == 1


def test_plot_roc_writes_a_png(tmp_path):
    curves, aucs = _curves(3)
    out = plot_roc(curves, tmp_path / "sub" / "roc.png", aucs=aucs)
    assert out == tmp_path / "sub" / "roc.png"
    _assert_png(out)


def test_plot_roc_errors(tmp_path):
    with pytest.raises(DataError, match="at least one curve"):
        plot_roc({}, tmp_path / "x.png", aucs={})


def test_auc_forest_has_intervals_sorted_by_auc_and_the_blind_band(tmp_path):
    _, aucs = _curves(5)
    blind = Interval(0.9, 0.8, 0.97)
    fig = forest_figure(aucs, blind=("greedy_ngrams", blind))
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks[::-1] == sorted(aucs, key=lambda c: -aucs[c].estimate)  # highest on top
    band = [p for p in ax.patches if "greedy_ngrams" in p.get_label()]
    assert len(band) == 1
    assert _span(band[0]) == pytest.approx((0.8, 0.97))
    bars = [c for c in ax.containers if "AUC" in str(c.get_label())]
    assert bars, "no error bars"
    _assert_png(plot_auc_forest(aucs, tmp_path / "forest.png", blind=("b", blind)))


def test_plot_score_histograms_with_nans(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.array([1] * 50 + [0] * 50)
    scores = {f"attack{i}": rng.normal(size=100) + labels * i for i in range(5)}
    scores["attack0"][:7] = np.nan
    scores["all_nan"] = np.full(100, np.nan)
    scores["constant"] = np.ones(100)
    _assert_png(plot_score_histograms(scores, labels, tmp_path / "hist.png", max_cols=3))


def test_plot_score_histograms_single_attack(tmp_path):
    labels = np.array([0, 1, 0, 1])
    _assert_png(plot_score_histograms({"loss": np.arange(4.0)}, labels, tmp_path / "h.png"))


def test_plot_score_histograms_errors(tmp_path):
    with pytest.raises(DataError, match="shape"):
        plot_score_histograms({"a": np.zeros(3)}, np.array([0, 1]), tmp_path / "h.png")
    with pytest.raises(DataError, match="0 .non-member."):
        plot_score_histograms({"a": np.zeros(2)}, np.array([0, 2]), tmp_path / "h.png")


def test_plot_metric_vs(tmp_path):
    x = [1, 10, 100]
    series = {
        "loss": ([0.55, 0.7, 0.95], [0.5, 0.65, 0.9], [0.6, 0.75, 0.99]),
        "zlib": ([0.52, float("nan"), 0.9], [0.48, float("nan"), 0.85], [0.56, 0.7, 0.95]),
    }
    out = plot_metric_vs(
        x, series, tmp_path / "m.png", xlabel="repetitions", ylabel="AUC", title="t", logx=True
    )
    _assert_png(out)


def test_plot_metric_vs_single_series_and_errors(tmp_path):
    _assert_png(
        plot_metric_vs(
            [1], {"a": ([0.5], [0.4], [0.6])}, tmp_path / "m.png", xlabel="e", ylabel="A", title=""
        )
    )
    with pytest.raises(DataError, match="one per x"):
        plot_metric_vs(
            [1, 2], {"a": ([0.5], [0.4], [0.6])}, tmp_path / "m.png", xlabel="", ylabel="", title=""
        )
    with pytest.raises(DataError, match="low <= estimate"):
        plot_metric_vs(
            [1], {"a": ([0.5], [0.6], [0.7])}, tmp_path / "m.png", xlabel="", ylabel="", title=""
        )
