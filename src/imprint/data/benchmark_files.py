"""Where a named benchmark's files are: a local data dir first, then the Hugging Face hub.

A file is looked up as ``<data dir>/<entry's local path>`` in every data dir (``$IMPRINT_DATA_DIR``,
then ``../shared/data`` relative to the working directory, then ``shared/data`` next to the
repository), then in the hub's local cache, and only then downloaded with
``huggingface_hub.hf_hub_download`` (the data file itself: no ``datasets`` loading script runs).
When none works (offline, ``huggingface_hub`` missing, a set built locally and not built yet),
the error names each file to place, the full path to place it at, and the URL to fetch it from.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from imprint.data.catalog import HUB_URL, BenchmarkEntry, DataFile, Role, shared_file_names
from imprint.data.hub_access import hub_endpoint, hub_reachable, hub_unreachable_reason
from imprint.errors import DataError

DATA_DIR_ENV = "IMPRINT_DATA_DIR"
_FAILED = "the hub download failed"


def data_dirs() -> list[Path]:
    """Folders searched for benchmark files, in order (existing or not, duplicates removed)."""
    dirs: list[Path] = []
    env = os.environ.get(DATA_DIR_ENV, "")
    dirs += [Path(d).expanduser() for d in env.split(os.pathsep) if d.strip()]
    dirs.append(Path.cwd() / ".." / "shared" / "data")
    repo_root = Path(__file__).resolve().parents[3]
    dirs.append(repo_root.parent / "shared" / "data")
    unique: list[Path] = []
    for d in dirs:
        d = d.resolve()
        if d not in unique:
            unique.append(d)
    return unique


def find_local(file: DataFile) -> Path | None:
    """The first local copy of ``file`` among :func:`data_dirs`. A labelled table (role
    ``all``) may also sit directly in a data dir under its own file name when no other
    benchmark uses that name (MIMIR's member and non-member files share one; WikiMIA-24's
    Parquet is named like WikiMIA's)."""
    for path in _local_candidates(file):
        # an empty file (an interrupted download, a placeholder) is no copy: look further
        if (path.is_file() and path.stat().st_size > 0) or (path.is_dir() and not path.suffix):
            return path
    return None


def _local_candidates(file: DataFile) -> list[Path]:
    """Every path :func:`find_local` tries for ``file``, in order."""
    flat = file.role == "all" and PurePosixPath(file.local).name not in shared_file_names()
    out = []
    for d in data_dirs():
        for rel in file.locals:
            out.append(d / rel)
            if flat and rel == file.local:
                out.append(d / PurePosixPath(rel).name)
    return out


def _empty_copy(file: DataFile) -> Path | None:
    """An empty (0-byte) file where ``file`` would be, for the error to name."""
    return next((p for p in _local_candidates(file) if p.is_file() and not p.stat().st_size), None)


@dataclass(frozen=True)
class Located:
    """The path of each of a benchmark's files (by role) and where each came from."""

    paths: dict[Role, Path]
    origins: dict[Role, str]  # "local", "hub cache" or "hub"


def locate(entry: BenchmarkEntry, *, download: bool = True) -> Located:
    """Find every file of ``entry``: local copy, hub cache, then (``download``) the hub.

    Raises :class:`DataError` naming each missing file, where to place it and its URL.
    """
    paths: dict[Role, Path] = {}
    origins: dict[Role, str] = {}
    missing: list[DataFile] = []
    reasons: list[str] = []
    for file in entry.files:
        found, origin, reason = _find(entry, file, download=download)
        if found is None:
            missing.append(file)
            if reason and reason not in reasons:
                reasons.append(reason)
            # one failed download says the hub is unreachable: do not wait on it per file
            download = download and not (reason or "").startswith(_FAILED)
            continue
        paths[file.role], origins[file.role] = found, origin
    if missing:
        raise DataError(missing_message(entry, missing, reasons))
    return Located(paths, origins)


def local_status(entry: BenchmarkEntry) -> str | None:
    """Where a copy of every file already is without any download (``imprint datasets``):
    a local path, ``"hub cache"``, or None when some file is not here."""
    found = [_find(entry, f, download=False) for f in entry.files]
    if any(path is None for path, _, _ in found):
        return None
    if all(origin == "local" for _, origin, _ in found):
        first = found[0][0]
        return str(first.parent if len(found) > 1 and first is not None else first)
    return "hub cache"


def _find(
    entry: BenchmarkEntry, file: DataFile, *, download: bool
) -> tuple[Path | None, str, str | None]:
    """(path, origin, why not found)."""
    path = find_local(file)
    if path is not None:
        return path, "local", None
    if not file.on_hub or entry.hub_repo is None:
        return None, "", None
    try:
        hub = _hub()
    except ImportError:
        return None, "", "huggingface_hub is not installed (pip install huggingface_hub)"
    cached = _cached(hub, entry.hub_repo, file)
    if cached is not None:
        return cached, "hub cache", None
    if not download:
        return None, "", None
    if not hub_reachable():  # decided in seconds, not after the hub client's minute of retries
        return None, "", hub_unreachable_reason()
    try:
        return _download(hub, entry.hub_repo, file), "hub", None
    except Exception as exc:  # the hub raises many kinds; all mean "not fetchable here"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        why = f"{type(exc).__name__}: {first[:300]}"
        return None, "", f"{_FAILED} ({why}; HF_HUB_OFFLINE=1 skips the attempt)"


def _hub() -> Any:
    import huggingface_hub
    import huggingface_hub.constants  # noqa: F401  (a lazy submodule: import it by name)

    return huggingface_hub


def _cached(hub: Any, repo: str, file: DataFile) -> Path | None:
    """The file from the hub's local cache, without network."""
    if file.hub_path is not None:
        try:
            found = hub.hf_hub_download(
                repo, file.hub_path, repo_type="dataset", local_files_only=True
            )
        except Exception:  # not cached (or a broken cache entry): look elsewhere
            return None
        return Path(found)
    snapshots = Path(hub.constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
    matches = sorted((snapshots / "snapshots").glob(f"*/{file.hub_glob}"))
    return matches[-1] if matches else None


def _download(hub: Any, repo: str, file: DataFile) -> Path:
    endpoint = hub_endpoint()
    name = file.hub_path
    if name is None:
        listing = hub.HfApi(endpoint=endpoint).list_repo_files(repo, repo_type="dataset")
        matches = sorted(f for f in listing if fnmatch.fnmatchcase(f, str(file.hub_glob)))
        if len(matches) != 1:
            shown = ", ".join(listing[:12]) + (" ..." if len(listing) > 12 else "")
            raise DataError(
                f"{len(matches)} files of {repo} match {file.hub_glob!r} (want exactly one): "
                f"{matches or 'none'}; the repository has: {shown}"
            )
        name = matches[0]
    return Path(hub.hf_hub_download(repo, name, repo_type="dataset", endpoint=endpoint))


def file_url(entry: BenchmarkEntry, file: DataFile) -> str | None:
    """Where to fetch ``file`` on a connected machine (a tree page when only a pattern is known)."""
    if entry.hub_repo and file.hub_path:
        return f"{HUB_URL}/datasets/{entry.hub_repo}/resolve/main/{file.hub_path}"
    if entry.hub_repo and file.hub_glob:
        folder = PurePosixPath(file.hub_glob).parent
        page = f"{HUB_URL}/datasets/{entry.hub_repo}/tree/main/{folder}".rstrip("/.")
        return f"{page} (the file matching {file.hub_glob})"
    if entry.web_url:
        return f"{entry.web_url}/{PurePosixPath(file.local).name}"
    return None


def missing_message(entry: BenchmarkEntry, missing: list[DataFile], reasons: list[str]) -> str:
    """The offline error: which files, the full path to place each at, where to get it."""
    dirs = data_dirs()
    target = dirs[0]
    them = "them" if len(missing) > 1 else "it"
    how = "" if os.environ.get(DATA_DIR_ENV) else f", or set {DATA_DIR_ENV} and place {them} there"
    lines = [f"benchmark {entry.name!r} is not available here: no local copy"]
    lines[0] += f"; {'; '.join(reasons)}." if reasons else "."
    if entry.build_hint:
        lines.append(f"It is built locally, not downloaded: run `{entry.build_hint}`.")
    what = "these files" if len(missing) > 1 else "this file"
    lines.append(f"Fix: place {what} under {target}{how}:")
    for file in missing:
        kind = "folder of .txt files" if entry.reader == "text_dirs" else "file"
        role = {"all": "labelled", "member": "member", "nonmember": "non-member"}[file.role]
        url = file_url(entry, file)
        fetch = f"; download it on a connected machine from {url}" if url else ""
        empty = _empty_copy(file)
        there = f" (the file at {empty} is empty (0 bytes): replace it)" if empty else ""
        lines.append(f"  {target / file.local} ({role} {kind}){there}{fetch}.")
    lines.append(f"Looked in: {', '.join(str(d) for d in dirs)}.")
    if entry.layout_note:
        lines.append(f"Layout: {entry.layout_note}.")
    return "\n".join(lines)
