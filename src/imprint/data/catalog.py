"""The benchmark catalog: one :class:`BenchmarkEntry` per named benchmark (``mimir:arxiv/...``).

An entry says what a benchmark is (provenance, licence, size, fields, known caveats) and where
its files live: a path relative to a data dir (``$IMPRINT_DATA_DIR/<family>/...``), and, for sets
published on the Hugging Face hub, the file's path in the hub repository (read directly, never
through a ``datasets`` loading script). The types are in :mod:`imprint.data.benchmark_entry`,
the built-in entries in :mod:`imprint.data.catalog_entries` (read when the catalog is first
looked up or listed: a lazy source, nothing registers by being imported); this module holds the
registry. Installed
packages add benchmark families through the entry-point group ``imprint.benchmarks``: the entry
point is named after the family and names a :class:`BenchmarkEntry`, a list of them or a function
returning them (``toy = "toy_pkg.data:benchmarks"``); they are read on the first lookup of a name
the catalog lacks, or the first listing.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Iterator
from typing import Any

from imprint.data.benchmark_entry import HUB_URL, BenchmarkEntry, DataFile, Reader, Role
from imprint.errors import ConfigError, DataError
from imprint.registry import BUILTIN, PluginWarning, Registry

__all__ = [  # the entry types are re-exported: plugins and readers import them from here
    "GROUP",
    "HUB_URL",
    "BenchmarkEntry",
    "DataFile",
    "Reader",
    "Role",
    "benchmark_origin",
    "did_you_mean",
    "get_benchmark",
    "is_benchmark",
    "iter_benchmarks",
    "natural_key",
    "register_benchmark",
    "shared_file_names",
]

GROUP = "imprint.benchmarks"


def _check_entry(name: str, entry: Any) -> BenchmarkEntry:
    if not isinstance(entry, BenchmarkEntry):
        raise ConfigError(
            f"benchmark {name!r} must be an imprint.data.catalog.BenchmarkEntry, got "
            f"{type(entry).__name__}"
        )
    if entry.name != name:
        raise ConfigError(f"benchmark {name!r}: its entry is named {entry.name!r}")
    return entry


def _family_entries(family: str, value: Any) -> list[BenchmarkEntry]:
    """What a plugin's entry point names: an entry, a sequence of them, or a function that
    returns them; each of the family ``family`` (the entry point's name)."""
    if callable(value) and not isinstance(value, BenchmarkEntry):
        value = value()
    found = [value] if isinstance(value, BenchmarkEntry) else list(value)
    for entry in found:
        _check_entry(getattr(entry, "name", "?"), entry)
        if entry.family != family:
            raise ConfigError(
                f"benchmark {entry.name!r} is of family {entry.family!r}, not {family!r}: "
                f"name the entry point of group {GROUP} after the family"
            )
    return found


#: plugin families by name (entry points of :data:`GROUP`), loaded into the catalog on first need
FAMILIES: Registry[list[BenchmarkEntry]] = Registry(
    "benchmark family", group=GROUP, check=_family_entries, error=DataError
)


def _add_plugin_families() -> None:
    for family, entries in FAMILIES.load_all(sort=False).items():
        origin = FAMILIES.origin(family)
        for entry in entries:
            if entry.name in _CATALOG:
                warnings.warn(
                    f"benchmark {entry.name!r} of {origin} is left out: the name is already "
                    f"taken by {_CATALOG.origin(entry.name)}",
                    PluginWarning,
                    stacklevel=2,
                )
            else:
                _CATALOG.add(entry.name, entry, origin=origin)


_builtins_added = False


def _add_builtins() -> None:
    """The built-in entries (:mod:`imprint.data.catalog_entries`), added once, first: on the
    first lookup or listing, or before a registration (so a built-in's name stays taken)."""
    global _builtins_added
    if _builtins_added:
        return
    _builtins_added = True
    from imprint.data.catalog_entries import builtin_benchmarks

    for entry in builtin_benchmarks():
        _CATALOG.add(entry.name, entry, origin=BUILTIN)


#: name -> entry, in the order added (WikiMIA first); plugins' families follow the built-ins
_CATALOG: Registry[BenchmarkEntry] = Registry(
    "benchmark", check=_check_entry, sources=(_add_builtins, _add_plugin_families), error=DataError
)


def register_benchmark(
    entry: BenchmarkEntry, *, force: bool = False, origin: str | None = None
) -> None:
    """Add a named benchmark; an existing name raises unless ``force=True``. ``origin`` is
    what ``imprint datasets`` says it comes from (default: registered at run time)."""
    if ":" in entry.name.partition(":")[0] or not entry.name.strip():
        raise ConfigError(f"benchmark name {entry.name!r} must be 'family' or 'family:variant'")
    _add_builtins()
    _CATALOG.add(entry.name, entry, force=force, origin=origin)


def is_benchmark(name: str) -> bool:
    return name in _CATALOG


def benchmark_origin(name: str) -> str:
    """Where benchmark ``name`` comes from: ``built-in``, ``plugin DIST``, ``module M``."""
    return _CATALOG.origin(name)


def get_benchmark(name: str) -> BenchmarkEntry:
    """The entry named ``name``; an unknown name raises :class:`DataError` with suggestions."""
    if name not in _CATALOG:
        raise DataError(
            f"unknown benchmark {name!r}.{did_you_mean(name, _CATALOG.names())} "
            "Run `imprint datasets` for the full list."
        )
    return _CATALOG.get(name)


def iter_benchmarks(family: str | None = None) -> Iterator[BenchmarkEntry]:
    """Entries in registration order (the issue's order: WikiMIA first), optionally one family."""
    entries = _CATALOG.load_all(sort=False).values()
    return (e for e in entries if family is None or e.family == family)


def shared_file_names() -> set[str]:
    """File names (without folder) that more than one benchmark uses: never looked up flat."""
    owners: dict[str, set[str]] = {}
    for e in iter_benchmarks():
        for f in e.files:
            for rel in f.locals:
                owners.setdefault(rel.rsplit("/", 1)[-1], set()).add(e.name)
    return {name for name, entries in owners.items() if len(entries) > 1}


def natural_key(name: str) -> list[Any]:
    """Sort ``wikimia:32`` before ``wikimia:128``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def did_you_mean(spec: str, choices: list[str]) -> str:
    """`` Did you mean a, b?`` for the closest names and names of the same family, or ``""``."""
    lowered = {c.lower(): c for c in choices}
    close = [lowered[c] for c in difflib.get_close_matches(spec.lower(), lowered, n=3, cutoff=0.5)]
    families = {c.partition(":")[0].lower() for c in choices}
    family = spec.partition(":")[0].lower()
    near = difflib.get_close_matches(family, families, n=1, cutoff=0.6) if family else []
    family = family if family in families else (near[0] if near else family)
    same = [c for c in choices if c.partition(":")[0].lower() == family and c not in close]
    close += sorted(same, key=natural_key)[: max(0, 5 - len(close))]
    return f" Did you mean {', '.join(close)}?" if close else ""
