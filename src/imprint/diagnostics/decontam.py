"""n-gram thresholded and decontaminated candidate sets (MIMIR's ``ngram_*`` splits).

MIMIR builds harder, cleaner splits by keeping only non-members whose n-gram overlap with the
training corpus is at most a bound: ``ngram_7_0.2`` (7-gram overlap <= 20 %), ``ngram_13_0.2``,
and ``ngram_13_0.8``, which only removes near-duplicates of training text (decontamination).
Members are always kept. Every removed sample is listed with its overlap and the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from imprint.data import Sample
from imprint.diagnostics.overlap import NgramIndex, overlap_scores
from imprint.errors import ConfigError

__all__ = ["PRESETS", "filter_by_overlap", "resolve_bound", "write_filtered"]

#: MIMIR split name -> (n, largest overlap kept)
PRESETS: dict[str, tuple[int, float]] = {
    "ngram_13_0.8": (13, 0.8),
    "ngram_13_0.2": (13, 0.2),
    "ngram_7_0.2": (7, 0.2),
}
R_ABOVE = "overlap above bound"
R_UNDEFINED = "overlap undefined (fewer than n words)"
Undefined = Literal["drop", "keep"]


def resolve_bound(
    preset: str | None, n: int | None = None, max_overlap: float | None = None
) -> tuple[int, float]:
    """(n, largest overlap kept) from a MIMIR preset name, where an explicit ``n`` or
    ``max_overlap`` overrides the preset's; without a preset both must be given."""
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose from {list(PRESETS)}")
        n = PRESETS[preset][0] if n is None else n
        max_overlap = PRESETS[preset][1] if max_overlap is None else max_overlap
    if n is None or max_overlap is None:
        raise ConfigError("give --n and --max-overlap, or a --preset such as ngram_13_0.8")
    return n, max_overlap


def filter_by_overlap(
    samples: Sequence[Sample],
    index: NgramIndex,
    *,
    n: int,
    max_overlap: float,
    undefined: Undefined = "drop",
) -> tuple[list[Sample], list[dict[str, Any]], dict[str, Any]]:
    """Keep members and the non-members with ``overlap_n <= max_overlap``.

    Non-members shorter than n words have no defined overlap: ``undefined="drop"`` removes them
    (so every kept non-member satisfies the bound), ``"keep"`` keeps them. Returns the kept
    samples (order preserved), the removed ones as ``{id, overlap, reason}`` records, and a
    summary of the counts.
    """
    if not 0.0 <= max_overlap <= 1.0:
        raise ConfigError(f"max_overlap must be a fraction in [0, 1], got {max_overlap}")
    if undefined not in ("drop", "keep"):
        raise ConfigError(f"undefined must be 'drop' or 'keep', not {undefined!r}")
    values = overlap_scores(index, [s.text for s in samples], n).values
    kept: list[Sample] = []
    removed: list[dict[str, Any]] = []
    for sample, value in zip(samples, values.tolist(), strict=True):
        if sample.label == 1:
            kept.append(sample)
        elif math.isnan(value):
            if undefined == "keep":
                kept.append(sample)
            else:
                removed.append({"id": sample.id, "overlap": None, "reason": R_UNDEFINED})
        elif value <= max_overlap:
            kept.append(sample)
        else:
            removed.append({"id": sample.id, "overlap": value, "reason": R_ABOVE})
    reasons: dict[str, int] = {}
    for record in removed:
        reasons[record["reason"]] = reasons.get(record["reason"], 0) + 1
    n_non = sum(s.label == 0 for s in samples)
    summary = {
        "n": n,
        "max_overlap": max_overlap,
        "rule": f"keep members, and non-members with {n}-gram overlap <= {max_overlap}",
        "undefined": undefined,
        "members": sum(s.label == 1 for s in samples),
        "nonmembers_in": n_non,
        "nonmembers_kept": sum(s.label == 0 for s in kept),
        "removed": reasons,
    }
    overlap_by_id = {s.id: v for s, v in zip(samples, values.tolist(), strict=True)}
    kept = [_with_overlap(s, n, overlap_by_id[s.id]) for s in kept]
    return kept, removed, summary


def _with_overlap(sample: Sample, n: int, value: float) -> Sample:
    meta = {**sample.meta, f"overlap_{n}": None if math.isnan(value) else value}
    return Sample(sample.id, sample.text, sample.label, meta)


def write_filtered(
    out: str | Path,
    kept: Sequence[Sample],
    removed: Sequence[dict[str, Any]],
    summary: dict[str, Any],
    *,
    source: str,
    index: str | Path,
) -> Path:
    """Write ``out`` (JSONL: id, text, label, meta fields) and ``<out>.manifest.json``
    (source, index, rule, counts and every removed sample with its reason); return the
    manifest path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for s in kept:
            row = {k: v for k, v in s.meta.items() if k not in {"id", "text", "label"}}
            row.update(id=s.id, text=s.text, label=s.label)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    manifest = {
        "source": source,
        "index": str(index),
        "output": str(path),
        **summary,
        "kept": len(kept),
        "removed_samples": list(removed),
    }
    manifest_path = path.with_name(path.name + ".manifest.json")
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest_path
