"""Intervals read from a bootstrap distribution: the plain percentile interval and Efron's
(1987) BCa ("Better bootstrap confidence intervals", JASA 82), with the several-sample
jackknife acceleration of :mod:`imprint.metrics.jackknife`."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from imprint.metrics.interval import Interval
from imprint.metrics.jackknife import acceleration

__all__ = ["bca_interval", "percentile_interval"]


def percentile_interval(
    estimate: float, values: NDArray[np.float64], confidence: float
) -> Interval:
    alpha = 1.0 - confidence
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate=float(estimate), low=float(low), high=float(high))


def bca_interval(
    estimate: float,
    values: NDArray[np.float64],
    jack: NDArray[np.float64],
    unit_class: NDArray[np.int64],
    confidence: float,
) -> Interval:
    """Efron's (1987) BCa interval from bootstrap ``values`` (NaN left out), leave-one-unit-out
    values ``jack`` and each unit's class (for :func:`acceleration`). The bias correction
    z0 = Phi^-1(share of values below the estimate, ties counting half), kept within
    [1/(2B), 1 - 1/(2B)] so a one-sided bootstrap gives an end quantile, not an infinity."""
    values = values[np.isfinite(values)]
    if not values.size:
        return Interval(float(estimate), math.nan, math.nan)
    normal = NormalDist()
    b = values.size
    below = (np.sum(values < estimate) + 0.5 * np.sum(values == estimate)) / b
    z0 = normal.inv_cdf(min(max(float(below), 0.5 / b), 1 - 0.5 / b))
    a = acceleration(np.asarray(jack, dtype=np.float64), np.asarray(unit_class))
    levels = []
    for tail in ((1 - confidence) / 2, (1 + confidence) / 2):
        z = z0 + normal.inv_cdf(tail)
        levels.append(normal.cdf(z0 + z / (1 - a * z)) if a * z < 1 else float(tail > 0.5))
    low, high = np.quantile(values, levels)
    return Interval(estimate=float(estimate), low=float(low), high=float(high))
