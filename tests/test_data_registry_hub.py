"""Hub downloads of named benchmarks against a real local HTTP server that speaks the hub's file
protocol (``/datasets/<repo>/resolve/<rev>/<path>`` and the ``/api/datasets/<repo>/tree``
listing), through the real ``huggingface_hub.hf_hub_download``: the data file itself is read (no
loading script), then served from the hub cache offline; a local copy overrides the hub."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import imprint.data.benchmark_files as files_mod
from imprint.data import list_benchmarks, resolve_data
from imprint.errors import DataError

hub = pytest.importorskip("huggingface_hub", reason="the hub download path needs huggingface_hub")
import huggingface_hub.constants  # noqa: E402

MIMIR = "cache_100_200_1000_512"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _parquet_bytes(columns: dict[str, list]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


REPOS: dict[str, dict[str, bytes]] = {
    "swj0419/BookMIA": {
        "book_data.jsonl": "".join(
            json.dumps(r, ensure_ascii=False) + "\n"
            for r in [
                {
                    "book_id": 0,
                    "book": "A.txt",
                    "snippet_id": 0,
                    "snippet": "Old book.",
                    "label": 1,
                },
                {
                    "book_id": 1,
                    "book": "Б.txt",
                    "snippet_id": 0,
                    "snippet": "Новая книга.",
                    "label": 0,
                },
            ]
        ).encode(),
        "README.md": b"---\nlicense: mit\n---\n",
    },
    "iamgroot42/mimir": {  # one JSON string per line, escapes included
        f"{MIMIR}/train/hackernews_ngram_13_0.8.jsonl": b'"a member post"\n"\\u6771\\u4eac"\n',
        f"{MIMIR}/test/hackernews_ngram_13_0.8.jsonl": b'"a non-member post"\n',
        "mimir.py": b"# the loading script: never run\n",
    },
    "wjfu99/WikiMIA-24": {
        "data/WikiMIA_length64-00000-of-00001.parquet": _parquet_bytes(
            {"input": ["a 2016 event", "a 2024 event"], "label": [1, 0]}
        ),
        "data/WikiMIA_length32-00000-of-00001.parquet": b"not this one",
    },
}


class _Hub(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._file(body=False)

    def do_GET(self) -> None:
        path = unquote(urlparse(self.path).path)
        if path.startswith("/api/datasets/"):
            repo, _, _ = path.removeprefix("/api/datasets/").partition("/tree/")
            listing = [
                {"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                for p, b in REPOS.get(repo, {}).items()
            ]
            self._send(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
            return
        self._file(body=True)

    def _file(self, *, body: bool) -> None:
        path = unquote(urlparse(self.path).path)
        _Hub.requests.append(f"{self.command} {path}")
        rest = path.removeprefix("/datasets/")
        for repo, files in REPOS.items():
            prefix = f"{repo}/resolve/main/"
            if rest.startswith(prefix) and rest[len(prefix) :] in files:
                data = files[rest[len(prefix) :]]
                headers = {
                    "X-Repo-Commit": COMMIT,
                    "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                }
                self._send(200, data if body else b"", headers, length=len(data))
                return
        self._send(404, b"", {"X-Error-Code": "EntryNotFound"})

    def _send(self, code: int, data: bytes, headers: dict, length: int | None = None) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.end_headers()
        if data:
            self.wfile.write(data)


@pytest.fixture
def local_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The local hub as $HF_ENDPOINT, an empty hub cache and an empty data dir."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hub.requests = []
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    data = tmp_path / "data"
    monkeypatch.setattr(files_mod, "data_dirs", lambda: [data])
    yield data
    server.shutdown()
    server.server_close()


def test_download_then_hub_cache_offline(local_hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not {i.name for i in list_benchmarks("bookmia") if i.available}
    data = resolve_data("bookmia")
    assert [s.text for s in data.samples] == ["Old book.", "Новая книга."]
    assert data.labels == (1, 0) and "hub-cache" in data.source
    assert "GET /datasets/swj0419/BookMIA/resolve/main/book_data.jsonl" in _Hub.requests
    (info,) = list_benchmarks("bookmia")
    assert info.in_hub_cache and info.local_path is None
    # offline now: the cached file is read, no request reaches the hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = len(_Hub.requests)
    again = resolve_data("bookmia")
    assert again.fingerprint == data.fingerprint and len(_Hub.requests) == seen


def test_mimir_two_files_and_never_the_loading_script(local_hub: Path) -> None:
    data = resolve_data("mimir:hackernews/ngram_13_0.8")
    assert [s.text for s in data.samples] == ["a member post", "東京", "a non-member post"]
    assert data.labels == (1, 1, 0)
    assert not any("mimir.py" in r for r in _Hub.requests)


def test_pattern_file_found_through_the_listing(local_hub: Path, monkeypatch) -> None:
    data = resolve_data("wikimia24:64")
    assert [s.text for s in data.samples] == ["a 2016 event", "a 2024 event"]
    assert data.samples[0].id == "WikiMIA-24_length64:1"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the pattern also finds the cached copy
    assert resolve_data("wikimia24:64").fingerprint == data.fingerprint


def test_missing_hub_file_names_the_local_path(local_hub: Path) -> None:
    with pytest.raises(DataError) as exc:
        resolve_data("copyright_traps:10")
    msg = str(exc.value)
    assert "the hub download failed" in msg and "EntryNotFound" in msg
    path = local_hub / "copyright_traps" / "data" / "seq_len_100_n_rep_10-00000-of-00001.parquet"
    assert str(path) in msg
    assert "imperial-cpg/copyright-traps/resolve/main/data/seq_len_100_n_rep_10" in msg


def test_local_copy_overrides_the_hub(local_hub: Path) -> None:
    path = local_hub / "bookmia" / "book_data.jsonl"
    path.parent.mkdir(parents=True)
    rows = [{"snippet": "mine", "label": 1}, {"snippet": "also mine", "label": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = resolve_data("bookmia")
    assert [s.text for s in data.samples] == ["mine", "also mine"]
    assert Path(data.source) == path and _Hub.requests == []
