"""Turn a located benchmark's files into :class:`LoadedData`, with each set's fields mapped.

``records`` tables go through :func:`imprint.data.loaders.load_file` with the entry's text and
label columns; MIMIR's member/non-member files hold one JSON string per line; the Gutenberg set is
a folder of ``.txt`` files per label. Bad rows follow the loaders' policy: ``on_bad="raise"``
names the file and line, ``on_bad="drop"`` drops and counts them by reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from imprint.data.benchmark_files import Located
from imprint.data.catalog import BenchmarkEntry, Role
from imprint.data.loaders import (
    R_EMPTY,
    R_JSON,
    R_NO_TEXT,
    R_NOT_STR,
    R_SURROGATE,
    R_UTF8,
    LoadedData,
    OnBad,
    fingerprint_samples,
    load_file,
)
from imprint.data.sample import MEMBER, NON_MEMBER, Sample
from imprint.data.text_checks import find_lone_surrogate, is_blank
from imprint.errors import DataError


def read_benchmark(
    entry: BenchmarkEntry,
    located: Located,
    *,
    text_field: str | None = None,
    label_field: str | None = None,
    id_field: str | None = None,
    on_bad: OnBad = "raise",
    require_both_classes: bool = True,
) -> LoadedData:
    """Samples of ``entry`` from the files in ``located``; explicit fields override the entry's."""
    if entry.reader == "records":
        return _records(
            entry,
            located.paths["all"],
            text_field=text_field or entry.text_field,
            label_field=label_field or entry.label_field,
            id_field=id_field,
            on_bad=on_bad,
            require_both_classes=require_both_classes,
        )
    if text_field or label_field or id_field:
        raise DataError(
            f"benchmark {entry.name!r} has fixed member/non-member files; text_field, "
            "label_field and id_field do not apply (drop --text-field/--label-field)"
        )
    read = _json_lines if entry.reader == "member_nonmember" else _text_files
    samples: list[Sample] = []
    dropped: dict[str, int] = {}
    for role, label in _ROLES:
        path = located.paths[role]
        for pos, text in _checked(read(path), path, on_bad, dropped):
            samples.append(
                Sample(f"{entry.id_prefix or entry.name}:{role}:{pos}", text, label, {"role": role})
            )
    source = ", ".join(str(located.paths[role]) for role, _ in _ROLES)
    _require(samples, entry, source, dropped, require_both_classes)
    return LoadedData(tuple(samples), source, fingerprint_samples(samples), dropped)


def _records(entry: BenchmarkEntry, path: Path, *, id_field: str | None, **kw: Any) -> LoadedData:
    loaded = load_file(path, id_field=id_field, **kw)
    prefix = f"{path.stem}:"
    if id_field is not None or not entry.id_prefix or entry.id_prefix == path.stem:
        return loaded
    # the same rows get the same ids whichever copy (local JSONL, hub Parquet) was read
    samples = tuple(
        replace(s, id=f"{entry.id_prefix}:{s.id[len(prefix) :]}") if s.id.startswith(prefix) else s
        for s in loaded.samples
    )
    return replace(loaded, samples=samples, fingerprint=fingerprint_samples(samples))


# A row: (position, text) or (position, (drop reason, explanation)).
_Row = tuple[str, str | tuple[str, str]]
_ROLES: tuple[tuple[Role, int], ...] = (("member", MEMBER), ("nonmember", NON_MEMBER))


def _json_lines(path: Path) -> Iterator[_Row]:
    """MIMIR's layout: one JSON value per line, a string (or an object with ``text``)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror}); check it") from None
    for lineno, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"line {lineno}"
        try:
            value = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            yield where, (R_UTF8, f"invalid UTF-8 at byte {exc.start}; re-encode as UTF-8")
            continue
        except json.JSONDecodeError as exc:
            yield where, (R_JSON, f"invalid JSON ({exc.msg}); one JSON string per line")
            continue
        if isinstance(value, dict):
            if "text" not in value:
                fields = sorted(value)
                yield where, (R_NO_TEXT, f"an object without 'text' (fields: {fields})")
                continue
            value = value["text"]
        if not isinstance(value, str):
            yield where, (R_NOT_STR, f"expected a JSON string, got {type(value).__name__}")
            continue
        yield where, value


def _text_files(folder: Path) -> Iterator[_Row]:
    """The Gutenberg layout: one UTF-8 text per ``<i>.txt``, in natural order of the names."""
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; it should hold one .txt file per text")
    files = sorted(folder.glob("*.txt"), key=lambda p: _natural(p.name))
    if not files:
        raise DataError(f"{folder}: no .txt files; copy the set's .txt files into it")
    for file in files:
        try:
            yield file.stem, file.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        except UnicodeDecodeError as exc:
            yield file.stem, (R_UTF8, f"invalid UTF-8 at byte {exc.start}; re-encode as UTF-8")


def _checked(
    rows: Iterator[_Row], path: Path, on_bad: OnBad, dropped: dict[str, int]
) -> Iterator[tuple[str, str]]:
    """Good (position, text) rows; bad ones raise or are counted, as ``on_bad`` says."""
    if on_bad not in ("raise", "drop"):
        raise DataError(f"on_bad must be 'raise' or 'drop', not {on_bad!r}")
    for pos, row in rows:
        if isinstance(row, str):
            if is_blank(row):
                row = (R_EMPTY, "empty, whitespace-only or only invisible characters; remove it")
            elif found := find_lone_surrogate(row):
                row = (R_SURROGATE, f"a lone UTF-16 surrogate at character {found[1]}; fix it")
        if isinstance(row, str):
            yield pos.removeprefix("line "), row
            continue
        reason, detail = row
        if on_bad == "raise":
            raise DataError(
                f"{path}: {pos}: {detail}. (--on-bad drop, or on_bad='drop' in Python, drops "
                "and counts bad rows.)"
            )
        dropped[reason] = dropped.get(reason, 0) + 1


def _require(
    samples: list[Sample], entry: BenchmarkEntry, source: str, dropped: dict[str, int], both: bool
) -> None:
    labels = {s.label for s in samples}
    note = f" ({sum(dropped.values())} rows dropped: {dropped})" if dropped else ""
    if not samples:
        raise DataError(f"{entry.name}: no usable texts in {source}{note}; check the files")
    for label, word in ((MEMBER, "member"), (NON_MEMBER, "non-member")):
        if both and label not in labels:
            raise DataError(
                f"{entry.name}: no {word} texts in {source}{note}; an MIA needs both classes "
                "(check that both files are the benchmark's)"
            )


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
