"""The one store: every model answer in one SQLite table, keyed by (backend, kind, request key).

Log-prob passes, sampled texts, embeddings, neighbours, an HTTP endpoint's raw answers: each is a
row of ``request_results``, encoded by its request kind (raw arrays or JSON, never pickle), in WAL
mode. Each executed batch is written in one transaction, so a run killed at any point leaves whole
rows only and the next run executes just what is missing.

Damage is handled one way: a row whose checksum does not match (a flipped byte, numbers edited
in place) or that cannot be decoded (a torn write) is deleted with a warning naming the cache,
counted (:attr:`RequestStore.damaged`, the run's ``damaged`` count) and computed again; never a
silent wrong answer. The checksum (BLAKE2b of backend, kind, key and data) binds the data to its
key, so a row copied under another key fails too.

Versions: schema 3 is this layout. A schema-2 file (no checksum column) gets the column when it
is opened; its rows, written before checksums were kept, are served once as they are, counted
in a warning, and given their checksum then (they cannot be verified, only protected from now
on). A file of schema 1 (the request table beside the signal cache's ``token_stats`` and
``responses`` tables) is migrated once, in one transaction, when it is opened: its log-prob
rows become ``logprobs`` rows under the same content-hash key and its HTTP answers ``response``
rows (as schema-2 rows: served once, then checksummed), so an old cache serves a rerun without a
single model call.

A path that cannot be an imprint cache (a folder, a file that is not SQLite, another program's
database) is refused when the store is opened, before any model loads, and left untouched.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError
from imprint.requests.kinds import Request

SCHEMA_VERSION = 3
_SCHEMA = """
CREATE TABLE IF NOT EXISTS request_results (
    backend TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    data BLOB NOT NULL,
    checksum TEXT,
    PRIMARY KEY (backend, kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS request_schema (version INTEGER NOT NULL)
"""
# tables of this layout and of schema 1 (migrated on open), with their columns
_COLUMNS = {
    "request_results": ["backend", "kind", "key", "data", "checksum"],
    "request_schema": ["version"],
    "token_stats": ["backend", "context", "text", "data"],
    "responses": ["key", "data"],
}
_UNCHECKED = ["backend", "kind", "key", "data"]  # request_results of schemas 1 and 2
_INTO = "INSERT OR IGNORE INTO request_results (backend, kind, key, data) "
_MIGRATE_V1 = {
    "token_stats": _INTO
    + "SELECT backend, 'logprobs', context || ':' || text, data FROM token_stats",
    "responses": _INTO + "SELECT '', 'response', key, CAST(data AS BLOB) FROM responses",
}
_PUT = "INSERT OR REPLACE INTO request_results VALUES (?, ?, ?, ?, ?)"
RESPONSE = "response"  # the kind of an HTTP endpoint's raw answer (a list of texts)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_FIX = (
    "pass --cache (RunConfig.cache) a file path of imprint's own, e.g. signals.sqlite (created "
    "if missing)"
)
_CHUNK = 500  # keys per SELECT (SQLite's parameter limit is 999 on old builds)


class RequestStore:
    """Thread-safe store of request results; ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None) -> None:
        """Open (or create, or migrate) the store at ``path``; ConfigError, naming the path and
        the fix, for a folder, a file that is not SQLite, or an SQLite file of something else."""
        self.path = Path(path) if path else None
        # (backend, kind) -> keys of rows found damaged and removed (the runner counts those it
        # computes again)
        self.damaged: dict[tuple[str, str], set[str]] = {}
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

    def get_many(self, backend: str, requests: Sequence[Request]) -> dict[str, Any]:
        """Request key -> decoded result, for the requests already stored (of one kind each);
        an undecodable row is deleted with a warning and left out (it is computed again)."""
        by_kind: dict[str, dict[str, Request]] = {}
        for request in requests:
            by_kind.setdefault(request.kind, {})[request.key()] = request
        found: dict[str, Any] = {}
        for kind, wanted in by_kind.items():
            decode = next(iter(wanted.values())).decode
            found.update(self.get_keys(backend, kind, list(wanted), decode))
        return found

    def get_keys(
        self, backend: str, kind: str, keys: Sequence[str], decode: Callable[[bytes], Any]
    ) -> dict[str, Any]:
        """Key -> ``decode(row)`` for the stored ``keys`` of one kind (damaged rows: deleted
        with a warning and left out)."""
        found: dict[str, Any] = {}
        damaged: list[tuple[str, str, str]] = []
        unchecked: list[tuple[str, str, str, str]] = []
        with self._locked() as conn:
            for key, value, stored in _select(conn, backend, kind, list(dict.fromkeys(keys))):
                # a value rewritten as TEXT (same bytes) is read as the blob it was
                blob = value.encode("utf-8") if isinstance(value, str) else value
                checksum = _checksum(backend, kind, key, blob)
                if stored is not None and stored != checksum:
                    damaged.append((backend, kind, key))
                    continue
                try:
                    found[key] = decode(blob)
                except (ValueError, TypeError, UnicodeDecodeError):
                    damaged.append((backend, kind, key))
                    continue
                if stored is None:
                    unchecked.append((checksum, backend, kind, key))
            if damaged:
                self._discard(conn, damaged, "entries")
            if unchecked:
                self._protect(conn, unchecked)
        return found

    def put_keys(self, backend: str, kind: str, rows: Iterable[tuple[str, bytes]]) -> None:
        """Store encoded ``(key, blob)`` rows of one kind in one transaction."""
        with self._locked() as conn, conn:
            conn.executemany(_PUT, [_row(backend, kind, k, b) for k, b in rows])

    def put_many(self, backend: str, items: Iterable[tuple[Request, Any]]) -> None:
        """Store one executed batch atomically (one transaction)."""
        rows = [_row(backend, r.kind, r.key(), r.encode(result)) for r, result in items]
        with self._locked() as conn, conn:
            conn.executemany(_PUT, rows)

    def get_response(self, key: str) -> list[str] | None:
        """An HTTP endpoint's stored answer (a list of texts) to the request ``key``, or None
        (also when the stored answer is damaged: it is removed and asked again)."""
        with self._locked() as conn:
            rows = list(_select(conn, "", RESPONSE, [key]))
            if not rows:
                return None
            _, blob, stored = rows[0]
            checksum = _checksum("", RESPONSE, key, blob)
            try:
                texts = json.loads(blob) if stored in (None, checksum) else None
            except (TypeError, ValueError):
                texts = None
            if isinstance(texts, list) and all(isinstance(t, str) for t in texts):
                if stored is None:
                    self._protect(conn, [(checksum, "", RESPONSE, key)])
                return texts
            self._discard(conn, [("", RESPONSE, key)], "answers")
        return None

    def put_response(self, key: str, texts: Sequence[str]) -> None:
        """Store one HTTP answer (its own transaction: each paid answer is kept at once)."""
        blob = json.dumps(list(texts)).encode("utf-8")
        with self._locked() as conn, conn:
            conn.execute(_PUT, _row("", RESPONSE, key, blob))

    def count(self, kind: str | None = None) -> int:
        """Stored rows (of one kind when given)."""
        sql = "SELECT COUNT(*) FROM request_results"
        with self._locked() as conn:
            cur = conn.execute(sql + " WHERE kind=?", (kind,)) if kind else conn.execute(sql)
            return int(cur.fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _discard(
        self, conn: sqlite3.Connection, keys: list[tuple[str, str, str]], what: str
    ) -> None:
        """Delete damaged rows (they are recomputed), remember them and say so."""
        with conn:
            conn.executemany(
                "DELETE FROM request_results WHERE backend=? AND kind=? AND key=?", keys
            )
        for backend, kind, key in keys:
            self.damaged.setdefault((backend, kind), set()).add(key)
        warnings.warn(
            f"signal cache {str(self.path or ':memory:')!r}: {len(keys)} damaged {what} (their "
            "checksum does not match: altered since they were written, or unreadable) were "
            "removed; they are computed again",
            stacklevel=5,
        )

    def _protect(self, conn: sqlite3.Connection, rows: list[tuple[str, str, str, str]]) -> None:
        """Give rows written before checksums were kept (schema 2) their checksum, once, and
        say that they were served unverified."""
        with conn:
            conn.executemany(
                "UPDATE request_results SET checksum=? WHERE backend=? AND kind=? AND key=?", rows
            )
        warnings.warn(
            f"signal cache {str(self.path or ':memory:')!r}: {len(rows)} stored answers written "
            "by an older imprint (no checksum) were served as they are and now carry a "
            "checksum; delete the file to recompute everything",
            stacklevel=5,
        )


def _checksum(backend: str, kind: str, key: str, blob: bytes | str) -> str:
    """BLAKE2b of the row's key parts (length-prefixed) and data."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (backend, kind, key):
        raw = part.encode("utf-8")
        digest.update(len(raw).to_bytes(8, "little") + raw)
    digest.update(blob if isinstance(blob, bytes) else str(blob).encode("utf-8"))
    return digest.hexdigest()


def _row(backend: str, kind: str, key: str, blob: bytes) -> tuple[str, str, str, bytes, str]:
    return backend, kind, key, blob, _checksum(backend, kind, key, blob)


def _select(
    conn: sqlite3.Connection, backend: str, kind: str, keys: list[str]
) -> Iterator[tuple[str, bytes, str | None]]:
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        yield from conn.execute(
            "SELECT key, data, checksum FROM request_results WHERE backend=? AND kind=? "
            f"AND key IN ({marks})",
            (backend, kind, *chunk),
        )


def _check_file(path: Path) -> None:
    """Refuse, before opening it, a path that cannot be an imprint cache."""
    if path.is_dir():
        raise ConfigError(
            f"signal cache {str(path)!r} is a folder, not an SQLite file; pass --cache "
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


def check_store_path(path: Path) -> None:
    """Refuse, before any work, a store path that is not an imprint store (see
    :func:`_check_file`) or lies where no file can be made (a read-only place): the one check
    of every command's ``--cache`` and ``IMPRINT_CACHE_DIR``."""
    from imprint.outdir import check_writable

    _check_file(path)
    try:
        check_writable(path, "signal cache")
    except ConfigError as err:
        raise ConfigError(
            f"{err}: pass --cache a file in a writable folder, or set IMPRINT_CACHE_DIR to one "
            "(the default cache is IMPRINT_CACHE_DIR/signals.sqlite)"
        ) from None


def _check_tables(conn: sqlite3.Connection, path: Path) -> set[str]:
    """Refuse an SQLite file of something else, or an imprint cache of another layout."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    tables = {name for (name,) in rows if not name.startswith("sqlite_")}
    # imprint's own files hold only its tables: any other table (even beside one of imprint's
    # names, e.g. a "responses" table of another program) means another program's database,
    # which is never migrated or written to
    if tables and (not tables & _COLUMNS.keys() or tables - _COLUMNS.keys()):
        raise ConfigError(
            f"signal cache {str(path)!r} is an SQLite database of something else (tables: "
            f"{', '.join(sorted(tables))}); imprint will not add its tables to it; {_FIX}"
        )
    for table, expected in _COLUMNS.items():
        if table in tables:
            found = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if found != expected and not (table == "request_results" and found == _UNCHECKED):
                raise ConfigError(
                    f"signal cache {str(path)!r}: table {table!r} has columns {found}, expected "
                    f"{expected}; it was not written by this imprint. Delete the file (it only "
                    f"holds cached scores) or {_FIX}"
                )
    return tables


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.executescript(_SCHEMA)
        _set_version(conn, path)
        return conn
    check_store_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"signal cache {str(path)!r}: cannot create its folder ({err}); {_FIX}"
        ) from err
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
    except sqlite3.Error as err:  # e.g. a folder where files cannot be made after all
        raise ConfigError(f"signal cache {str(path)!r} cannot be opened ({err}); {_FIX}") from err
    try:
        _check_tables(conn, path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        conn.commit()
        _set_version(conn, path)
    except sqlite3.DatabaseError as err:
        conn.close()
        raise _database_error(path, err) from err
    except ConfigError:
        conn.close()
        raise
    return conn


def _set_version(conn: sqlite3.Connection, path: Path | None) -> None:
    """Stamp a new store, migrate a schema-1 one (one transaction), refuse a newer one."""
    conn.execute("BEGIN IMMEDIATE")  # two runs opening one old file migrate it once
    try:
        row = conn.execute("SELECT version FROM request_schema").fetchone()
        if row is not None and row[0] not in (1, 2, SCHEMA_VERSION):
            raise ConfigError(
                f"request cache {path} has schema version {row[0]}, this imprint writes "
                f"{SCHEMA_VERSION}; use another --cache path"
            )
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = [r[1] for r in conn.execute("PRAGMA table_info(request_results)")]
        if "checksum" not in columns:  # schema 1 or 2: rows get theirs when first read
            conn.execute("ALTER TABLE request_results ADD COLUMN checksum TEXT")
        legacy = [t for t in _MIGRATE_V1 if t in tables]
        for table in legacy:
            conn.execute(_MIGRATE_V1[table])
            conn.execute(f"DROP TABLE {table}")
        if row is None or row[0] != SCHEMA_VERSION or legacy:
            conn.execute("DELETE FROM request_schema")
            conn.execute("INSERT INTO request_schema VALUES (?)", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _database_error(path: Path | None, err: sqlite3.DatabaseError) -> ConfigError:
    where = str(path) if path else ":memory:"
    return ConfigError(
        f"signal cache {where!r} failed: {err}. If another run holds it, wait or pass --cache "
        "another path; if it is damaged ('malformed', 'not a database'), delete it (it only "
        f"holds cached scores, recomputed on the next run) or {_FIX}"
    )
