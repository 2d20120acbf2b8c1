"""Persistent, content-addressed signal cache (SQLite in WAL mode).

Key: (backend fingerprint, context hash, text hash). The context is the unscored prefix ("" for
none), so a lowercased text or a prefixed pass is simply another key. Each batch is committed in
one transaction: a run killed at any point leaves only whole, valid rows behind, and the next run
scores only what is missing.

The same file keeps black-box answers (table ``responses``): one row per API request, keyed by the
backend fingerprint and the request body, so a killed run against a paid endpoint resumes without
asking (or paying) twice.
"""

from __future__ import annotations

import io
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from imprint.backends.base import TokenStats
from imprint.data.sample import text_hash

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

Key = tuple[str, str, str]


def make_key(backend_fingerprint: str, text: str, prefix: str | None = None) -> Key:
    """Cache key of scoring ``text`` after ``prefix`` with a given backend."""
    return (backend_fingerprint, text_hash(prefix) if prefix else "", text_hash(text))


def encode_stats(stats: TokenStats) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **{f: getattr(stats, f) for f in TokenStats.FIELDS})
    return buffer.getvalue()


def decode_stats(blob: bytes) -> TokenStats:
    with np.load(io.BytesIO(blob)) as arrays:
        return TokenStats(**{f: arrays[f] for f in TokenStats.FIELDS})


class SignalCache:
    """Thread-safe SQLite store of ``TokenStats``; ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            str(self.path) if self.path else ":memory:", check_same_thread=False, timeout=60
        )
        if self.path:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._conn.commit()

    def get_many(self, keys: Sequence[Key]) -> dict[Key, TokenStats]:
        """The cached entries among ``keys`` (missing keys are simply absent)."""
        found: dict[Key, TokenStats] = {}
        with self._lock:
            for key in dict.fromkeys(keys):
                row = self._conn.execute(
                    "SELECT data FROM token_stats WHERE backend=? AND context=? AND text=?", key
                ).fetchone()
                if row is not None:
                    found[key] = decode_stats(row[0])
        return found

    def put_many(self, items: Iterable[tuple[Key, TokenStats]]) -> None:
        """Store a batch atomically (one transaction)."""
        rows = [(*key, encode_stats(stats)) for key, stats in items]
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO token_stats (backend, context, text, data) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )

    def get_response(self, key: str) -> list[str] | None:
        """The cached answer (a list of texts) of one black-box request, or None."""
        with self._lock:
            row = self._conn.execute("SELECT data FROM responses WHERE key=?", (key,)).fetchone()
        return None if row is None else list(json.loads(row[0]))

    def put_response(self, key: str, texts: Sequence[str]) -> None:
        """Store one request's answer (its own transaction: each paid answer is kept at once)."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, data) VALUES (?, ?)",
                (key, json.dumps(list(texts))),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM token_stats").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
