"""Bloom filters of an n-gram index: sizing (rbloom's formulas), creating, saving, measuring.

Below :mod:`imprint.diagnostics.overlap`: the local and the Ray index builds size and save their
filters through the same functions.
"""

from __future__ import annotations

import math
import operator
from pathlib import Path
from typing import Any

import numpy as np

from imprint.errors import ConfigError

N_PROBES = 200_000
_HASH_FUNC = operator.index  # n-gram hashes are already uniform 64-bit ints


def _bloom(capacity: int, rate: float) -> Any:
    from rbloom import Bloom

    return Bloom(capacity, rate, hash_func=_HASH_FUNC)


def _filter_file(n: int) -> str:
    return f"ngrams_{n}.bloom"


def plan_filter(capacity: int, fp_rate: float) -> dict[str, Any]:
    """Filter parameters that keep the false-positive rate at ``capacity`` items <= ``fp_rate``.

    rbloom sizes ``m = -C ln p / ln(2)^2`` bits with ``k = floor(-log2 p)`` hash functions, so
    asking it for exactly ``p`` overshoots slightly; the requested rate is lowered until the
    formula ``(1 - exp(-k C / m))^k`` is within target. Returns ``requested_rate``, ``k``,
    ``size_in_bits`` (predicted) and ``fp_rate_at_capacity``.
    """
    if not 0.0 < fp_rate < 1.0:
        raise ConfigError(f"the false-positive rate must be in (0, 1), e.g. 0.01; got {fp_rate}")
    if capacity < 1:
        raise ConfigError(f"capacity must be >= 1 n-gram, got {capacity}")
    rate = fp_rate
    for _ in range(200):
        bits = 8 * math.ceil(-capacity * math.log(rate) / math.log(2) ** 2 / 8)
        k = max(1, math.floor(-math.log(rate) / math.log(2)))
        predicted = (1.0 - math.exp(-k * capacity / bits)) ** k
        if predicted <= fp_rate:
            break
        rate *= 0.98
    return {"requested_rate": rate, "k": k, "size_in_bits": bits, "fp_rate_at_capacity": predicted}


def _popcount_file(path: Path, chunk: int = 1 << 24) -> int:
    """Number of set bits after the 8-byte header of an rbloom file."""
    total = 0
    with open(path, "rb") as fh:
        fh.seek(8)
        while block := fh.read(chunk):
            total += int(np.bitwise_count(np.frombuffer(block, dtype=np.uint8)).sum())
    return total


def _read_k(path: Path) -> int:
    with open(path, "rb") as fh:
        return int.from_bytes(fh.read(8), "little")


def _filter_stats(
    bloom: Any, path: Path, n_inserted: int, *, measure: bool, seed: int
) -> dict[str, Any]:
    """Fill, k and false-positive rates of a saved filter (estimated from the fill, measured)."""
    m = int(bloom.size_in_bits)
    k = _read_k(path)
    fill = _popcount_file(path) / m
    stats: dict[str, Any] = {
        "size_in_bits": m,
        "size_bytes": path.stat().st_size,
        "k": k,
        "n_inserted": int(n_inserted),
        "fill": fill,
        "approx_distinct": float(bloom.approx_items),
        "fp_rate_estimated": fill**k,
    }
    if measure:
        probes = np.random.default_rng(seed).integers(0, 2**64, size=N_PROBES, dtype=np.uint64)
        hits = sum(1 for x in probes.tolist() if x in bloom)
        stats["fp_rate_measured"] = hits / N_PROBES
        stats["fp_probes"] = N_PROBES
    return stats


def save_filters(
    out: Path,
    blooms: dict[int, Any],
    caps: dict[int, int],
    plans: dict[int, dict[str, Any]],
    inserted: dict[int, int],
    *,
    counted: bool,
    measure_fp: bool,
    seed: int,
) -> dict[str, Any]:
    """Save each n's filter under ``out``; its manifest entry (size plan and measured rates)."""
    filters = {}
    for n in sorted(blooms):
        path = out / _filter_file(n)
        blooms[n].save(str(path))
        info = {"file": path.name, "capacity": caps[n], "capacity_counted": counted}
        info.update(plans[n])
        info.update(_filter_stats(blooms[n], path, inserted[n], measure=measure_fp, seed=seed))
        filters[str(n)] = info
    return filters
