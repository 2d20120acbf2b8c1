"""Dated documents from dumps: JSONL with a date field, or a MediaWiki XML export.

Both readers stream (a dump of any size never sits in memory), read ``.gz`` and ``.bz2`` as
they are, and report bytes read to a progress callback. A document that cannot be used is either
refused with a :class:`DataError` naming the line, the value and the fix (``on_bad="error"``) or
counted by reason in the ``dropped`` counter the caller passes (``on_bad="skip"``). Empty texts
are always dropped and counted.

Dates are ISO 8601 days or times (``2023-02-18``, ``2023-02-18T12:00:00Z``, ``+02:00``
offsets, ``20230218``); a time without an offset is taken as UTC, and every date is compared in
UTC. Partial dates (``2023-02``, ``2023``) and numbers (Unix times: seconds or milliseconds?)
are refused rather than guessed, because a guess moves documents across the cutoff.

A MediaWiki page is dated by its **earliest revision** in the export, i.e. its creation date
when the export holds the full history: WikiMIA (Shi et al. 2024) split members from
non-members by the date an article was *created*, since an article created after a model's
cutoff cannot be in its training data, while an old article edited yesterday mostly can. Its
text is the latest revision's (as WikiMIA, which took articles as they were) or the first one's
(``revision="first"``: exactly what existed at that date), as plain text (mwparserfromhell)
with references, tables, headings, files and categories removed.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, cast
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

from imprint.data.text_checks import is_blank, lone_surrogate_problem
from imprint.errors import ConfigError, DataError, MissingDependencyError

__all__ = [
    "DatedDoc",
    "DumpFormat",
    "check_dump",
    "dump_format",
    "parse_date",
    "read_dump",
    "read_jsonl_dump",
    "read_mediawiki_dump",
    "wikitext_to_plain",
]

DumpFormat = Literal["jsonl", "mediawiki"]
OnBad = Literal["error", "skip"]
Revision = Literal["latest", "first"]
Advance = Callable[[int], None]

R_EMPTY = "empty text"
R_BAD_DATE = "unparsable date"
R_UNDATED_REVISION = "revision without a readable timestamp (ignored; its page kept)"
R_UNDATED_PAGE = "page without a dated revision"
R_BAD_ROW = "malformed row"
R_REDIRECT = "redirect page"
R_NOT_ARTICLE = "not an article (namespace other than 0)"
_CHUNK = 1 << 20  # bytes fed to the XML parser at most at once (a one-line dump stays bounded)
_DATE_FIX = "use ISO 8601, e.g. 2023-02-18 or 2023-02-18T12:00:00Z"
_JSON_KIND: dict[type, str] = {list: "list", dict: "JSON object"}


@dataclass(frozen=True)
class DatedDoc:
    """One dated document: ``date`` is timezone-aware (UTC); ``source`` says where it was read
    (``file:line`` or the page title); ``revisions`` counts a page's revisions (1 for JSONL)."""

    id: str
    text: str
    date: datetime
    source: str
    revisions: int = 1


def parse_date(value: Any, *, where: str) -> datetime:
    """``value`` as a UTC datetime; a teaching :class:`DataError` naming ``where`` if it is not
    an ISO 8601 day or time (a time without offset is UTC)."""
    if value is None:  # JSON null: the document has no date, whatever the format would be
        raise DataError(
            f"{where}: the date is null, so the document has no date and cannot be placed "
            f"before or after a cutoff; give it one ({_DATE_FIX}) or leave the row out"
        )
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = (
            "true or false"
            if isinstance(value, bool)
            else f"a {_JSON_KIND.get(type(value), type(value).__name__)}"
        )
        raise DataError(
            f"{where}: the date {value!r} is {kind}, not an ISO 8601 text ({_DATE_FIX})"
        )
    if not isinstance(value, str):
        raise DataError(
            f"{where}: the date {value!r} is a number, not an ISO 8601 text ({_DATE_FIX}); a "
            "number is refused because its unit (seconds or milliseconds) would be a guess"
        )
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise DataError(
            f"{where}: cannot read the date {value!r} ({exc}); {_DATE_FIX}. A partial date "
            "(year or month only) is refused: which day it means decides its side of a cutoff"
        ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 with an offset leaves datetime's range in UTC
        raise DataError(
            f"{where}: the date {value!r} falls outside years 1-9999 once moved to UTC; "
            "check the value (or give it without an offset)"
        ) from None


def dump_format(path: Path, given: str = "auto") -> DumpFormat:
    """The dump's format: ``given`` unless ``auto``, else from the suffix (``.xml`` ->
    mediawiki, ``.jsonl``/``.json``/``.ndjson`` -> jsonl; ``.gz``/``.bz2`` looked through)."""
    if given in ("jsonl", "mediawiki"):
        return given  # type: ignore[return-value]
    if given != "auto":
        raise ConfigError(f"unknown dump format {given!r}; use auto, jsonl or mediawiki")
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".bz2")]
    last = suffixes[-1] if suffixes else ""
    if last == ".xml":
        return "mediawiki"
    if last in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise ConfigError(
        f"cannot tell the format of {path} from its suffix {''.join(path.suffixes)!r}; pass "
        "--format jsonl (one JSON object per line with a date) or --format mediawiki (XML export)"
    )


def check_dump(path: Path, format: str = "auto") -> DumpFormat:
    """The dump's format, after checking it is a readable file (before any work starts)."""
    if not path.is_file():
        raise DataError(f"dump {path} does not exist or is not a file; check --dump")
    return dump_format(path, format)


class _Tracked:
    """The dump's decompressed byte stream, reporting the *file* bytes consumed to ``advance``
    (compressed bytes for .gz/.bz2, so a progress bar over the file size ends at 100 %)."""

    def __init__(self, path: Path, advance: Advance | None) -> None:
        if not path.is_file():
            raise DataError(f"dump {path} does not exist or is not a file; check --dump")
        self.raw = path.open("rb")
        suffix = path.suffix.lower()
        self.stream: IO[bytes] | gzip.GzipFile | bz2.BZ2File = self.raw
        if suffix == ".gz":
            self.stream = gzip.GzipFile(fileobj=self.raw)
        elif suffix == ".bz2":
            self.stream = bz2.BZ2File(self.raw)
        self.advance, self.done, self.path = advance, 0, path

    def readline(self) -> bytes:
        try:
            line = self.stream.readline(_CHUNK)
        except (EOFError, OSError, zlib.error) as exc:  # truncated or not really .gz/.bz2
            raise DataError(
                f"dump {self.path}: cannot decompress it ({type(exc).__name__}: {exc}); the "
                "file is truncated or not in the format its suffix says: download it again, "
                "or check it with gzip -t / bzip2 -t"
            ) from None
        if self.advance is not None:
            now = self.raw.tell()
            self.advance(now - self.done)
            self.done = now
        return line

    def readlines_whole(self) -> Iterator[bytes]:
        """Whole lines, however long (a JSONL document is read in full, one at a time)."""
        while chunk := self.readline():
            parts = [chunk]
            while not parts[-1].endswith(b"\n") and (more := self.readline()):
                parts.append(more)
            yield b"".join(parts)

    def close(self) -> None:
        self.stream.close()
        self.raw.close()


def _bad(message: str, reason: str, on_bad: OnBad, dropped: Counter[str]) -> None:
    if on_bad == "error":
        raise DataError(message + "; or pass --on-bad skip to drop such rows and count them")
    dropped[reason] += 1


def read_jsonl_dump(
    path: Path,
    *,
    date_field: str = "date",
    text_field: str = "text",
    id_field: str | None = None,
    on_bad: OnBad = "error",
    dropped: Counter[str],
    advance: Advance | None = None,
) -> Iterator[DatedDoc]:
    """Documents of a JSONL dump, one JSON object per line (blank lines skipped)."""
    stream = _Tracked(path, advance)
    try:
        for lineno, line in enumerate(stream.readlines_whole(), start=1):
            where = f"{path} line {lineno}"
            record = _json_record(line, where, on_bad, dropped)
            if record is None:
                continue
            doc = _jsonl_doc(record, where, date_field, text_field, id_field, on_bad, dropped)
            if doc is not None:
                yield doc
    finally:
        stream.close()


def _json_record(line: bytes, where: str, on_bad: OnBad, dropped: Counter[str]) -> dict | None:
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        _bad(
            f"{where}: invalid UTF-8 at byte {exc.start}; re-encode as UTF-8",
            R_BAD_ROW,
            on_bad,
            dropped,
        )
        return None
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        _bad(
            f"{where}: invalid JSON ({exc.msg}); one JSON object per line",
            R_BAD_ROW,
            on_bad,
            dropped,
        )
        return None
    if not isinstance(record, dict):
        _bad(
            f"{where}: expected a JSON object, got {type(record).__name__}",
            R_BAD_ROW,
            on_bad,
            dropped,
        )
        return None
    return record


def _jsonl_doc(
    record: dict,
    where: str,
    date_field: str,
    text_field: str,
    id_field: str | None,
    on_bad: OnBad,
    dropped: Counter[str],
) -> DatedDoc | None:
    for field in (date_field, text_field, *([id_field] if id_field else [])):
        if field not in record:
            fields = ", ".join(sorted(record)) or "none"
            fix = "name the right one with --date-field / --text-field / --id-field"
            message = f"{where} has no field {field!r} (its fields: {fields}); {fix}"
            _bad(message, R_BAD_ROW, on_bad, dropped)
            return None
    text = record[text_field]
    problem = lone_surrogate_problem(record) if isinstance(text, str) else "text is not a string"
    if problem:
        _bad(f"{where}: {problem}", R_BAD_ROW, on_bad, dropped)
        return None
    try:
        date = parse_date(record[date_field], where=f"{where}, field {date_field!r}")
    except DataError as err:
        _bad(str(err), R_BAD_DATE, on_bad, dropped)
        return None
    if is_blank(text):
        dropped[R_EMPTY] += 1
        return None
    doc_id = str(record[id_field]) if id_field else where.rsplit(" ", 1)[-1]
    return DatedDoc(id=doc_id, text=text, date=date, source=where)


# -- MediaWiki XML --------------------------------------------------------------------------------


def wikitext_to_plain(wikitext: str, *, hidden_namespaces: frozenset[str] = frozenset()) -> str:
    """Plain prose of a page's wikitext: templates, references, tables, headings, comments and
    links to files or categories (``hidden_namespaces``, lower case, plus File/Image/Category)
    removed, other links replaced by their label, whitespace collapsed to single spaces."""
    try:
        import mwparserfromhell
    except ImportError as exc:
        raise MissingDependencyError("mwparserfromhell", "wiki") from exc
    hidden = hidden_namespaces | {"file", "image", "category"}
    code = mwparserfromhell.parse(wikitext)
    for tag in code.filter_tags():
        if str(tag.tag).strip().lower() in ("ref", "table", "references", "gallery"):
            _remove(code, tag)
    for heading in code.filter_headings():
        _remove(code, heading)
    for link in code.filter_wikilinks():
        prefix, sep, _ = str(link.title).strip().lstrip(":").partition(":")
        if sep and prefix.strip().lower() in hidden:
            _remove(code, link)
    return " ".join(code.strip_code(normalize=True, collapse=True).split())


def _remove(code: Any, node: Any) -> None:
    with contextlib.suppress(ValueError):  # gone already with an enclosing node
        code.remove(node)


@dataclass
class _Page:
    """The page being read: its fields and its earliest/latest revision so far."""

    title: str = ""
    ns: str = "0"
    page_id: str = ""
    redirect: bool = False
    revisions: int = 0
    first: tuple[datetime, str] | None = None
    latest: tuple[datetime, str] | None = None
    stamp: datetime | None = None  # the current revision's timestamp


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # exports carry a versioned xmlns; match names only


def read_mediawiki_dump(
    path: Path,
    *,
    revision: Revision = "latest",
    markup: Literal["strip", "keep"] = "strip",
    on_bad: OnBad = "error",
    dropped: Counter[str],
    advance: Advance | None = None,
) -> Iterator[DatedDoc]:
    """Article pages (namespace 0, redirects dropped and counted) of a MediaWiki XML export,
    dated by their earliest revision; see the module docstring."""
    stream = _Tracked(path, advance)
    parser: XMLPullParser[Element] = XMLPullParser(events=("start", "end"))
    state: dict[str, Any] = {"page": _Page(), "hidden": set(), "root": None, "stack": []}
    try:
        lineno = 0
        while chunk := stream.readline():
            where = f"{path} line {lineno + 1}"  # the line this chunk is (part of)
            lineno += chunk.endswith(b"\n")
            try:
                parser.feed(chunk)
                events = cast(list[tuple[str, Element]], list(parser.read_events()))
            except ParseError as exc:
                raise DataError(f"{where}: not well-formed XML ({exc})") from None
            for event, elem in events:
                page = _on_event(event, elem, state, where, on_bad, dropped)
                done = page and _finish(page, revision, markup, frozenset(state["hidden"]), dropped)
                if done:
                    yield done
        _close(parser, path)
    finally:
        stream.close()


def _close(parser: XMLPullParser[Element], path: Path) -> None:
    try:
        parser.close()
    except ParseError as exc:
        raise DataError(f"{path}: the XML ends early or is malformed ({exc})") from None


def _on_event(
    event: str,
    elem: Element,
    state: dict[str, Any],
    where: str,
    on_bad: OnBad,
    dropped: Counter[str],
) -> _Page | None:
    """Update the page being read; return it when it ends."""
    name, stack = _local(elem.tag), state["stack"]
    if event == "start":
        if not stack:
            state["root"] = elem
        elif name == "page":
            state["page"] = _Page()
        stack.append(name)
        return None
    stack.pop()
    parent, page = (stack[-1] if stack else ""), state["page"]
    if name == "namespace" and elem.get("key") in ("6", "14") and elem.text:
        state["hidden"].add(elem.text.strip().lower())  # this wiki's File: and Category: names
    elif parent == "page" and name in ("title", "ns", "id") and elem.text is not None:
        setattr(page, {"title": "title", "ns": "ns", "id": "page_id"}[name], elem.text.strip())
    elif parent == "page" and name == "redirect":
        page.redirect = True
    elif parent == "revision" and name == "timestamp":
        page.stamp = _stamp(elem.text, where, page, on_bad)
    elif parent == "page" and name == "revision":
        _add_revision(page, elem, dropped)
        elem.clear()  # a page's history never piles up
    elif name == "page":
        state["root"].clear()
        return page
    return None


def _stamp(text: str | None, where: str, page: _Page, on_bad: OnBad) -> datetime | None:
    """The revision's timestamp; None (its revision then counted as undated) when it is
    unreadable and ``on_bad`` is skip."""
    try:
        return parse_date(text if text is not None else "", where=f"{where}, page {page.title!r}")
    except DataError as err:
        if on_bad == "error":
            raise DataError(f"{err}; or pass --on-bad skip to ignore such revisions") from None
        return None


def _add_revision(page: _Page, elem: Element, dropped: Counter[str]) -> None:
    stamp, page.stamp = page.stamp, None
    if stamp is None:  # missing, or unparsable and skipped: this revision cannot date the page
        dropped[R_UNDATED_REVISION] += 1
        return
    text = next((c.text or "" for c in elem if _local(c.tag) == "text"), "")
    page.revisions += 1
    if page.first is None or stamp < page.first[0]:
        page.first = (stamp, text)
    if page.latest is None or stamp >= page.latest[0]:
        page.latest = (stamp, text)


def _finish(
    page: _Page, revision: Revision, markup: str, hidden: frozenset[str], dropped: Counter[str]
) -> DatedDoc | None:
    reason = (
        R_NOT_ARTICLE
        if page.ns != "0"
        else R_REDIRECT
        if page.redirect
        else R_UNDATED_PAGE
        if page.first is None or page.latest is None
        else None
    )
    if reason is not None or page.first is None or page.latest is None:
        dropped[reason or R_UNDATED_PAGE] += 1
        return None
    raw = (page.latest if revision == "latest" else page.first)[1]
    if raw.lstrip().lower().startswith("#redirect"):
        dropped[R_REDIRECT] += 1
        return None
    text = wikitext_to_plain(raw, hidden_namespaces=hidden) if markup == "strip" else raw
    if is_blank(text):
        dropped[R_EMPTY] += 1
        return None
    doc_id = page.page_id or page.title
    return DatedDoc(doc_id, text, page.first[0], f"page {page.title!r}", page.revisions)


def read_dump(
    path: Path,
    *,
    format: str = "auto",
    date_field: str = "date",
    text_field: str = "text",
    id_field: str | None = None,
    revision: Revision = "latest",
    markup: Literal["strip", "keep"] = "strip",
    on_bad: OnBad = "error",
    dropped: Counter[str],
    advance: Advance | None = None,
) -> Iterator[DatedDoc]:
    """Documents of ``path`` in its format (:func:`dump_format`); drops counted in ``dropped``."""
    if on_bad not in ("error", "skip"):
        raise ConfigError(f"on_bad must be 'error' or 'skip', got {on_bad!r}")
    if dump_format(path, format) == "mediawiki":
        return read_mediawiki_dump(
            path, revision=revision, markup=markup, on_bad=on_bad, dropped=dropped, advance=advance
        )
    return read_jsonl_dump(
        path,
        date_field=date_field,
        text_field=text_field,
        id_field=id_field,
        on_bad=on_bad,
        dropped=dropped,
        advance=advance,
    )
