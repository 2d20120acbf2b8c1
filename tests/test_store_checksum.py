"""A stored answer altered inside a valid row is never served (issue 37 item 9): every row
carries a checksum of its key and data; a mismatch is a missing answer, computed again, counted
in the run (``damaged``) and said. Stores of schema 2 (no checksum) stay readable."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.requests.kinds import SampleRequest
from imprint.requests.logprobs import decode_stats, encode_stats
from imprint.requests.store import SCHEMA_VERSION, RequestStore


def _rows(path: Path, kind: str = "logprobs") -> list[tuple[str, bytes]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT key, data FROM request_results WHERE kind=? ORDER BY key", (kind,)
        ).fetchall()
    conn.close()
    return rows


def _set(path: Path, key: str, blob: bytes) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE request_results SET data=? WHERE key=?", (blob, key))
    conn.close()


def _run(args: list[str], out: Path) -> tuple[str, dict]:
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    return " ".join(result.output.split()), manifest["requests"]["target"]["logprobs"]


def test_a_flipped_byte_and_changed_numbers_are_recomputed_counted_and_said(
    tmp_path, tiny_model_dir
):
    cache = tmp_path / "signals.sqlite"
    args = ["run", "--model", str(tiny_model_dir), "--data", "wikimia:32", "--n-per-label",
            "10", "--attacks", "loss", "--cache", str(cache), "--no-blind", "--n-bootstrap",
            "50"]  # fmt: skip
    _, first = _run(args, tmp_path / "a")
    rows = _rows(cache)
    assert len(rows) == first["executed"] == 20
    (key_a, blob_a), (key_b, blob_b) = rows[0], rows[1]
    flipped = bytearray(blob_a)
    flipped[-3] ^= 0x01  # one bit of a log-probability: still a well-formed row
    _set(cache, key_a, bytes(flipped))
    stats = decode_stats(blob_b)
    stats.logp[:] = 0.0  # every token certain: a perfect member, in a valid encoding
    _set(cache, key_b, encode_stats(stats))
    decode_stats(bytes(flipped))  # both still decode: only the checksum can tell
    said, again = _run(args, tmp_path / "b")
    assert (again["executed"], again["cache_hits"]) == (2, 18)  # was (0, 20): served
    assert again["damaged"] == 2
    assert "2 damaged entries (their checksum does not match" in said
    assert re.search(
        r"target logprobs 2 passes executed .*18 answered by the store \(2 damaged", said
    )
    loss = [pq.read_table(tmp_path / d / "scores.parquet").to_pydict()["loss"] for d in "ab"]
    np.testing.assert_allclose(loss[0], loss[1], rtol=0, atol=1e-6)  # recomputed, not served
    assert dict(_rows(cache)) == dict(rows)  # the rows are whole again


def test_a_row_copied_under_another_key_fails_its_checksum(tmp_path):
    path = tmp_path / "s.sqlite"
    store = RequestStore(path)
    one, two = SampleRequest("Once", 1, 2, seed=4), SampleRequest("Twice", 1, 2, seed=4)
    store.put_many("fp", [(one, [["upon"]]), (two, [["more"]])])
    with sqlite3.connect(path) as conn:  # data and checksum of one, under two's key
        data, checksum = conn.execute(
            "SELECT data, checksum FROM request_results WHERE key=?", (one.key(),)
        ).fetchone()
        conn.execute(
            "UPDATE request_results SET data=?, checksum=? WHERE key=?", (data, checksum, two.key())
        )
    conn.close()
    with pytest.warns(UserWarning, match="1 damaged entries"):
        assert store.get_many("fp", [one, two]) == {one.key(): [["upon"]]}
    assert store.damaged == {("fp", "sample"): {two.key()}}


def test_an_altered_http_answer_is_asked_again(tmp_path):
    store = RequestStore(tmp_path / "s.sqlite")
    store.put_response("req", ["yes"])
    store._conn.execute("UPDATE request_results SET data=? WHERE kind='response'", (b'["no"]',))
    store._conn.commit()
    with pytest.warns(UserWarning, match="1 damaged answers"):
        assert store.get_response("req") is None


def test_a_schema_2_store_is_read_once_unverified_then_protected(tmp_path):
    path = tmp_path / "old.sqlite"
    request = SampleRequest("Once", 1, 2, seed=4)
    with sqlite3.connect(path) as conn:  # as imprint wrote it before checksums
        conn.executescript(
            """
            CREATE TABLE request_results (backend TEXT NOT NULL, kind TEXT NOT NULL,
                key TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (backend, kind, key))
                WITHOUT ROWID;
            CREATE TABLE request_schema (version INTEGER NOT NULL);
            INSERT INTO request_schema VALUES (2);
            """
        )
        conn.execute(
            "INSERT INTO request_results VALUES ('fp', 'sample', ?, ?)",
            (request.key(), json.dumps([["upon"]]).encode()),
        )
    conn.close()
    store = RequestStore(path)
    with pytest.warns(UserWarning, match=r"1 stored answers written by an older imprint \(no"):
        assert store.get_many("fp", [request]) == {request.key(): [["upon"]]}
    store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT version FROM request_schema").fetchone()[0]
        checksum = conn.execute("SELECT checksum FROM request_results").fetchone()[0]
        conn.execute("UPDATE request_results SET data=?", (json.dumps([["down"]]).encode(),))
    conn.close()
    assert version == SCHEMA_VERSION == 3 and checksum is not None
    store = RequestStore(path)
    with pytest.warns(UserWarning, match="1 damaged entries"):  # now protected
        assert store.get_many("fp", [request]) == {}


def test_a_row_rewritten_as_text_is_read_as_its_bytes_not_a_crash(tmp_path):
    path = tmp_path / "s.sqlite"
    store = RequestStore(path)
    request = SampleRequest("Once", 1, 2, seed=4)
    store.put_many("fp", [(request, [["upon"]])])
    store._conn.execute("UPDATE request_results SET data = CAST(data AS TEXT)")
    store._conn.commit()  # the same bytes, typed TEXT: AttributeError in decode before
    assert store.get_many("fp", [request]) == {request.key(): [["upon"]]}
