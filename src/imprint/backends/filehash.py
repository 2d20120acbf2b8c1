"""Whole-content file digests, computed once per file version and remembered in the imprint cache.

A model's fingerprint keys the signal cache, so it must change whenever any weight changes: a
fine-tune of the top layers or an in-place edit may leave the size and the first and last bytes
of a weights file alone. Hashing a 500 MB file takes about a second, too slow for every run, so
the digest is kept in ``<cache_dir>/file-digests`` (one small JSON file per path) next to the
file's size, mtime, ctime, inode and device. Any write to the file changes its ctime (which,
unlike mtime, a user cannot set back), so a stale digest is never served.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

ALGORITHM = "sha256"  # with SHA extensions ~2 GB/s, faster than blake2b on common CPUs


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _memo_path(memo_dir: Path, path: Path) -> Path:
    name = hashlib.sha256(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return memo_dir / f"{name}.json"


def _read_memo(memo: Path, path: Path, stat_key: list[int]) -> str | None:
    try:
        entry = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or damaged: hash again
    if not isinstance(entry, dict):
        return None
    same = entry.get("path") == str(path) and entry.get("stat") == stat_key
    digest = entry.get("digest")
    ok = same and entry.get("algorithm") == ALGORITHM and isinstance(digest, str)
    return digest if ok else None


def _write_memo(memo: Path, entry: dict[str, object]) -> None:
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=".tmp-")
    except OSError:
        return  # a read-only cache only costs a re-hash next time
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, memo)  # atomic: concurrent runs never read half an entry
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def file_digest(path: str | Path, *, memo_dir: Path | None) -> str:
    """Hex ``sha256`` of the whole content of ``path``.

    With ``memo_dir`` the digest is looked up there first and stored after hashing, keyed by the
    resolved path and its (size, mtime_ns, ctime_ns, inode, device); a file that changed while it
    was hashed is not remembered.
    """
    path = Path(path).resolve()
    before = _stat_key(path.stat())
    memo = _memo_path(memo_dir, path) if memo_dir is not None else None
    if memo is not None:
        cached = _read_memo(memo, path, before)
        if cached is not None:
            return cached
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, ALGORITHM).hexdigest()
    if memo is not None and _stat_key(path.stat()) == before:
        entry: dict[str, object] = {"path": str(path), "stat": before, "algorithm": ALGORITHM}
        entry["digest"] = digest
        _write_memo(memo, entry)
    return digest
