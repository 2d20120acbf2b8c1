"""Reading a metrics.json back: each helper checks one value and names where a bad one sits."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from imprint.errors import DataError
from imprint.metrics import Interval
from imprint.metrics.bootstrap import fpr_key

T = TypeVar("T")


def bad(where: str, expected: str, value: Any) -> DataError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return DataError(f"{where}: expected {expected}, got {shown}")


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad(where, "an object", value)
    return value


def get(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise DataError(f"{where} lacks {key!r}")
    return data[key]


def num(value: Any, where: str) -> float:
    """A JSON number; null stands for NaN (how NaN is written)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(where, "a number or null", value)
    return float(value)


def integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(where, "an integer", value)
    return value


def text(value: Any, where: str, *, optional: bool = False) -> Any:
    if (value is None and optional) or isinstance(value, str):
        return value
    raise bad(where, "a string" + (" or null" if optional else ""), value)


def json_float(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def interval(value: Any, where: str) -> Interval:
    data = obj(value, where)
    estimate, low, high = (
        num(get(data, k, where), f"{where}.{k}") for k in ("estimate", "low", "high")
    )
    basis = text(data.get("basis"), f"{where}.basis", optional=True)
    return Interval(estimate, low, high, basis)


def fpr_bound(key: str) -> float:
    """``"tpr@0.1%"`` -> 0.001 (the inverse of :func:`fpr_key`)."""
    return round(float(key[4:-1]) / 100, 12)


def is_tpr_key(key: str) -> bool:
    """Whether ``key`` names a TPR column (``tpr@1%``; an FPR bound in (0, 1])."""
    if not (key.startswith("tpr@") and key.endswith("%")):
        return False
    try:
        bound = fpr_bound(key)
    except ValueError:
        return False
    return 0 < bound <= 1 and fpr_key(bound) == key


def optional(
    data: dict[str, Any], key: str, parse: Callable[[Any, str], T], where: str
) -> T | None:
    """``parse(data[key], its place)`` when the key is present and not null, else None."""
    value = data.get(key)
    return None if value is None else parse(value, f"{where}.{key}")
