"""The benchmark catalog: one :class:`BenchmarkEntry` per named benchmark (``mimir:arxiv/...``).

An entry says what a benchmark is (provenance, licence, size, fields, known caveats) and where
its files live: a path relative to a data dir (``$IMPRINT_DATA_DIR/<family>/...``), and, for sets
published on the Hugging Face hub, the file's path in the hub repository (read directly, never
through a ``datasets`` loading script). The entries themselves are in
:mod:`imprint.data.catalog_entries`; this module holds the types and the registry. Installed
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
from dataclasses import dataclass
from typing import Any, Literal, get_args

from imprint.errors import ConfigError, DataError
from imprint.registry import PluginWarning, Registry

#: How a benchmark's files become samples (see :mod:`imprint.data.benchmark_readers`):
#: ``records``: one table (JSONL/Parquet) with a text and a label column;
#: ``member_nonmember``: a member file and a non-member file of JSON lines, one text each (MIMIR);
#: ``text_dirs``: a folder of ``.txt`` files per label (the Blind-MIA Gutenberg set).
Reader = Literal["records", "member_nonmember", "text_dirs"]
Role = Literal["all", "member", "nonmember"]
HUB_URL = "https://huggingface.co"


@dataclass(frozen=True)
class DataFile:
    """One file (or, for ``text_dirs``, one folder) of a benchmark.

    ``local`` is relative to a data dir; ``also`` lists other accepted local paths. On the hub the
    file is ``hub_path`` exactly, or the one file matching ``hub_glob`` where the exact name could
    not be confirmed. ``role`` says which label the file holds (``all``: a label column).
    """

    local: str
    role: Role = "all"
    hub_path: str | None = None
    hub_glob: str | None = None
    also: tuple[str, ...] = ()

    @property
    def on_hub(self) -> bool:
        return self.hub_path is not None or self.hub_glob is not None

    @property
    def locals(self) -> tuple[str, ...]:
        """Every accepted local relative path, preferred first."""
        return (self.local, *self.also)


@dataclass(frozen=True)
class BenchmarkEntry:
    """A named benchmark: what it is, its known caveats, and where its files are.

    ``length_words`` is the truncation bucket (WikiMIA-style sets), used by the defect check for
    texts much shorter than their bucket; ``siblings`` are the other splits of the same benchmark
    whose overlap with this one is checked when they are present locally (any overlap is a
    defect when ``disjoint_siblings``, else only texts under the other label). ``build_hint``
    marks a set that is built locally rather than downloaded, with the command that builds it.
    """

    name: str
    family: str
    description: str
    provenance: str
    licence: str
    size: str
    fields: str
    caveats: tuple[str, ...]
    files: tuple[DataFile, ...]
    reader: Reader = "records"
    hub_repo: str | None = None
    web_url: str | None = None
    text_field: str | None = None
    label_field: str | None = None
    id_prefix: str | None = None
    length_words: int | None = None
    siblings: tuple[str, ...] = ()
    disjoint_siblings: bool = False  # held-out partners (dev vs test): any shared text is leakage
    layout_note: str = ""
    build_hint: str | None = None

    def __post_init__(self) -> None:
        if self.reader not in get_args(Reader):
            raise ConfigError(f"{self.name}: reader {self.reader!r} not in {get_args(Reader)}")
        roles = sorted(f.role for f in self.files)
        wanted = ["all"] if self.reader == "records" else ["member", "nonmember"]
        if roles != wanted:
            raise ConfigError(f"{self.name}: a {self.reader} benchmark needs files {wanted}")
        if any(f.on_hub for f in self.files) and not self.hub_repo:
            raise ConfigError(f"{self.name}: files with a hub path need hub_repo")
        if self.name in self.siblings:
            raise ConfigError(f"{self.name}: a benchmark is not its own sibling")

    @property
    def hub_page(self) -> str | None:
        """The hub dataset's page, or None for a set not on the hub."""
        return f"{HUB_URL}/datasets/{self.hub_repo}" if self.hub_repo else None

    def file(self, role: Role) -> DataFile:
        return next(f for f in self.files if f.role == role)

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``imprint datasets --json`` shows it."""
        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "provenance": self.provenance,
            "licence": self.licence,
            "size": self.size,
            "fields": self.fields,
            "caveats": list(self.caveats),
            "hub": self.hub_page,
            "web": self.web_url,
            "files": [
                {"local": f.local, "also": list(f.also), "role": f.role, "hub_path": f.hub_path}
                | ({"hub_glob": f.hub_glob} if f.hub_glob else {})
                for f in self.files
            ],
            "layout_note": self.layout_note,
            "build": self.build_hint,
        }


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


#: name -> entry, in the order added (WikiMIA first); plugins' families follow the built-ins
_CATALOG: Registry[BenchmarkEntry] = Registry(
    "benchmark", check=_check_entry, sources=(_add_plugin_families,), error=DataError
)


def register_benchmark(
    entry: BenchmarkEntry, *, force: bool = False, origin: str | None = None
) -> None:
    """Add a named benchmark; an existing name raises unless ``force=True``. ``origin`` is
    what ``imprint datasets`` says it comes from (default: registered at run time)."""
    if ":" in entry.name.partition(":")[0] or not entry.name.strip():
        raise ConfigError(f"benchmark name {entry.name!r} must be 'family' or 'family:variant'")
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
