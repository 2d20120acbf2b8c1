"""Input checks shared by every metric (private).

Each check raises an error that names the input, says what is wrong and how to fix it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from imprint.errors import ConfigError, DataError


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined for this input (e.g. only one class); the metric is NaN."""


class NotMeasurableWarning(UserWarning):
    """A TPR at an FPR the non-members cannot resolve (fewer than 4/t): the figure is None and
    this warning says why (see :mod:`imprint.metrics.resolution`)."""


def warn_undefined(what: str, n_members: int, n_nonmembers: int, *, stacklevel: int = 3) -> None:
    """Warn that ``what`` is undefined because a class is missing; callers then return NaN."""
    warnings.warn(
        f"{what} is undefined with {n_members} member(s) and {n_nonmembers} non-member(s): "
        "both classes are needed; returning NaN.",
        UndefinedMetricWarning,
        stacklevel=stacklevel,
    )


def as_scores(scores: ArrayLike, *, name: str = "scores") -> NDArray[np.float64]:
    """Return ``scores`` as a 1-D float64 array of shape (n,); NaN is an error."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be real numbers; could not convert them: {exc}") from exc
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-D with one score per sample; got shape {arr.shape}.")
    n_nan = int(np.isnan(arr).sum())
    if n_nan:
        raise DataError(
            f"{name} contain {n_nan} NaN value(s) out of {arr.size}; metrics cannot rank NaN. "
            "Drop or impute those samples before computing metrics (and report how many)."
        )
    return arr


def as_labels_and_scores(
    labels: ArrayLike, scores: ArrayLike
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Validate paired inputs: labels in {0, 1} (1 = member) and scores, both shape (n,).

    Returns ``(is_member, scores)`` with ``is_member`` a boolean array of shape (n,).
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise DataError(f"labels must be 1-D with one label per sample; got shape {lab.shape}.")
    score_arr = as_scores(scores)
    if lab.shape != score_arr.shape:
        raise DataError(
            f"labels and scores must have the same length; got {lab.size} labels "
            f"and {score_arr.size} scores."
        )
    if lab.dtype == np.bool_:
        return lab, score_arr
    try:
        is_one = lab == 1
        is_zero = lab == 0
    except TypeError as exc:  # pragma: no cover - exotic dtypes
        raise DataError(f"labels must be 0 (non-member) or 1 (member): {exc}") from exc
    bad = ~(np.asarray(is_one) | np.asarray(is_zero))
    if bad.any():
        examples = sorted({repr(x) for x in lab[bad][:5].tolist()})
        raise DataError(
            f"labels must be 0 (non-member) or 1 (member); found {int(bad.sum())} other "
            f"value(s), e.g. {', '.join(examples)}. Map your labels to 0/1 first."
        )
    return np.asarray(is_one, dtype=np.bool_), score_arr


def check_fraction(value: float, *, name: str) -> float:
    """Check that ``value`` is a finite number in [0, 1] and return it as float."""
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a number in [0, 1]; got {value!r}.") from exc
    if not (math.isfinite(out) and 0.0 <= out <= 1.0):
        raise ConfigError(
            f"{name} must be a fraction in [0, 1] (e.g. 0.01 for 1 %); got {value!r}."
        )
    return out


def allowed_false_positives(max_fpr: float, n_nonmembers: int) -> int:
    """Largest integer ``k`` in [0, n_nonmembers] with ``k / n_nonmembers <= max_fpr``.

    Computed so that it agrees exactly with the float comparison ``fp / n <= max_fpr``
    used to define every FPR bound in this package.
    """
    if n_nonmembers <= 0:
        return 0
    k = min(int(math.floor(max_fpr * n_nonmembers)), n_nonmembers)
    while k < n_nonmembers and (k + 1) / n_nonmembers <= max_fpr:
        k += 1
    while k > 0 and k / n_nonmembers > max_fpr:
        k -= 1
    return k
