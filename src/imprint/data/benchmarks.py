"""Named benchmarks and data specs: ``resolve_data("mimir:arxiv/ngram_13_0.8")``, a file path,
``hf:owner/name``.

A named benchmark (the catalog: :mod:`imprint.data.catalog`, its built-in entries in
:mod:`imprint.data.catalog_entries`, listed by ``imprint datasets``) is read from a local copy
first, in the data dirs (``$IMPRINT_DATA_DIR``, then ``../shared/data`` relative to the working
directory, then ``shared/data`` next to the repository), then from the Hugging Face hub's data
files directly (see :mod:`imprint.data.benchmark_files`); offline, the error names each file to
place and where.
Other spec prefixes (``hf:``, ``game:``) dispatch through :func:`register_data_scheme` or the
entry-point group ``imprint.data_schemes`` (the game declares its ``game:`` and ``game-heldout:``
there, in imprint's own pyproject.toml, so this module names no later package; it is imported
when such a spec is first used).
:func:`data_defects` counts a loaded set's known defects for the run manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.data.benchmark_files import (
    DATA_DIR_ENV,
    data_dirs,
    find_local,
    local_status,
    locate,
)
from imprint.data.benchmark_readers import read_benchmark
from imprint.data.catalog import (
    BenchmarkEntry,
    benchmark_origin,
    did_you_mean,
    get_benchmark,
    is_benchmark,
    iter_benchmarks,
    natural_key,
    register_benchmark,
)
from imprint.data.catalog_entries import NAME_FORMS
from imprint.data.defects import DefectReport, SplitOverlap, check_defects, split_overlap
from imprint.data.loaders import (
    CSV_SUFFIXES,
    JSONL_SUFFIXES,
    PARQUET_SUFFIXES,
    LoadedData,
    load_file,
    load_hf_dataset,
)
from imprint.errors import ConfigError, DataError
from imprint.registry import BUILTIN, Registry

__all__ = [
    "DATA_DIR_ENV",
    "BenchmarkEntry",
    "BenchmarkInfo",
    "data_defects",
    "data_dirs",
    "find_local",
    "list_benchmarks",
    "load_benchmark",
    "register_benchmark",
    "register_data_scheme",
    "resolve_data",
]

#: A scheme loader is called as ``fn(rest_of_spec, **field_kwargs)`` and returns LoadedData.
DataScheme = Callable[..., LoadedData]
#: the entry-point group of data schemes (``PREFIX = "pkg.module:loader"``)
SCHEME_GROUP = "imprint.data_schemes"


@dataclass(frozen=True)
class BenchmarkInfo:
    """What :func:`list_benchmarks` reports. ``local_path`` is the local copy (None when the set
    is not here; for a set whose files are all in the hub cache, ``in_hub_cache`` is True)."""

    name: str
    description: str
    local_path: Path | None
    provenance: str = ""
    licence: str = ""
    size: str = ""
    fields: str = ""
    caveats: tuple[str, ...] = ()
    source: str = ""  # the hub page, the web page, or how to build it
    in_hub_cache: bool = False
    entry: BenchmarkEntry | None = field(default=None, compare=False, repr=False)
    origin: str = BUILTIN  # or "plugin DIST": the installed package that adds it

    @property
    def available(self) -> bool:
        return self.local_path is not None or self.in_hub_cache

    def to_dict(self) -> dict[str, Any]:
        base = self.entry.to_dict() if self.entry else {"name": self.name}
        return (
            base
            | {"local_copy": str(self.local_path) if self.local_path else None}
            | {"in_hub_cache": self.in_hub_cache, "origin": self.origin}
        )


#: ``prefix:rest`` data schemes: ``hf`` here; others (the game's) are entry points, loaded on use
_SCHEMES: Registry[DataScheme] = Registry("data scheme", group=SCHEME_GROUP, error=DataError)


def register_data_scheme(prefix: str, fn: DataScheme, *, force: bool = False) -> None:
    """Make ``resolve_data(f"{prefix}:{rest}", **kw)`` call ``fn(rest, **kw)``.

    ``prefix`` must be at least two characters (so Windows drive letters stay paths), contain
    no ``":"`` and not be a benchmark family; an existing prefix raises unless ``force=True``.
    """
    if len(prefix) < 2 or ":" in prefix:
        raise ConfigError(f"data scheme prefix {prefix!r} must be 2+ characters without ':'")
    if any(e.family == prefix for e in iter_benchmarks()):
        raise ConfigError(f"data scheme {prefix!r} is a benchmark family; choose another prefix")
    _SCHEMES.add(prefix, fn, force=force)


def list_benchmarks(family: str | None = None) -> list[BenchmarkInfo]:
    """Every named benchmark (or one family), in catalog order, with its local copy if found."""
    out = []
    for e in iter_benchmarks(family):
        status = local_status(e)
        source = e.hub_page or e.web_url or (f"build: {e.build_hint}" if e.build_hint else "")
        out.append(
            BenchmarkInfo(
                e.name,
                e.description,
                Path(status) if status and status != "hub cache" else None,
                e.provenance,
                e.licence,
                e.size,
                e.fields,
                e.caveats,
                source,
                status == "hub cache",
                e,
                benchmark_origin(e.name),
            )
        )
    return out


def load_benchmark(name: str, **field_kwargs: Any) -> LoadedData:
    """Load a named benchmark: local copy, else the hub's file (downloaded once, then cached)."""
    entry = get_benchmark(name)
    return read_benchmark(entry, locate(entry), **field_kwargs)


def _load_hf_spec(rest: str, **field_kwargs: Any) -> LoadedData:
    """``hf:owner/name[:split]`` -> :func:`load_hf_dataset` (split defaults to ``train``)."""
    name, _, split = rest.partition(":")
    if not name:
        raise DataError("hf: spec needs a dataset name, e.g. hf:swj0419/WikiMIA:WikiMIA_length64")
    return load_hf_dataset(name, split=split or "train", **field_kwargs)


def _unknown_message(spec: str) -> str:
    names = sorted((e.name for e in iter_benchmarks()), key=natural_key)
    choices = names + [f"{p}:" for p in _SCHEMES.names()]
    return (
        f"unknown data spec {spec!r}: not a benchmark name, a known prefix or an existing file."
        f"{did_you_mean(spec, choices)} Benchmarks: {', '.join(NAME_FORMS)} (`imprint "
        f"datasets` lists them); prefixes: {', '.join(f'{p}:' for p in _SCHEMES.names())}; or a "
        f"path to a {'/'.join(JSONL_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES)} file."
    )


def resolve_data(spec: str, **field_kwargs: Any) -> LoadedData:
    """Load data named by ``spec``: a benchmark (``wikimia:64``, ``mimir:arxiv/ngram_13_0.8``),
    ``prefix:rest`` for a registered scheme (``hf:owner/name[:split]``), or a file path.
    ``field_kwargs`` go to the loader (``text_field``, ``label_field``, ``id_field``,
    ``on_bad``, ...)."""
    spec = str(spec)
    if is_benchmark(spec):
        return load_benchmark(spec, **field_kwargs)
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in _SCHEMES:
        return _SCHEMES.get(prefix)(rest, **field_kwargs)
    path = Path(spec)
    known = JSONL_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES
    if path.exists() or path.suffix.lower() in known:
        return load_file(path, **field_kwargs)
    raise DataError(_unknown_message(spec))


def data_defects(spec: str, loaded: LoadedData) -> DefectReport:
    """Known defects of the set ``spec`` loaded as ``loaded``: duplicates for any data; for a
    named benchmark also short texts in its length bucket and overlap with its other splits
    (those present locally or in the hub cache; the others are listed as not checked)."""
    if not is_benchmark(str(spec)):
        return check_defects(loaded.samples)
    entry = get_benchmark(str(spec))
    overlaps = [_sibling_overlap(entry, loaded, other) for other in entry.siblings]
    return check_defects(loaded.samples, bucket_words=entry.length_words, overlaps=overlaps)


def _sibling_overlap(entry: BenchmarkEntry, loaded: LoadedData, other: str) -> SplitOverlap:
    sibling = get_benchmark(other)
    try:
        located = locate(sibling, download=False)  # a check never downloads
        data = read_benchmark(sibling, located, on_bad="drop", require_both_classes=False)
    except DataError:
        return SplitOverlap(other, False, note="not present locally: not checked")
    return split_overlap(
        loaded.samples, data.samples, other, disjoint_expected=entry.disjoint_siblings
    )


_SCHEMES.add("hf", _load_hf_spec)  # not register_data_scheme: its family check reads plugins
