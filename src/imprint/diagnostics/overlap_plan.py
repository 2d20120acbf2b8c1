"""What an n-gram index is planned and filled with, shared by the local build
(:mod:`.overlap`) and the Ray build (:mod:`.overlap_ray`), so neither imports the other's module
at load time (overlap asks overlap_ray to fill only when the executor is Ray)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imprint.diagnostics.bloom_filters import plan_filter
from imprint.diagnostics.corpus import Unit
from imprint.errors import ConfigError

#: ``progress(label, total) -> advance(n)``: a progress factory, e.g. the CLI's rich bars
Progress = Callable[[str, int], Callable[[int], None]]


@dataclass(frozen=True)
class IndexSettings:
    """What an index is built with, as its manifest records it."""

    ns: list[int]
    fp_rate_target: float
    unit: Unit
    text_field: str | None


@dataclass
class Filled:
    """Filters filled over a corpus, before they are saved: the sizes they were planned for
    (``caps``, ``plans``), the filters, the n-grams inserted per n, the corpus files' statistics
    and ``extra`` manifest keys (where they were built)."""

    caps: dict[int, int]
    plans: dict[int, dict[str, Any]]
    blooms: dict[int, Any]
    inserted: dict[int, int]
    corpus: list[Any]
    extra: dict[str, Any]


def plan_filters(
    caps: dict[int, int], fp_rate: float, max_memory_gb: float | None
) -> dict[int, dict[str, Any]]:
    """Each n's filter plan at ``fp_rate`` for its capacity; refused above ``max_memory_gb``."""
    plans = {n: plan_filter(max(1, cap), fp_rate) for n, cap in caps.items()}
    _check_memory(plans, caps, fp_rate, max_memory_gb)
    return plans


def _check_memory(
    plans: dict[int, dict[str, Any]],
    caps: dict[int, int],
    fp_rate: float,
    max_memory_gb: float | None,
) -> None:
    """Refuse filters whose total size is above ``max_memory_gb`` before allocating them."""
    need_gb = sum(p["size_in_bits"] for p in plans.values()) / 8 / 1e9
    if max_memory_gb is not None and need_gb > max_memory_gb:
        raise ConfigError(
            f"the filters need {need_gb:.2f} GB for capacities {caps} at fp rate {fp_rate}, "
            f"above the {max_memory_gb} GB limit; raise --max-memory-gb, build fewer n at once, "
            "build shards with a smaller --capacity and merge them, or accept a higher --fp-rate"
        )
