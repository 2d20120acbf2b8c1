"""Load labelled candidate texts from JSONL/JSON, CSV, Parquet files or the Hugging Face hub.

Every loader returns a :class:`LoadedData`. Bad rows raise a :class:`~imprint.errors.DataError`
that names the file, the line (or row) and the fix; with ``on_bad="drop"`` they are dropped and
counted by reason in ``LoadedData.dropped`` instead, so nothing shrinks silently.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from imprint.data.sample import MEMBER, NON_MEMBER, Sample, text_hash
from imprint.data.text_checks import is_blank, lone_surrogate_problem
from imprint.errors import DataError, MissingDependencyError

TEXT_FIELDS: tuple[str, ...] = ("text", "input", "content")
LABEL_FIELDS: tuple[str, ...] = ("label", "labels", "member")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")

OnBad = Literal["raise", "drop"]

_LABEL_WORDS = {
    "1": MEMBER,
    "member": MEMBER,
    "true": MEMBER,
    "0": NON_MEMBER,
    "nonmember": NON_MEMBER,
    "non-member": NON_MEMBER,
    "non_member": NON_MEMBER,
    "false": NON_MEMBER,
}
_LABEL_FIX = "use 1/0, true/false or 'member'/'nonmember'"

# Drop reasons (keys of LoadedData.dropped).
R_EMPTY = "empty text"
R_NO_TEXT = "missing text"
R_NOT_STR = "text is not a string"
R_NO_LABEL = "missing label"
R_BAD_LABEL = "non-binary label"
R_NO_ID = "missing id"
R_DUP_ID = "duplicate id"
R_UTF8 = "invalid UTF-8"
R_JSON = "invalid JSON"
R_NOT_OBJ = "not a JSON object"
R_SHAPE = "malformed row"
R_SURROGATE = "lone surrogate"


@dataclass(frozen=True)
class LoadedData:
    """Samples loaded from one source.

    ``fingerprint`` is the sha256 of the canonical sample list (see :func:`fingerprint_samples`),
    so the same samples give the same fingerprint whatever file format or mirror they came from.
    ``dropped`` maps a reason to the number of rows dropped for it (empty unless ``on_bad="drop"``);
    ``dropped_ids`` maps it to those rows' ids (the id field's value, else the id the row would
    have had, e.g. ``data.jsonl:7``), which a run's manifest keeps (``data.dropped_ids``).
    """

    samples: tuple[Sample, ...]
    source: str
    fingerprint: str
    dropped: dict[str, int] = field(default_factory=dict, hash=False)
    dropped_ids: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def labels(self) -> tuple[int, ...]:
        """Labels in sample order (1 = member, 0 = non-member)."""
        return tuple(s.label for s in self.samples)


def fingerprint_samples(samples: Iterable[Sample]) -> str:
    """sha256 over the ordered ``(id, text hash, label)`` triples; ``meta`` is not included."""
    h = hashlib.sha256()
    for s in samples:
        h.update(json.dumps([s.id, text_hash(s.text), s.label]).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


class _BadRow(Exception):
    """One unusable row: a drop reason plus the human explanation and fix."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class _Fields:
    text: str
    label: str
    id: str | None


def parse_label(value: Any) -> int:
    """Map a label spelling to 1 (member) or 0 (non-member); raise ``ValueError`` otherwise.

    Accepted: ints/floats 0 and 1, bools, and the strings "0"/"1", "true"/"false",
    "member"/"nonmember"/"non-member" (case and surrounding spaces ignored).
    """
    if isinstance(value, bool):
        return MEMBER if value else NON_MEMBER
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in _LABEL_WORDS:
        return _LABEL_WORDS[value.strip().lower()]
    raise ValueError(f"label {value!r} is not binary; {_LABEL_FIX}")


def _pick(
    where: str, role: str, name: str | None, candidates: Sequence[str], available: Sequence[str],
    fix: str,
) -> str:  # fmt: skip
    """The ``role`` column: ``name`` when given, else the first of ``candidates`` present; a
    DataError naming the fields present and ``fix`` when there is none."""
    if name is not None:
        picked = name if name in available else None
    else:
        picked = next((c for c in candidates if c in available), None)
    if picked is None:
        wanted = repr(name) if name else f"among {list(candidates)}"
        fields = sorted(str(a) for a in available)
        raise DataError(f"{where}: no {role} field {wanted}; fields present: {fields}. Fix: {fix}")
    return picked


def _resolve_fields(
    available: Sequence[str],
    where: str,
    *,
    text_field: str | None,
    label_field: str | None,
    id_field: str | None,
) -> _Fields:
    """Choose the text/label/id columns from the names present in the first record/header."""
    fields = sorted(str(a) for a in available)
    text = _pick(where, "text", text_field, TEXT_FIELDS, available,
                 "pass text_field=<name of the text field>.")  # fmt: skip
    label = _pick(where, "label", label_field, LABEL_FIELDS, available,
                  "pass label_field=<name>; labels are 1 = member, 0 = non-member.")  # fmt: skip
    if id_field is not None and id_field not in available:
        raise DataError(
            f"{where}: no id field {id_field!r}; fields present: {fields}. "
            "Fix: pass the right id_field, or leave it out to number rows."
        )
    return _Fields(text, label, id_field)


def _make_sample(record: Mapping[str, Any], fields: _Fields, default_id: str) -> Sample:
    present = sorted(str(k) for k in record)
    if problem := lone_surrogate_problem(record):  # JSON escapes can carry one; UTF-8 cannot
        raise _BadRow(R_SURROGATE, problem)
    if fields.text not in record or record[fields.text] is None:
        raise _BadRow(
            R_NO_TEXT,
            f"missing text field {fields.text!r} (fields present: {present}); "
            "add the text or remove the row",
        )
    text = record[fields.text]
    if not isinstance(text, str):
        raise _BadRow(R_NOT_STR, f"text {text!r} is a {type(text).__name__}, not a string")
    if is_blank(text):
        raise _BadRow(
            R_EMPTY,
            "text is empty, whitespace-only or only invisible characters (zero-width, "
            "format or control); remove the row or fill it in",
        )
    raw_label = record.get(fields.label)
    if raw_label is None or (isinstance(raw_label, str) and not raw_label.strip()):
        raise _BadRow(
            R_NO_LABEL,
            f"missing label {fields.label!r}; give every row a label ({_LABEL_FIX})",
        )
    try:
        label = parse_label(raw_label)
    except ValueError as exc:
        raise _BadRow(R_BAD_LABEL, str(exc)) from None
    sample_id = default_id
    if fields.id is not None:
        raw_id = record.get(fields.id)
        if raw_id is None or str(raw_id).strip() == "":
            raise _BadRow(R_NO_ID, f"missing id {fields.id!r}; give every row an id")
        sample_id = str(raw_id)
    skip = {fields.text, fields.label, fields.id}
    meta = {str(k): v for k, v in record.items() if k not in skip}
    return Sample(id=sample_id, text=text, label=label, meta=meta)


# A parsed row: (position, record or a parse-level problem).
_Row = tuple[int, Mapping[str, Any] | _BadRow]


def _collect(
    rows: Iterable[_Row],
    *,
    source: str,
    unit: str,
    id_prefix: str,
    columns: Sequence[str] | None,
    field_names: dict[str, str | None],
    on_bad: OnBad,
    require_both_classes: bool,
) -> LoadedData:
    """Turn parsed rows into a LoadedData, applying the on_bad policy and the class check."""
    if on_bad not in ("raise", "drop"):
        raise DataError(f"on_bad must be 'raise' or 'drop', not {on_bad!r}")
    fields = None
    if columns is not None:
        fields = _resolve_fields(columns, f"{source} (columns)", **field_names)
    samples: list[Sample] = []
    dropped: dict[str, int] = {}
    dropped_ids: dict[str, list[str]] = {}
    seen_ids: dict[str, int] = {}
    for pos, row in rows:
        where = f"{source}: {unit} {pos}"
        try:
            if isinstance(row, _BadRow):
                raise row
            if fields is None:
                fields = _resolve_fields(list(row), where, **field_names)
            sample = _make_sample(row, fields, f"{id_prefix}:{pos}")
            if sample.id in seen_ids:
                raise _BadRow(
                    R_DUP_ID,
                    f"id {sample.id!r} already used on {unit} {seen_ids[sample.id]}; "
                    "ids must be unique (fix the id column or drop id_field to number rows)",
                )
        except _BadRow as bad:
            if on_bad == "raise":
                raise DataError(
                    f"{where}: {bad.detail}. "
                    "(--on-bad drop, or on_bad='drop' in Python, drops and counts bad rows "
                    "instead.)"
                ) from None
            dropped[bad.reason] = dropped.get(bad.reason, 0) + 1
            row_id = _row_id(row, fields, f"{id_prefix}:{pos}")
            dropped_ids.setdefault(bad.reason, []).append(row_id)
            continue
        seen_ids[sample.id] = pos
        samples.append(sample)
    _check_classes(samples, source, dropped, require_both_classes)
    fingerprint = fingerprint_samples(samples)
    return LoadedData(tuple(samples), source, fingerprint, dropped, dropped_ids)


def _row_id(row: Mapping[str, Any] | _BadRow, fields: _Fields | None, default_id: str) -> str:
    """A dropped row's id for the manifest: its id field's value where it has one, else the
    id it would have had (its position)."""
    if isinstance(row, Mapping) and fields is not None and fields.id is not None:
        raw = row.get(fields.id)
        if raw is not None and str(raw).strip():
            return str(raw)
    return default_id


def _check_classes(
    samples: Sequence[Sample], source: str, dropped: dict[str, int], require_both: bool
) -> None:
    note = f" ({sum(dropped.values())} rows dropped: {dropped})" if dropped else ""
    if not samples:
        raise DataError(f"{source}: no usable samples{note}. Fix: check the file and field names.")
    if not require_both:
        return
    present = {s.label for s in samples}
    if present == {MEMBER}:
        raise DataError(
            f"{source}: every sample is a member (label 1); non-members (label 0) are missing"
            f"{note}. An MIA needs both classes: add non-members or check label_field."
        )
    if present == {NON_MEMBER}:
        raise DataError(
            f"{source}: every sample is a non-member (label 0); members (label 1) are missing"
            f"{note}. An MIA needs both classes: add members or check label_field."
        )


def _jsonl_rows(data: bytes) -> Iterator[_Row]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield (
                lineno,
                _BadRow(
                    R_UTF8,
                    f"invalid UTF-8 at byte {exc.start} of the line; re-encode the file as UTF-8",
                ),
            )
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield (
                lineno,
                _BadRow(
                    R_JSON,
                    f"invalid JSON ({exc.msg} at column {exc.colno}); one JSON object per line",
                ),
            )
            continue
        if not isinstance(record, dict):
            yield (
                lineno,
                _BadRow(
                    R_NOT_OBJ,
                    f"expected a JSON object, got {type(record).__name__}; one object per line",
                ),
            )
            continue
        yield lineno, record


def json_objects(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file, read as the
    loaders read one; a line that is not UTF-8, not JSON or not an object raises
    :class:`DataError` naming the file, the line and the fix."""
    for lineno, row in _jsonl_rows(path.read_bytes()):
        if isinstance(row, _BadRow):
            raise DataError(f"{path}: line {lineno}: {row.detail}")
        yield lineno, row


def _json_array_rows(data: bytes, path: Path) -> Iterator[_Row]:
    try:
        records = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        msg = f"{path}: line {line}: invalid UTF-8; re-encode the file as UTF-8"
        raise DataError(msg) from None
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}); fix the file or use JSON lines"
        ) from None
    for i, record in enumerate(records, start=1):
        if isinstance(record, dict):
            yield i, record
        else:
            yield i, _BadRow(R_NOT_OBJ, f"expected a JSON object, got {type(record).__name__}")


def _csv_rows(data: bytes) -> tuple[list[str], Iterator[_Row]]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # surrogateescape keeps bad bytes visible per row, so the error can name the row's line.
    text = data.decode("utf-8", errors="surrogateescape")
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, 2**31 - 1))  # long documents are normal
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, [])
        parsed = [(reader.line_num, values) for values in reader]
    finally:
        csv.field_size_limit(previous)  # the limit is process-wide: leave it as it was

    def rows() -> Iterator[_Row]:
        for line, values in parsed:
            if not any(v.strip() for v in values):
                continue
            if any(_has_surrogate(v) for v in values):
                yield line, _BadRow(R_UTF8, "invalid UTF-8 in this row; re-encode as UTF-8")
            elif len(values) != len(header):
                yield (
                    line,
                    _BadRow(
                        R_SHAPE,
                        f"row has {len(values)} fields but the header has {len(header)}; "
                        "quote fields that contain commas or newlines",
                    ),
                )
            else:
                yield line, dict(zip(header, values, strict=True))

    if any(_has_surrogate(h) for h in header):
        raise DataError("line 1: invalid UTF-8 in the CSV header; re-encode the file as UTF-8")
    return header, rows()


def _has_surrogate(value: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in value)


def _parquet_rows(path: Path) -> tuple[list[str], Iterator[_Row]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc}); check the file") from None
    rows = ((i, r) for i, r in enumerate(table.to_pylist(), start=1))
    return list(table.column_names), rows


def load_file(
    path: str | Path,
    *,
    text_field: str | None = None,
    label_field: str | None = None,
    id_field: str | None = None,
    on_bad: OnBad = "raise",
    require_both_classes: bool = True,
) -> LoadedData:
    """Load labelled samples from a ``.jsonl``/``.json``/``.ndjson``, ``.csv`` or ``.parquet`` file.

    The text field defaults to the first of ``("text", "input", "content")`` present and the label
    field to the first of ``("label", "labels", "member")``; ids default to ``"{stem}:{line}"``
    (``"{stem}:{row}"`` for Parquet) unless ``id_field`` names a column. All other fields go to
    ``Sample.meta``. A ``.json`` file holding one JSON array is read as a list of records.

    ``on_bad="raise"`` (default) raises :class:`DataError` at the first bad row, naming the file,
    the line and the fix; ``on_bad="drop"`` drops bad rows and counts them by reason in
    ``LoadedData.dropped``. File-level problems (missing file, unknown extension, no text or label
    field, a single class, no usable rows) always raise.
    """
    p = Path(path)
    suffix = _checked_suffix(p)
    columns, rows, unit = _file_rows(p, suffix)
    fields = {"text_field": text_field, "label_field": label_field, "id_field": id_field}
    try:
        return _collect(
            rows,
            source=str(p),
            unit=unit,
            id_prefix=p.stem,
            columns=columns,
            field_names=fields,
            on_bad=on_bad,
            require_both_classes=require_both_classes,
        )
    except csv.Error as exc:
        raise DataError(f"{p}: malformed CSV ({exc}); check quoting") from None


def _checked_suffix(p: Path) -> str:
    """The file's lower-case extension; an unknown one, or a path that is no file, is refused."""
    suffix = p.suffix.lower()
    known = JSONL_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES
    if suffix not in known:
        raise DataError(
            f"{p}: unknown file extension {suffix or '(none)'!r}; supported: {', '.join(known)}. "
            "Fix: convert the file or rename it with the right extension."
        )
    if not p.is_file():
        what = "does not exist" if not p.exists() else "is not a file"
        raise DataError(f"{p}: {what}. Fix: check the path (relative to {Path.cwd()}).")
    return suffix


def _file_rows(p: Path, suffix: str) -> tuple[list[str] | None, Iterator[_Row], str]:
    """The header (CSV, Parquet; None for JSON), the rows, and what messages call a row."""
    if suffix in PARQUET_SUFFIXES:
        columns, rows = _parquet_rows(p)
        return columns, rows, "row"
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise DataError(f"{p}: cannot read the file ({exc.strerror}); check permissions") from None
    if suffix in CSV_SUFFIXES:
        try:
            columns, rows = _csv_rows(data)
        except DataError as exc:
            raise DataError(f"{p}: {exc}") from None
        except csv.Error as exc:
            raise DataError(f"{p}: malformed CSV ({exc}); check quoting") from None
        return columns, rows, "line"
    if suffix == ".json" and data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        return None, _json_array_rows(data, p), "record"
    return None, _jsonl_rows(data), "line"


def load_hf_dataset(
    name: str,
    *,
    split: str = "train",
    config: str | None = None,
    text_field: str | None = None,
    label_field: str | None = None,
    id_field: str | None = None,
    id_prefix: str | None = None,
    on_bad: OnBad = "raise",
    require_both_classes: bool = True,
) -> LoadedData:
    """Load a split of a Hugging Face hub dataset (needs the ``hub`` extra: ``datasets``).

    Fields and the ``on_bad`` policy work as in :func:`load_file`; ids default to
    ``"{id_prefix}:{row}"`` with ``id_prefix`` defaulting to ``"{name}:{split}"``.
    Raises :class:`MissingDependencyError` without ``datasets`` and :class:`DataError` when the
    hub is unreachable or the dataset/split does not exist.
    """
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError("datasets", "hub") from None
    from imprint.data.hub_access import hub_reachable, hub_unreachable_reason

    source = f"hf:{name}" + (f"[{config}]" if config else "") + f":{split}"
    offline = not hub_reachable()  # then the cache only: no minute of retries before failing
    try:
        ds = _load_hub_dataset(datasets, name, config, split, offline=offline)
    except Exception as exc:  # the hub raises many kinds; all mean "not loadable here"
        if offline:
            raise DataError(
                f"{source}: not in the local datasets cache, and the hub is unreachable "
                f"({hub_unreachable_reason()}). "
                "Fix: pass a local .jsonl/.csv/.parquet file, or set IMPRINT_DATA_DIR to a "
                "folder holding the benchmark files."
            ) from exc
        raise DataError(
            f"{source}: could not load from the Hugging Face hub ({type(exc).__name__}: {exc}). "
            "The hub may be unreachable (offline) or the name/split/config may be wrong. "
            "Fix: pass a local .jsonl/.csv/.parquet file, or set IMPRINT_DATA_DIR to a folder "
            "holding the benchmark files."
        ) from exc
    rows = ((i, r) for i, r in enumerate(ds, start=1))
    return _collect(
        rows,
        source=source,
        unit="row",
        id_prefix=id_prefix or f"{name}:{split}",
        columns=list(ds.column_names),
        field_names={"text_field": text_field, "label_field": label_field, "id_field": id_field},
        on_bad=on_bad,
        require_both_classes=require_both_classes,
    )


def _load_hub_dataset(
    datasets: Any, name: str, config: str | None, split: str, *, offline: bool
) -> Any:
    """``datasets.load_dataset``; ``offline``: from the local cache only (datasets reads its
    offline switch at call time, so it is set for this call alone)."""
    if not offline:
        return datasets.load_dataset(name, config, split=split)
    before = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True
    try:
        return datasets.load_dataset(name, config, split=split)
    finally:
        datasets.config.HF_HUB_OFFLINE = before
