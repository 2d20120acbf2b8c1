"""A database of another program is never taken for an old imprint cache: a file holding one of
imprint's table names beside tables of its own is refused and left untouched (the schema-1
migration used to move and drop its ``responses`` table)."""

from __future__ import annotations

import sqlite3

import pytest

from imprint.errors import ConfigError
from imprint.requests.store import RequestStore


def test_another_programs_database_sharing_a_table_name_is_refused_untouched(tmp_path):
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
        conn.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, data TEXT NOT NULL)")
        conn.execute("INSERT INTO responses VALUES ('k', 'their data')")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"database of something else.*users"):
        RequestStore(path)
    assert path.read_bytes() == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT data FROM responses").fetchall() == [("their data",)]
