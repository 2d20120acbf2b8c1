"""Stream documents out of corpus files too large for memory: JSONL or plain text, gzip or zstd.

A file is read line by line and never held whole. JSON lines give one document each (the text
field); plain text gives one document per line, or per paragraph (lines up to a blank line)
with ``unit="paragraph"``. Lines that cannot be used (invalid UTF-8, invalid JSON, no text
field, ...) are skipped and counted by reason in :class:`CorpusFileStats`, never fatal.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from imprint.data.text_checks import is_blank
from imprint.errors import ConfigError, DataError, MissingDependencyError

__all__ = [
    "CorpusFileStats",
    "corpus_kind",
    "iter_batches",
    "iter_documents",
    "open_binary",
]

Unit = Literal["line", "paragraph"]
TEXT_FIELDS = ("text", "content", "input")
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
MAX_PARAGRAPH_BYTES = 1 << 20  # a paragraph longer than this is cut into pieces

R_UTF8 = "invalid UTF-8"
R_JSON = "invalid JSON"
R_NOT_OBJECT = "not a JSON object"
R_NO_TEXT = "no text field"
R_NOT_STR = "text is not a string"
R_EMPTY = "empty text"


@dataclass
class CorpusFileStats:
    """What reading one corpus file gave: documents kept and lines skipped, by reason."""

    path: str
    kind: str
    compression: str
    size_bytes: int
    lines: int = 0
    documents: int = 0
    text_bytes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def corpus_kind(path: str | Path) -> tuple[str, str]:
    """``(kind, compression)`` from the file name: kind ``jsonl`` or ``text``; compression
    ``gzip``, ``zstd`` or ``none`` (``corpus.jsonl.zst`` -> ``("jsonl", "zstd")``)."""
    name = Path(path).name.lower()
    compression = "none"
    for suffix, comp in ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")):
        if name.endswith(suffix):
            name, compression = name[: -len(suffix)], comp
            break
    kind = "jsonl" if name.endswith(JSON_SUFFIXES) else "text"
    return kind, compression


def open_binary(path: Path, raw: IO[bytes], compression: str) -> IO[bytes]:
    """A decompressing binary reader over the open raw file ``raw``."""
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if compression == "zstd":
        try:
            import zstandard
        except ImportError as err:
            raise MissingDependencyError("zstandard", "dev") from err
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[arg-type]
    return raw


def _json_text(line: str, text_field: str | None, stats: CorpusFileStats) -> str | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        stats.skip(R_JSON)
        return None
    if not isinstance(record, dict):
        stats.skip(R_NOT_OBJECT)
        return None
    fields = (text_field,) if text_field else TEXT_FIELDS
    key = next((f for f in fields if f in record), None)
    if key is None or record[key] is None:
        stats.skip(R_NO_TEXT)
        return None
    text = record[key]
    if not isinstance(text, str):
        stats.skip(R_NOT_STR)
        return None
    return text


def _lines(path: Path, stats: CorpusFileStats, progress: Callable[[int], None] | None):
    """Decoded lines (without the newline); invalid UTF-8 lines are counted and skipped."""
    with open(path, "rb") as raw:
        stream = open_binary(path, raw, stats.compression)
        last = 0
        try:
            for i, line in enumerate(stream):
                stats.lines += 1
                if i == 0 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                if progress is not None and not i % 4096:
                    pos = raw.tell()
                    progress(pos - last)
                    last = pos
                try:
                    yield line.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    stats.skip(R_UTF8)
        except (OSError, EOFError) as err:  # truncated or corrupt compressed stream
            raise DataError(
                f"{path}: could not read past line {stats.lines} ({err}); the file is "
                "truncated or not really compressed as its name says"
            ) from err
        finally:
            if stream is not raw:
                stream.close()
        if progress is not None:
            progress(stats.size_bytes - last)


def _paragraphs(lines: Iterable[str]) -> Iterator[str]:
    buf: list[str] = []
    size = 0
    for line in lines:
        if not line.strip():
            if buf:
                yield "\n".join(buf)
            buf, size = [], 0
            continue
        buf.append(line)
        size += len(line)
        if size >= MAX_PARAGRAPH_BYTES:
            yield "\n".join(buf)
            buf, size = [], 0
    if buf:
        yield "\n".join(buf)


def iter_documents(
    path: str | Path,
    stats: CorpusFileStats | None = None,
    *,
    text_field: str | None = None,
    unit: Unit = "line",
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """Yield the documents of one corpus file, streaming.

    ``text_field`` names the JSON field (default: the first of ``text``, ``content``,
    ``input`` present). ``stats`` (created if omitted) is updated as documents are read;
    ``progress(k)`` is called with the number of raw (compressed) bytes consumed since its
    previous call.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"corpus file {p} does not exist (or is not a file); check the path")
    if unit not in ("line", "paragraph"):
        raise ConfigError(f"unit must be 'line' or 'paragraph', not {unit!r}")
    kind, compression = corpus_kind(p)
    if stats is None:
        stats = CorpusFileStats(str(p), kind, compression, os.path.getsize(p))
    lines = _lines(p, stats, progress)
    if kind == "jsonl":
        docs: Iterable[str | None] = (
            _json_text(line, text_field, stats) for line in lines if line.strip()
        )
    else:
        docs = _paragraphs(lines) if unit == "paragraph" else (ln for ln in lines if ln.strip())
    for doc in docs:
        if doc is None:
            continue
        if is_blank(doc):  # zero-width characters only count as empty too
            stats.skip(R_EMPTY)
            continue
        stats.documents += 1
        stats.text_bytes += len(doc)
        yield doc


def new_stats(path: str | Path) -> CorpusFileStats:
    """Empty statistics for ``path`` (which must exist)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"corpus file {p} does not exist (or is not a file); check the path")
    kind, compression = corpus_kind(p)
    return CorpusFileStats(str(p), kind, compression, os.path.getsize(p))


def iter_batches(
    paths: Iterable[str | Path],
    stats: list[CorpusFileStats],
    *,
    batch_chars: int = 1_000_000,
    text_field: str | None = None,
    unit: Unit = "line",
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[str]]:
    """Documents of every file in ``paths``, in batches of about ``batch_chars`` characters.

    One :class:`CorpusFileStats` per file is appended to ``stats`` as the file is opened.
    """

    def documents() -> Iterator[str]:
        for path in paths:
            file_stats = new_stats(path)
            stats.append(file_stats)
            yield from iter_documents(
                path, file_stats, text_field=text_field, unit=unit, progress=progress
            )

    return batched_by_chars(documents(), batch_chars)


def batched_by_chars(docs: Iterable[str], batch_chars: int) -> Iterator[list[str]]:
    """``docs`` in lists of about ``batch_chars`` characters: a list ends with the document
    that brings it to ``batch_chars`` or more; the last one may be shorter."""
    batch: list[str] = []
    size = 0
    for doc in docs:
        batch.append(doc)
        size += len(doc)
        if size >= batch_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
