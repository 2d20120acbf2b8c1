"""The request store: one SQLite table of results, keyed by (backend, kind, request key).

It lives in the same file as the log-prob signal cache (:class:`imprint.signals.cache.
SignalCache` keeps per-token statistics there), in WAL mode; each executed batch is written in one
transaction, so a run killed at any point leaves whole rows only and the next run executes just
what is missing. Results are encoded by their request kind (JSON or raw float32), never pickled.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError
from imprint.requests.kinds import Request

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS request_results (
    backend TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (backend, kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS request_schema (version INTEGER NOT NULL)
"""


class RequestStore:
    """Thread-safe store of request results; ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        try:
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path) if self.path else ":memory:", check_same_thread=False, timeout=60
            )
            if self.path:
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
            self._check_version()
        except sqlite3.DatabaseError as err:
            raise ConfigError(
                f"request cache {self.path}: not a usable SQLite file ({err}); point --cache at "
                "a new path or delete the file"
            ) from err

    def _check_version(self) -> None:
        with self._conn:
            row = self._conn.execute("SELECT version FROM request_schema").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO request_schema VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise ConfigError(
                    f"request cache {self.path} has schema version {row[0]}, this imprint "
                    f"writes {SCHEMA_VERSION}; use another --cache path"
                )

    def get_many(self, backend: str, requests: Sequence[Request]) -> dict[str, Any]:
        """Request key -> decoded result, for the requests already stored."""
        found: dict[str, Any] = {}
        with self._lock:
            for request in requests:
                key = request.key()
                row = self._conn.execute(
                    "SELECT data FROM request_results WHERE backend=? AND kind=? AND key=?",
                    (backend, request.kind, key),
                ).fetchone()
                if row is not None:
                    found[key] = _decode(request, row[0], self.path)
        return found

    def put_many(self, backend: str, items: Iterable[tuple[Request, Any]]) -> None:
        """Store one executed batch atomically."""
        rows = [(backend, r.kind, r.key(), r.encode(result)) for r, result in items]
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO request_results VALUES (?, ?, ?, ?)", rows
            )

    def count(self, kind: str | None = None) -> int:
        sql = "SELECT COUNT(*) FROM request_results"
        with self._lock:
            cur = (
                self._conn.execute(sql + " WHERE kind=?", (kind,))
                if kind
                else self._conn.execute(sql)
            )
            return int(cur.fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _decode(request: Request, blob: bytes, path: Path | None) -> Any:
    try:
        return request.decode(blob)
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"request cache {path}: a stored {request.kind} result cannot be read ({err}); "
            "delete the cache file (or use another --cache path) to recompute"
        ) from err
