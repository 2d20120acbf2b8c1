"""What a named benchmark is: :class:`BenchmarkEntry` and its :class:`DataFile` s.

The types the catalog (:mod:`imprint.data.catalog`) registers and the built-in entries
(:mod:`imprint.data.catalog_entries`) are made of, on their own so that both import them and
neither imports the other's registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from imprint.errors import ConfigError

__all__ = ["HUB_URL", "BenchmarkEntry", "DataFile", "Reader", "Role"]

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
