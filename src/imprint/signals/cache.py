"""Persistent, content-addressed signal cache (SQLite in WAL mode).

Key: (backend fingerprint, context hash, text hash). The context is the unscored prefix ("" for
none), so a lowercased text or a prefixed pass is simply another key. Each batch is committed in
one transaction: a run killed at any point leaves only whole, valid rows behind, and the next run
scores only what is missing.

The same file keeps black-box answers (table ``responses``): one row per API request, keyed by the
backend fingerprint and the request body, so a killed run against a paid endpoint resumes without
asking (or paying) twice.

A path that cannot be an imprint cache (a folder, a file that is not SQLite, another program's
database) is refused when the cache is opened, before any model loads, and left untouched. A row
that cannot be decoded (a torn write, disk damage) is deleted with a warning and computed again.
"""

from __future__ import annotations

import io
import json
import sqlite3
import struct
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from imprint.backends.base import TokenStats
from imprint.data.sample import text_hash
from imprint.errors import ConfigError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS token_stats (
    backend TEXT NOT NULL,
    context TEXT NOT NULL,
    text TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (backend, context, text)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    data TEXT NOT NULL
) WITHOUT ROWID
"""

_COLUMNS = {"token_stats": ["backend", "context", "text", "data"], "responses": ["key", "data"]}
_SQLITE_MAGIC = b"SQLite format 3\x00"
_FIX = (
    "pass --cache (RunConfig.cache) a file path of imprint's own, e.g. signals.sqlite (created "
    "if missing)"
)

Key = tuple[str, str, str]


def make_key(backend_fingerprint: str, text: str, prefix: str | None = None) -> Key:
    """Cache key of scoring ``text`` after ``prefix`` with a given backend."""
    return (backend_fingerprint, text_hash(prefix) if prefix else "", text_hash(text))


# Entries are the TokenStats fields as raw little-endian arrays after a small header: ~50x faster
# to write than an npz archive (a zip per text), which cost a GPU run ~1 s per 2,000 texts while
# the device waited. Entries written as npz by earlier versions are still read.
_MAGIC = b"IMTS\x01"
_DTYPES = {f: "<i4" if f in ("token_ids", "rank", "argmax") else "<f4" for f in TokenStats.FIELDS}
_HEADER = struct.Struct("<5sI")  # magic, number of tokens


def encode_stats(stats: TokenStats) -> bytes:
    arrays = [np.ascontiguousarray(getattr(stats, f), dtype=_DTYPES[f]) for f in TokenStats.FIELDS]
    return b"".join([_HEADER.pack(_MAGIC, len(stats)), *(a.tobytes() for a in arrays)])


def decode_stats(blob: bytes) -> TokenStats:
    """The stats stored by :func:`encode_stats`; ValueError when ``blob`` is not such an entry."""
    if not blob.startswith(_MAGIC):
        return _decode_npz(blob)
    if len(blob) < _HEADER.size:
        raise ValueError(f"not an encoded TokenStats: {len(blob)} bytes, shorter than a header")
    (_, n) = _HEADER.unpack_from(blob)
    if len(blob) != _HEADER.size + 4 * n * len(TokenStats.FIELDS):
        raise ValueError(f"not an encoded TokenStats: {len(blob)} bytes for {n} tokens")
    fields, offset = {}, _HEADER.size
    for f in TokenStats.FIELDS:
        fields[f] = np.frombuffer(blob, dtype=_DTYPES[f], count=n, offset=offset).astype(
            _DTYPES[f][1:]
        )
        offset += 4 * n
    return TokenStats(**fields)


def _decode_npz(blob: bytes) -> TokenStats:
    """An entry written by imprint <= 0.1 (an npz archive per text)."""
    try:
        with np.load(io.BytesIO(blob)) as arrays:
            stats = TokenStats(**{f: arrays[f] for f in TokenStats.FIELDS})
    except Exception as err:  # np.load raises many types on bad bytes (BadZipFile, EOFError...)
        raise ValueError(f"not an encoded TokenStats ({type(err).__name__}: {err})") from err
    shapes = {getattr(stats, f).shape for f in TokenStats.FIELDS}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"not an encoded TokenStats: field shapes {sorted(shapes)} differ")
    return stats


def _check_file(path: Path) -> None:
    """Refuse, before opening it, a path that cannot be an imprint cache."""
    if path.is_dir():
        raise ConfigError(
            f"signal cache {str(path)!r} is a folder, not a file; pass --cache "
            f"(RunConfig.cache) a file path such as {str(path / 'signals.sqlite')!r} (created "
            "if missing)"
        )
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return  # a new cache
    except OSError as err:
        raise ConfigError(f"signal cache {str(path)!r} cannot be read ({err}); {_FIX}") from err
    if head and head != _SQLITE_MAGIC:
        raise ConfigError(
            f"signal cache {str(path)!r} is not an SQLite database (it starts with {head[:8]!r}; "
            f"a data or model file passed by mistake?); it was left untouched; {_FIX}"
        )


def _check_tables(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse an SQLite file of something else, or an imprint cache of another layout."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    tables = {name for (name,) in rows}
    if tables and not tables & _COLUMNS.keys():
        raise ConfigError(
            f"signal cache {str(path)!r} is an SQLite database of something else (tables: "
            f"{', '.join(sorted(tables))}); imprint will not add its tables to it; {_FIX}"
        )
    for table, expected in _COLUMNS.items():
        if table in tables:
            found = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if found != expected:
                raise ConfigError(
                    f"signal cache {str(path)!r}: table {table!r} has columns {found}, expected "
                    f"{expected}; it was not written by this imprint. Delete the file (it only "
                    f"holds cached scores) or {_FIX}"
                )


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.executescript(_SCHEMA)
        return conn
    _check_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"signal cache {str(path)!r}: cannot create its folder ({err}); {_FIX}"
        ) from err
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
    try:
        _check_tables(conn, path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        conn.commit()
    except sqlite3.DatabaseError as err:
        conn.close()
        raise _database_error(path, err) from err
    except ConfigError:
        conn.close()
        raise
    return conn


def _database_error(path: Path | None, err: sqlite3.DatabaseError) -> ConfigError:
    where = str(path) if path else ":memory:"
    return ConfigError(
        f"signal cache {where!r} failed: {err}. If another run holds it, wait or pass --cache "
        "another path; if it is damaged ('malformed', 'not a database'), delete it (it only "
        f"holds cached scores, recomputed on the next run) or {_FIX}"
    )


class SignalCache:
    """Thread-safe SQLite store of ``TokenStats``; ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None) -> None:
        """Open (or create) the cache at ``path``; ConfigError, naming the path and the fix,
        for a folder, a file that is not SQLite, or an SQLite file that is not an imprint cache.
        """
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._conn = _connect(self.path)

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; SQLite failures become errors naming the file."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.DatabaseError as err:
                raise _database_error(self.path, err) from err

    def _discard(self, table: str, where: str, keys: list[tuple[str, ...]], what: str) -> None:
        """Delete unreadable rows (they are recomputed) and say so."""
        with self._conn:
            self._conn.executemany(f"DELETE FROM {table} WHERE {where}", keys)
        warnings.warn(
            f"signal cache {str(self.path or ':memory:')!r}: {len(keys)} damaged {what} could "
            "not be read and were removed; they are computed again",
            stacklevel=3,
        )

    def get_many(self, keys: Sequence[Key]) -> dict[Key, TokenStats]:
        """The cached entries among ``keys`` (missing or damaged keys are absent)."""
        found: dict[Key, TokenStats] = {}
        damaged: list[tuple[str, ...]] = []
        with self._locked() as conn:
            for key in dict.fromkeys(keys):
                row = conn.execute(
                    "SELECT data FROM token_stats WHERE backend=? AND context=? AND text=?", key
                ).fetchone()
                if row is None:
                    continue
                try:
                    found[key] = decode_stats(row[0])
                except ValueError:
                    damaged.append(key)
            if damaged:
                where = "backend=? AND context=? AND text=?"
                self._discard("token_stats", where, damaged, "entries")
        return found

    def put_many(self, items: Iterable[tuple[Key, TokenStats]]) -> None:
        """Store a batch atomically (one transaction)."""
        rows = [(*key, encode_stats(stats)) for key, stats in items]
        with self._locked() as conn, conn:
            conn.executemany(
                "INSERT OR REPLACE INTO token_stats (backend, context, text, data) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )

    def get_response(self, key: str) -> list[str] | None:
        """The cached answer (a list of texts) of one black-box request, or None (also when the
        stored answer is damaged: it is removed and asked again)."""
        with self._locked() as conn:
            row = conn.execute("SELECT data FROM responses WHERE key=?", (key,)).fetchone()
            if row is None:
                return None
            try:
                texts = json.loads(row[0])
            except (TypeError, ValueError):
                texts = None
            if isinstance(texts, list) and all(isinstance(t, str) for t in texts):
                return texts
            self._discard("responses", "key=?", [(key,)], "answers")
        return None

    def put_response(self, key: str, texts: Sequence[str]) -> None:
        """Store one request's answer (its own transaction: each paid answer is kept at once)."""
        with self._locked() as conn, conn:
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, data) VALUES (?, ?)",
                (key, json.dumps(list(texts))),
            )

    def __len__(self) -> int:
        with self._locked() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM token_stats").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
