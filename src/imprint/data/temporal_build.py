"""Build a temporal benchmark folder from a dump: read, collect, draw, write.

The folder holds one WikiMIA-schema file per length bucket (``wikimia_<N>.jsonl``, rows
``{"input": text, "label": 1|0}``, loadable by ``imprint run --data``), ``drawn.jsonl`` (every
drawn document: id, where it was read, its date, label and buckets) and ``manifest.json``
(source, design, seed, counts per side, drops by reason at every step, date ranges, and the
blind baselines measured on each bucket when the caller passes them).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from imprint.data.dumps import Advance, OnBad, Revision, dump_format, read_dump
from imprint.data.sample import MEMBER
from imprint.data.temporal import (
    R_EXACT,
    R_NORMAL,
    Bucket,
    Collected,
    DrawOptions,
    TemporalDesign,
    collect,
    draw,
)
from imprint.errors import ConfigError, DataError

__all__ = ["ReadOptions", "TemporalBuild", "build_temporal", "bucket_file", "write_temporal"]

DRAWN_FILE = "drawn.jsonl"
MANIFEST_FILE = "manifest.json"
_BUCKET_NAME = re.compile(r"wikimia_[0-9]+\.jsonl")


def bucket_file(words: int) -> str:
    """The file name of a bucket: ``wikimia_<words>.jsonl``."""
    return f"wikimia_{words}.jsonl"


@dataclass(frozen=True)
class ReadOptions:
    """How to read the dump (see :func:`imprint.data.dumps.read_dump`)."""

    format: str = "auto"
    date_field: str = "date"
    text_field: str = "text"
    id_field: str | None = None
    revision: Revision = "latest"
    markup: Literal["strip", "keep"] = "strip"
    on_bad: OnBad = "error"

    def __post_init__(self) -> None:
        allowed = {
            "revision": ("latest", "first"),
            "markup": ("strip", "keep"),
            "on_bad": ("error", "skip"),
        }
        for name, values in allowed.items():
            if getattr(self, name) not in values:
                raise ConfigError(
                    f"--{name.replace('_', '-')} {getattr(self, name)!r} is not one of "
                    f"{', '.join(values)}"
                )


@dataclass(frozen=True)
class TemporalBuild:
    """A built benchmark (before writing): the design's buckets and, under RDD, the plain
    design's buckets drawn from the same dump for comparison (``plain``, else None)."""

    path: Path
    format: str
    design: TemporalDesign
    options: DrawOptions
    collected: Collected
    read_dropped: dict[str, int]
    buckets: tuple[Bucket, ...]
    skipped: dict[int, str]
    plain: tuple[tuple[Bucket, ...], dict[int, str]] | None
    warnings: tuple[str, ...]


def build_temporal(
    path: Path,
    design: TemporalDesign,
    options: DrawOptions,
    *,
    read: ReadOptions = ReadOptions(),
    compare_plain: bool = True,
    advance: Advance | None = None,
) -> TemporalBuild:
    """Read ``path`` once and draw ``design``'s buckets (and, for an RDD design with
    ``compare_plain``, the plain design's too). Raises :class:`DataError` when a side has no
    documents (naming the dates found) or no bucket can be balanced (naming the counts)."""
    fmt = dump_format(path, read.format)
    dropped: Counter[str] = Counter()
    docs = read_dump(
        path,
        format=fmt,
        date_field=read.date_field,
        text_field=read.text_field,
        id_field=read.id_field,
        revision=read.revision,
        markup=read.markup,
        on_bad=read.on_bad,
        dropped=dropped,
        advance=advance,
    )
    designs = [design]
    if design.design == "rdd" and compare_plain:
        designs.append(design.as_plain())
    collected = collect(docs, designs, max_words=max(options.buckets))
    check_sides(collected, 0, dict(dropped), path)
    buckets, skipped = draw(collected, 0, options)
    if not buckets:
        shown = "; ".join(f"{w} words: {why}" for w, why in skipped.items())
        raise DataError(f"no bucket of {path} can be balanced ({shown}); use shorter --buckets")
    plain = None
    if len(designs) > 1:
        p_buckets, p_skipped = draw(collected, 1, options)
        plain = (tuple(p_buckets), p_skipped)
    warnings = _warnings(collected, fmt, skipped) + _size_warnings(collected, buckets)
    return TemporalBuild(
        path,
        fmt,
        design,
        options,
        collected,
        dict(dropped),
        tuple(buckets),
        skipped,
        plain,
        warnings,
    )


def _span(dates: tuple[Any, Any] | None) -> str:
    if dates is None:
        return "no dated documents"
    return f"dated {dates[0].date().isoformat()} to {dates[1].date().isoformat()}"


def check_sides(collected: Collected, k: int, read_dropped: dict[str, int], path: Path) -> None:
    """A :class:`DataError` naming the dates found when design ``k`` has no member or no
    non-member left after windowing and de-duplication."""
    design = collected.designs[k]
    counts = {"members": len(collected.members(k)), "non-members": len(collected.nonmembers(k))}
    empty = [side for side, n in counts.items() if n == 0]
    if not empty:
        return
    windows = design.windows()
    wanted = {
        "members": _window_text(windows["members"], "before"),
        "non-members": _window_text(windows["nonmembers"], "from"),
    }
    drops = {**read_dropped, **collected.dropped[k]}
    shown = ", ".join(f"{n} {why}" for why, n in drops.items()) or "none"
    copies = drops.get(R_EXACT, 0) + drops.get(R_NORMAL, 0)
    fix = (
        f"; {copies} were copies of an earlier-dated text, and only a text's earliest copy is "
        "kept (a text dated as a member is never also a non-member): add distinct documents or"
        if copies
        else ". Move --member-before / --nonmember-after (or --cutoff / --bandwidth) into that "
        "range, or"
    )
    raise DataError(
        f"no {empty[0]} in {path}: {empty[0]} must be dated {wanted[empty[0]]}, but the "
        f"{collected.n_read} documents read are {_span(collected.dates)} ({counts['members']} "
        f"members, {counts['non-members']} non-members kept; dropped: {shown}){fix} check "
        "the dump"
    )


def _window_text(bounds: tuple[Any, Any], side: str) -> str:
    low, high = (b.date().isoformat() if b is not None else None for b in bounds)
    if side == "before":
        return f"before {high}" + (f" and from {low}" if low else "")
    return f"from {low}" + (f" up to {high}" if high else "")


def _warnings(collected: Collected, fmt: str, skipped: dict[int, str]) -> tuple[str, ...]:
    out = [f"bucket {w} left out: {why}" for w, why in skipped.items()]
    single, several = collected.revisions
    if fmt == "mediawiki" and single and not several:
        out.append(
            f"every one of the {single} pages has one revision in the export, so its date is "
            "its last edit, not its creation: old articles may be labelled non-members. "
            "Export the full history (or at least the first revision) for creation dates"
        )
    if collected.duplicate_ids:
        out.append(
            f"{collected.duplicate_ids} document(s) share an id with an earlier document, e.g. "
            f"{collected.duplicate_id_example}: drawn.jsonl cannot tell them apart. Name a "
            "unique field with --id-field, or leave it out to number documents by line"
        )
    if collected.earlier_copies and collected.earlier_copies[0]:
        out.append(
            f"{collected.earlier_copies[0]} non-member text(s) were dropped because the same "
            "text (exact or normalised) is dated earlier in the dump"
        )
    return tuple(out)


#: the blind baseline's cross-validation folds (diagnostics.temporal_blind): texts per side needed
_BLIND_FOLDS = 5


def _size_warnings(collected: Collected, buckets: Sequence[Bucket]) -> tuple[str, ...]:
    """Say what de-duplication merged, and which buckets it (or the dump) left too small for
    the blind baseline, so a tiny bucket is never a mystery."""
    drops = collected.dropped[0]
    exact, norm = drops.get(R_EXACT, 0), drops.get(R_NORMAL, 0)
    windowed = len(collected.members(0)) + len(collected.nonmembers(0)) + exact + norm
    out = []
    if exact + norm:
        out.append(
            f"de-duplication dropped {exact + norm} of the {windowed} documents in the date "
            f"windows ({exact} exact and {norm} normalised copies of an earlier-dated text; only "
            "the earliest copy of a text is kept)"
        )
    for b in buckets:
        n = len(b.rows) // 2
        if n < _BLIND_FOLDS:
            why = " after de-duplication" if exact + norm else ""
            out.append(
                f"bucket {b.words} has only {n} text(s) per side{why}: too few for the blind "
                f"baseline (its {_BLIND_FOLDS}-fold check needs {_BLIND_FOLDS} per side) or a "
                "meaningful AUC; add documents or widen the date windows"
            )
    return tuple(out)


# -- writing --------------------------------------------------------------------------------------


def _dates(rows: Any) -> list[str] | None:
    dates = [r.date for r in rows]
    return [min(dates).isoformat(), max(dates).isoformat()] if dates else None


def _bucket_entry(bucket: Bucket, blind: dict[str, Any] | None) -> dict[str, Any]:
    members = [r for r in bucket.rows if r.label == MEMBER]
    nonmembers = [r for r in bucket.rows if r.label != MEMBER]
    entry: dict[str, Any] = {
        "file": bucket_file(bucket.words),
        "members": len(members),
        "nonmembers": len(nonmembers),
        "available": bucket.available,
        "dropped": bucket.dropped,
        "member_dates": _dates(members),
        "nonmember_dates": _dates(nonmembers),
    }
    if blind is not None:
        entry["blind"] = blind
    return entry


def manifest(
    build: TemporalBuild, blind: dict[str, dict[int, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The manifest of ``build``; ``blind`` maps "design"/"plain" to {words: blind entry}."""
    blind = blind or {}
    c, k = build.collected, 0
    members, nonmembers = c.members(k), c.nonmembers(k)
    out: dict[str, Any] = {
        "kind": "imprint temporal benchmark",
        "version": 1,
        "source": {
            "path": str(build.path),
            "format": build.format,
            "bytes": build.path.stat().st_size,
        },
        "design": build.design.to_dict(),
        "seed": build.options.seed,
        "buckets_requested": list(build.options.buckets),
        "per_label": build.options.per_label,
        "read": {
            "documents": c.n_read,
            "dates": _dates_pair(c.dates),
            "dropped": build.read_dropped,
            "duplicate_ids": c.duplicate_ids,  # documents sharing an earlier document's id
        },
        "candidates": {
            "members": len(members),
            "nonmembers": len(nonmembers),
            "member_dates": _dates(members),
            "nonmember_dates": _dates(nonmembers),
            "dropped": c.dropped[k],
            "nonmembers_dated_earlier_elsewhere": c.earlier_copies[k],
        },
        "buckets": {
            str(b.words): _bucket_entry(b, blind.get("design", {}).get(b.words))
            for b in build.buckets
        },
        "skipped_buckets": {str(w): why for w, why in build.skipped.items()},
        "drawn": DRAWN_FILE,
        "warnings": list(build.warnings),
    }
    if build.format == "mediawiki":  # one revision: dated by its last edit, not its creation
        out["read"]["pages_with_one_revision"] = c.revisions[0]
        out["read"]["pages_with_several_revisions"] = c.revisions[1]
    if build.plain is not None:
        out["plain_comparison"] = _plain_entry(build, blind.get("plain", {}))
    return out


def _dates_pair(dates: Any) -> list[str] | None:
    return None if dates is None else [dates[0].isoformat(), dates[1].isoformat()]


def _plain_entry(build: TemporalBuild, blind: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The plain design drawn from the same dump (not written): counts and blind baselines."""
    assert build.plain is not None
    p_buckets, p_skipped = build.plain
    design = build.collected.designs[1]
    entries = {}
    for b in p_buckets:
        entry = _bucket_entry(b, blind.get(b.words))
        entry.pop("file")
        entries[str(b.words)] = entry
    return {
        "design": design.to_dict(),
        "candidates_dropped": build.collected.dropped[1],
        "buckets": entries,
        "skipped_buckets": {str(w): why for w, why in p_skipped.items()},
    }


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # a reader never sees half a file


def _clear_earlier(build: TemporalBuild, out: Path) -> None:
    """Remove what an earlier build in ``out`` wrote that this one will not replace (bucket
    files of buckets skipped now, or listed by the earlier manifest), so no stale bucket
    outlives the manifest that describes it; the earlier manifest goes first, so a build
    killed while writing leaves a folder without a manifest, not one whose manifest lies."""
    names = {bucket_file(w) for w in build.options.buckets}
    earlier = out / MANIFEST_FILE
    try:
        listed = json.loads(earlier.read_text("utf-8"))["buckets"].values()
        names |= {e["file"] for e in listed if _BUCKET_NAME.fullmatch(str(e.get("file")))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no earlier manifest, or not one of ours: only this build's names are cleared
    earlier.unlink(missing_ok=True)
    for name in names - {bucket_file(b.words) for b in build.buckets}:
        (out / name).unlink(missing_ok=True)


def write_temporal(
    build: TemporalBuild, out: Path, *, blind: dict[str, dict[int, dict[str, Any]]] | None = None
) -> Path:
    """Write the bucket files, ``drawn.jsonl`` and ``manifest.json`` into ``out`` (made if
    missing); returns the manifest's path."""
    out.mkdir(parents=True, exist_ok=True)
    _clear_earlier(build, out)
    drawn: dict[tuple[str, str], dict[str, Any]] = {}
    for bucket in build.buckets:
        rows = [{"input": r.text, "label": r.label} for r in bucket.rows]
        _write_lines(out / bucket_file(bucket.words), rows)
        for r in bucket.rows:
            key = (r.id, r.source)
            entry = drawn.setdefault(
                key,
                {
                    "id": r.id,
                    "source": r.source,
                    "date": r.date.isoformat(),
                    "label": r.label,
                    "buckets": [],
                },
            )
            entry["buckets"].append(bucket.words)
    _write_lines(out / DRAWN_FILE, list(drawn.values()))
    path = out / MANIFEST_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        json.dumps(manifest(build, blind), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)
    return path
