"""n-gram overlap of candidate texts with a training corpus, through Bloom filters (rbloom).

MIMIR (Duan et al. 2024) measures how much of a non-member already occurs in the training data:
``overlap_n(x)`` = the fraction of x's word n-grams present in the corpus (see
:mod:`imprint.diagnostics.ngrams` for the tokenisation). The corpus side is an *index folder*:
one rbloom filter per n (``ngrams_<n>.bloom``) plus ``manifest.json`` (n values, capacity,
false-positive rates, corpus files and what was read from them).

Building streams the corpus in batches, so memory is the filters plus one batch, whatever the
corpus size. A filter is sized for ``capacity`` n-grams at the target false-positive rate; the
capacity is either given or counted in a first streaming pass (words per document, an upper
bound on distinct n-grams). Shards built separately with the same capacity and rate are merged
by bitwise union (:func:`merge_indexes`). A Bloom filter has no false negatives: overlap is
never under-estimated; it is over-estimated by at most the false-positive rate on average.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from imprint.diagnostics.bloom_filters import (
    _HASH_FUNC,
    _bloom,
    _filter_file,
    _filter_stats,
    plan_filter,
    save_filters,
)
from imprint.diagnostics.corpus import CorpusFileStats, Unit, iter_batches, iter_documents
from imprint.diagnostics.ngrams import HASH_VERSION, NORMALIZATION, NgramBatch
from imprint.diagnostics.overlap_plan import Filled, IndexSettings, Progress, plan_filters
from imprint.errors import ConfigError, DataError

if TYPE_CHECKING:
    from imprint.executors import ExecutorConfig

__all__ = [
    "DEFAULT_FP_RATE",
    "NgramIndex",
    "OverlapScores",
    "build_index",
    "count_ngrams",
    "extend_index",
    "merge_indexes",
    "overlap_scores",
    "plan_filter",
]

INDEX_FORMAT = "imprint-ngram-index"
MANIFEST = "manifest.json"
DEFAULT_FP_RATE = 0.01


def _check_ns(ns: Sequence[int]) -> list[int]:
    out = sorted(set(int(n) for n in ns))
    if not out or any(n < 1 for n in out):
        raise ConfigError(f"n values must be positive integers (e.g. --n 7); got {list(ns)}")
    return out


def count_ngrams(
    paths: Sequence[str | Path],
    ns: Sequence[int],
    *,
    text_field: str | None = None,
    unit: Unit = "line",
    progress: Callable[[int], None] | None = None,
) -> dict[int, int]:
    """Upper bound on the distinct n-grams of a corpus, per n, in one streaming pass.

    Counts ``max(0, w - n + 1)`` per document with w its whitespace-split word count (stripping
    punctuation never adds words, and repeated n-grams are counted every time).
    """
    ns = _check_ns(ns)
    totals = dict.fromkeys(ns, 0)
    for path in paths:
        for doc in iter_documents(path, text_field=text_field, unit=unit, progress=progress):
            w = len(doc.split())
            for n in ns:
                if w >= n:
                    totals[n] += w - n + 1
    return totals


def _prepare_out(out: Path, overwrite: bool) -> None:
    from imprint.outdir import KINDS, check_writable, mark_output, output_kind

    found = output_kind(out) if out.is_dir() else None
    if found not in (None, "overlap"):  # its manifest.json would be replaced by the index's
        raise ConfigError(
            f"--out {out} is {KINDS[found]}, not an n-gram index; --overwrite replaces only an "
            "earlier index. Pass a new folder"
        )
    if (out / MANIFEST).exists() and not overwrite:
        raise ConfigError(
            f"{out} already holds an n-gram index; pass overwrite=True (--overwrite) to replace "
            "it, or choose another --out"
        )
    check_writable(out)
    mark_output(out, "overlap")


def _stream_into(
    blooms: dict[int, Any],
    paths: Sequence[Path],
    *,
    text_field: str | None,
    unit: Unit,
    progress: Progress | None,
) -> tuple[dict[int, int], list[CorpusFileStats]]:
    """Add every n-gram of the corpus files to ``blooms[n]``; return counts and file stats."""
    inserted = dict.fromkeys(blooms, 0)
    stats: list[CorpusFileStats] = []
    total = sum(p.stat().st_size for p in paths)
    tick = progress("indexing n-grams (bytes)", total) if progress else None
    for batch in iter_batches(paths, stats, text_field=text_field, unit=unit, progress=tick):
        hashed = NgramBatch.from_texts(batch)
        for n, bloom in blooms.items():
            keys, _ = hashed.ngrams(n)
            bloom.update(keys.tolist())
            inserted[n] += keys.size
    return inserted, stats


def build_index(
    corpus: Sequence[str | Path],
    ns: Sequence[int],
    out: str | Path,
    *,
    fp_rate: float = DEFAULT_FP_RATE,
    capacity: int | dict[int, int] | None = None,
    text_field: str | None = None,
    unit: Unit = "line",
    measure_fp: bool = True,
    max_memory_gb: float | None = None,
    progress: Progress | None = None,
    overwrite: bool = False,
    seed: int = 0,
    executor: ExecutorConfig | None = None,
) -> dict[str, Any]:
    """Build an index folder over the corpus files; return its manifest (also written).

    ``capacity``: n-grams each filter must hold at ``fp_rate`` (one int for every n, or per n);
    ``None`` counts them in a first streaming pass. ``max_memory_gb`` refuses to allocate
    filters larger than that in total. The manifest reports per n the false-positive rate at
    capacity (formula), estimated from the filter's fill (``fill ** k``) and measured on
    200,000 random 64-bit keys (``measure_fp``). ``progress`` reports bytes read per pass.
    An ``executor`` of kind ray fills the filters in shards on Ray
    (:mod:`imprint.diagnostics.overlap_ray`): the same index, bit for bit.
    """
    started = time.time()
    ns = _check_ns(ns)
    out = Path(out)
    paths = _corpus_paths(corpus)
    _prepare_out(out, overwrite)
    settings = IndexSettings(ns, fp_rate, unit, text_field)
    if executor is not None and executor.kind == "ray":
        from imprint.diagnostics.overlap_ray import fill_on_ray

        filled = fill_on_ray(paths, settings, capacity, max_memory_gb, progress, executor)
    else:
        filled = _fill_here(paths, settings, capacity, max_memory_gb, progress)
    filters = save_filters(
        out, filled.blooms, filled.caps, filled.plans, filled.inserted,
        counted=capacity is None, measure_fp=measure_fp, seed=seed,
    )  # fmt: skip
    manifest_keys = asdict(settings)
    return write_index_manifest(out, manifest_keys, filters, filled.corpus, started, **filled.extra)


def _fill_here(
    paths: list[Path],
    settings: IndexSettings,
    capacity: int | dict[int, int] | None,
    max_memory_gb: float | None,
    progress: Progress | None,
) -> Filled:
    """Count (unless ``capacity`` is given) and fill the filters in this process."""
    ns, text_field, unit = settings.ns, settings.text_field, settings.unit
    caps = _capacities(paths, ns, capacity, text_field=text_field, unit=unit, progress=progress)
    plans = plan_filters(caps, settings.fp_rate_target, max_memory_gb)
    blooms = {n: _bloom(max(1, caps[n]), plans[n]["requested_rate"]) for n in ns}
    inserted, stats = _stream_into(
        blooms, paths, text_field=text_field, unit=unit, progress=progress
    )
    return Filled(caps, plans, blooms, inserted, [s.to_dict() for s in stats], {})


def write_index_manifest(
    out: Path,
    settings: dict[str, Any],
    filters: Any,
    corpus: list[Any],
    started: float,
    **extra: Any,
) -> dict[str, Any]:
    """Write and return the index's manifest: its format, hash and normalisation versions, the
    build ``settings`` (ns, fp_rate_target, unit, text_field), the saved ``filters``, the
    ``corpus`` files' statistics, ``extra`` keys (where it was built) and its timing."""
    manifest = {
        "format": INDEX_FORMAT,
        "hash": HASH_VERSION,
        "normalization": NORMALIZATION,
        **settings,
        "filters": filters,
        "corpus": corpus,
        **extra,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "elapsed_s": round(time.time() - started, 2),
    }
    _write_manifest(out, manifest)
    return manifest


def _corpus_paths(corpus: Sequence[str | Path]) -> list[Path]:
    """The corpus files as paths; none given, or one that is not a file, is refused."""
    paths = [Path(p) for p in corpus]
    if not paths:
        raise ConfigError("no corpus files given; pass at least one --corpus FILE")
    for p in paths:
        if not p.is_file():
            raise DataError(f"corpus file {p} does not exist (or is not a file); check the path")
    return paths


def _capacities(
    paths: Sequence[Path],
    ns: list[int],
    capacity: int | dict[int, int] | None,
    *,
    text_field: str | None,
    unit: Unit,
    progress: Progress | None,
) -> dict[int, int]:
    """N-grams each filter must hold: counted in a streaming pass (``None``) or as given."""
    if capacity is None:
        total_bytes = sum(p.stat().st_size for p in paths)
        tick = progress("counting n-grams (bytes)", total_bytes) if progress else None
        return count_ngrams(paths, ns, text_field=text_field, unit=unit, progress=tick)
    if isinstance(capacity, int):
        return dict.fromkeys(ns, capacity)
    missing = [n for n in ns if n not in capacity]
    if missing:
        raise ConfigError(f"capacity given for n={sorted(capacity)} but not for n={missing}")
    return {n: int(capacity[n]) for n in ns}


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(out / MANIFEST)


class NgramIndex:
    """An index folder opened for queries: ``filters[n]`` is the rbloom filter for n."""

    def __init__(self, path: Path, manifest: dict[str, Any], filters: dict[int, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.filters = filters

    @property
    def ns(self) -> list[int]:
        """Every n the index was built for (not only those loaded)."""
        return [int(n) for n in self.manifest["ns"]]

    @classmethod
    def open(cls, path: str | Path, ns: Sequence[int] | None = None) -> NgramIndex:
        """Open an index folder, loading the filters for ``ns`` (default: all).

        Raises :class:`ConfigError` when an asked n is not in the index, naming the n it has.
        """
        from rbloom import Bloom

        p = Path(path)
        manifest = read_manifest(p)
        have = [int(n) for n in manifest["ns"]]
        want = have if ns is None else _check_ns(ns)
        missing = [n for n in want if n not in have]
        if missing:
            raise ConfigError(
                f"the index {p} was built for n={have}, not n={missing}; pass --n "
                f"{' --n '.join(map(str, have))}, or build an index with "
                f"`imprint overlap build --n {missing[0]} ...`"
            )
        filters = {}
        for n in want:
            file = p / manifest["filters"][str(n)]["file"]
            if not file.is_file():
                raise DataError(f"{file} is missing from the index folder {p}; rebuild the index")
            filters[n] = Bloom.load(str(file), _HASH_FUNC)
        return cls(p, manifest, filters)

    def contains(self, n: int, keys: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """Which of the n-gram hashes ``keys`` (shape (g,)) the filter for n holds."""
        bloom = self.filters[n]
        return np.fromiter((k in bloom for k in keys.tolist()), dtype=bool, count=keys.size)


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of an index folder, checked for format and hash version."""
    file = path / MANIFEST
    if not file.is_file():
        raise DataError(
            f"{path} is not an n-gram index (no {MANIFEST}); build one with "
            "`imprint overlap build --corpus FILES --out INDEX`"
        )
    manifest = json.loads(file.read_text())
    if manifest.get("format") != INDEX_FORMAT:
        raise DataError(f"{file}: not an imprint n-gram index manifest")
    if manifest.get("hash") != HASH_VERSION:
        raise DataError(
            f"{path} was built with n-gram hashing {manifest.get('hash')!r}, this imprint uses "
            f"{HASH_VERSION!r}; rebuild the index"
        )
    return manifest


@dataclass(frozen=True)
class OverlapScores:
    """Overlap of each text with the corpus for one n.

    ``values`` (shape (t,)): fraction of the text's n-grams found, NaN when the text has fewer
    than n words (undefined, not 0); ``n_ngrams`` and ``n_words`` (shape (t,)) the counts.
    """

    n: int
    values: NDArray[np.float64]
    n_ngrams: NDArray[np.int64]
    n_words: NDArray[np.int64]

    @property
    def n_undefined(self) -> int:
        return int(np.isnan(self.values).sum())


def overlap_scores(index: NgramIndex, texts: Sequence[str], n: int) -> OverlapScores:
    """``overlap_n`` of every text against the index (see :class:`OverlapScores`)."""
    if n not in index.filters:
        raise ConfigError(
            f"the index {index.path} was built for n={index.ns}, not n={n}; ask for one of "
            f"those or build an index with --n {n}"
        )
    batch = NgramBatch.from_texts(texts)
    keys, docs = batch.ngrams(n)
    present = index.contains(n, keys)
    hits = np.bincount(docs, weights=present, minlength=len(texts))
    totals = np.bincount(docs, minlength=len(texts)).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(totals > 0, hits / np.maximum(totals, 1), np.nan)
    return OverlapScores(n, values.astype(np.float64), totals, batch.words_per_doc())


def merge_indexes(
    indexes: Sequence[str | Path], out: str | Path, *, overwrite: bool = False
) -> dict[str, Any]:
    """Union shard indexes built with the same n values, capacities and rate into ``out``."""
    from rbloom import Bloom

    if len(indexes) < 2:
        raise ConfigError("merging needs at least two index folders")
    out = Path(out)
    manifests = [read_manifest(Path(p)) for p in indexes]
    first = manifests[0]
    keys = ("ns", "fp_rate_target", "unit")
    for p, m in zip(indexes[1:], manifests[1:], strict=True):
        same = all(m.get(k) == first.get(k) for k in keys) and all(
            m["filters"][str(n)]["size_in_bits"] == first["filters"][str(n)]["size_in_bits"]
            and m["filters"][str(n)]["k"] == first["filters"][str(n)]["k"]
            for n in first["ns"]
        )
        if not same:
            raise ConfigError(
                f"{p} cannot be merged with {indexes[0]}: shards need the same n values, "
                "--fp-rate, --unit and --capacity (same-size filters); rebuild them with one "
                "explicit --capacity"
            )
    _prepare_out(out, overwrite)
    filters = {}
    for n in first["ns"]:
        merged = None
        inserted = 0
        for p, m in zip(indexes, manifests, strict=True):
            bloom = Bloom.load(str(Path(p) / m["filters"][str(n)]["file"]), _HASH_FUNC)
            merged = bloom if merged is None else merged | bloom
            inserted += m["filters"][str(n)]["n_inserted"]
        path = out / _filter_file(n)
        assert merged is not None
        merged.save(str(path))
        info = {k: v for k, v in first["filters"][str(n)].items() if not k.startswith("fp_rate")}
        info["fp_rate_at_capacity"] = first["filters"][str(n)]["fp_rate_at_capacity"]
        info.update(_filter_stats(merged, path, inserted, measure=True, seed=0))
        info["file"] = path.name
        filters[str(n)] = info
    manifest = {
        **{k: first[k] for k in ("format", "hash", "normalization", "ns", "fp_rate_target")},
        "unit": first.get("unit"),
        "text_field": first.get("text_field"),
        "filters": filters,
        "corpus": [c for m in manifests for c in m["corpus"]],
        "merged_from": [str(p) for p in indexes],
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    _write_manifest(out, manifest)
    return manifest


def extend_index(
    index: str | Path,
    corpus: Sequence[str | Path],
    *,
    measure_fp: bool = True,
    progress: Progress | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Add more corpus files to an existing index in place (filters updated incrementally).

    The filters keep their size: past their capacity the false-positive rate rises, which the
    updated manifest reports (``fp_rate_estimated``, ``fp_rate_measured``, ``over_capacity``).
    """
    opened = NgramIndex.open(index)
    manifest = opened.manifest
    paths = [Path(p) for p in corpus]
    for p in paths:
        if not p.is_file():
            raise DataError(f"corpus file {p} does not exist (or is not a file); check the path")
    inserted, stats = _stream_into(
        opened.filters,
        paths,
        text_field=manifest.get("text_field"),
        unit=manifest.get("unit", "line"),
        progress=progress,
    )
    for n, bloom in opened.filters.items():
        info = manifest["filters"][str(n)]
        path = opened.path / info["file"]
        bloom.save(str(path))
        total = info["n_inserted"] + inserted[n]
        info.update(_filter_stats(bloom, path, total, measure=measure_fp, seed=seed))
        info["over_capacity"] = bool(info["approx_distinct"] > info["capacity"])
    manifest["corpus"].extend(s.to_dict() for s in stats)
    manifest["updated"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    _write_manifest(opened.path, manifest)
    return manifest
