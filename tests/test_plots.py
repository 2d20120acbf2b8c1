"""Report plots: each writes a readable, non-empty PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from imprint.errors import DataError
from imprint.report.plots import plot_metric_vs, plot_roc, plot_score_histograms

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.exists()
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[0] > 0 and image.shape[1] > 0


def _roc(n: int = 200, shift: float = 1.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(shift, 1, n), rng.normal(0, 1, n)])
    labels = np.array([1] * n + [0] * n)
    order = np.argsort(-scores)
    tpr = np.concatenate([[0.0], np.cumsum(labels[order]) / n])
    fpr = np.concatenate([[0.0], np.cumsum(1 - labels[order]) / n])
    auc = float(np.trapezoid(tpr, fpr))
    return fpr, tpr, auc


def test_plot_roc_several_curves(tmp_path):
    curves = {"loss": _roc(shift=1.0), "zlib": _roc(shift=0.3, seed=1)}
    out = plot_roc(curves, tmp_path / "sub" / "roc.png", title="test")
    assert out == tmp_path / "sub" / "roc.png"
    _assert_png(out)


def test_plot_roc_single_curve_with_zeros_and_nan(tmp_path):
    fpr = np.array([0.0, 0.0, 0.5, np.nan, 1.0])
    tpr = np.array([0.0, 0.5, 0.5, 1.0, 1.0])
    _assert_png(plot_roc({"only": (fpr, tpr, float("nan"))}, tmp_path / "roc.png"))


def test_plot_roc_errors(tmp_path):
    with pytest.raises(DataError):
        plot_roc({}, tmp_path / "x.png")
    with pytest.raises(DataError, match="equal length"):
        plot_roc({"a": (np.zeros(3), np.zeros(4), 0.5)}, tmp_path / "x.png")


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
