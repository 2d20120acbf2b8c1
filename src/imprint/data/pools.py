"""Shot pools: texts the user declares to be members (``members``) or non-members (``nonmembers``).

A pool is not an evaluation set: it may hold one class only, and it may be unlabelled (a ``.txt``
file with one text per line, or JSONL/CSV/Parquet rows without a label field), in which case its
name gives the class. A labelled pool must agree with its name: a member in the ``nonmembers``
pool (or a text derived from one, e.g. a perturbed member) would put member text into a
"non-member" prefix, so it is refused with the ids to fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from imprint.data import loaders
from imprint.data.benchmarks import resolve_data
from imprint.data.loaders import LABEL_FIELDS, LoadedData
from imprint.data.sample import MEMBER, NON_MEMBER, Sample
from imprint.data.text_checks import is_blank
from imprint.errors import ConfigError, DataError

__all__ = [
    "POOL_LABELS",
    "check_pool",
    "derived_from_member",
    "is_natural",
    "load_shot_pool",
    "load_unlabelled",
]

NONMEMBER_POOL = "nonmembers"
MEMBER_POOL = "members"
#: pool name -> the class every text in it must belong to
POOL_LABELS: dict[str, int] = {NONMEMBER_POOL: NON_MEMBER, MEMBER_POOL: MEMBER}
_CLASS = {NON_MEMBER: "non-member", MEMBER: "member"}
_POOL_LABEL_FIELD = "label"
# a field whose name holds one of these may carry membership labels
_LABEL_WORDS = ("member", "label")
# fields imprint itself writes into rows (``imprint perturb``): never a row's own label
_IMPRINT_FIELDS = ("source_label",)
# the label column load_unlabelled gives every row (a row's own label fields stay in its meta)
_IGNORED_LABEL = "_imprint_unlabelled"


def is_natural(sample: Sample) -> bool:
    """False for a row made from another text: ``imprint perturb`` marks them with a
    ``perturbation`` other than ``"none"`` and the ``source_id`` of the text they were made from
    (the row's own id, or its ``id`` field when the loader numbered the rows, for a natural row)."""
    if "perturbation" in sample.meta:
        return sample.meta["perturbation"] in (None, "", "none")
    source = sample.meta.get("source_id")
    return source is None or str(source) in (sample.id, str(sample.meta.get("id")))


def source_of(sample: Sample) -> str:
    """The id of the natural text a row was made from (its own id for a natural row)."""
    source = sample.meta.get("source_id")
    return sample.id if source is None else str(source)


def derived_from_member(sample: Sample) -> bool:
    """A row made from a member (``source_label`` 1), e.g. an edited or paraphrased member."""
    try:
        return loaders.parse_label(sample.meta.get("source_label")) == MEMBER
    except ValueError:
        return False


def _ids(samples: Sequence[Sample]) -> str:
    """The samples' ids, with the row's own ``id`` field when the loader numbered the rows."""
    own = [s.meta.get("id") for s in samples[:10]]
    shown = ", ".join(
        f"{s.id} (id {i})" if i not in (None, "") and str(i) != s.id else s.id
        for s, i in zip(samples[:10], own, strict=True)
    )
    return shown + (f" (and {len(samples) - 10} more)" if len(samples) > 10 else "")


def check_pool(name: str, pool: Sequence[Sample], *, source: str = "") -> None:
    """Refuse a pool that holds texts of the other class than its name declares.

    The ``nonmembers`` pool must hold no member (label 1) and no text derived from a member; the
    ``members`` pool no non-member (label 0). Raises :class:`DataError` listing the ids.
    """
    if name not in POOL_LABELS:
        return
    want = POOL_LABELS[name]
    wrong = [s for s in pool if s.label != want]
    if want == NON_MEMBER:
        wrong += [s for s in pool if s.label == NON_MEMBER and derived_from_member(s)]
    if wrong:
        where = f" ({source})" if source else ""
        other = _CLASS[1 - want]
        made = " or made from a member" if want == NON_MEMBER else ""
        raise DataError(
            f"the {name!r} pool{where} holds {len(wrong)} text(s) labelled {other}{made}: ids "
            f"{_ids(wrong)} (file:line, with the row's own id where it has one). Its shots are "
            f"used as {_CLASS[want]} text; remove these rows from the pool, or drop the label "
            f"field to declare every text a {_CLASS[want]}."
        )


def _check_name(name: str) -> int:
    if name in POOL_LABELS:
        return POOL_LABELS[name]
    close = difflib.get_close_matches(name, list(POOL_LABELS), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"unknown pool name {name!r}; pools are {sorted(POOL_LABELS)} "
        f"(--pool nonmembers=FILE for ReCaLL shots, --pool members=FILE for CON-ReCall).{hint}"
    )


def _text_lines(path: Path, label: int) -> LoadedData:
    """One text per non-empty line of a ``.txt`` file; ids ``{stem}:{line}``."""
    if not path.is_file():
        raise DataError(f"pool file {path} does not exist; check the path")
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: invalid UTF-8 ({err.reason}); re-encode the file") from None
    samples = tuple(
        Sample(f"{path.stem}:{i}", line.strip(), label)
        for i, line in enumerate(lines, 1)
        if not is_blank(line)  # an empty line, or one of zero-width characters only
    )
    if not samples:
        raise DataError(f"pool file {path} has no non-empty lines; one text per line")
    return LoadedData(samples, str(path), loaders.fingerprint_samples(samples))


def _file_rows(path: Path) -> tuple[list[str] | None, Iterator[Any], str]:
    """Columns (if the format has a header), parsed rows and the row unit of a data file."""
    suffix = path.suffix.lower()
    if suffix in loaders.PARQUET_SUFFIXES:
        columns, rows = loaders._parquet_rows(path)
        return columns, rows, "row"
    data = path.read_bytes()
    if suffix in loaders.CSV_SUFFIXES:
        columns, rows = loaders._csv_rows(data)
        return columns, rows, "line"
    if suffix == ".json" and data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        return None, loaders._json_array_rows(data, path), "record"
    return None, loaders._jsonl_rows(data), "line"


def _row_names(records: Sequence[tuple[int, Mapping[str, Any]]], pos: Sequence[int]) -> str:
    """``line 3 (id P2)``-style names of the rows at ``pos``: ids when the rows carry one."""
    by_pos = dict(records)
    names = []
    for p in pos[:10]:
        row_id = by_pos[p].get("id")
        names.append(f"{p} (id {row_id})" if row_id not in (None, "") else str(p))
    return ", ".join(names) + (f" (and {len(pos) - 10} more)" if len(pos) > 10 else "")


def _label_field(names: set[str], wanted: str | None) -> str | None:
    """The pool's label field: the run's ``--label-field`` when given, else a standard name."""
    if wanted is not None:
        return wanted if wanted in names else None
    return next((f for f in LABEL_FIELDS if f in names), None)


def _refuse_unrecognised(
    pool: str, path: Path, names: set[str], label: str | None, fields: tuple[str | None, ...]
) -> None:
    """A field named like a membership label that is not the label field would be ignored, and
    its rows would silently take the pool's class: refuse it instead."""
    text, wanted = fields
    known = {label, text, *_IMPRINT_FIELDS}
    odd = sorted(n for n in names if n not in known and any(w in n.lower() for w in _LABEL_WORDS))
    if odd:
        used = f"the label field is {label!r}" if label else "no label field is recognised"
        if label is None and wanted is not None:
            used = f"the label field {wanted!r} (--label-field) is in no row"
        raise DataError(
            f"the {pool!r} pool {path} has field(s) {odd} that look like membership labels, but "
            f"{used} (standard names: {list(LABEL_FIELDS)}), so they would be ignored and every "
            f"row taken as a {_CLASS[POOL_LABELS[pool]]}. Pass --label-field {odd[0]} "
            "(label_field= in code) if it holds the labels, or rename or remove the field."
        )


def _refuse_partial(
    pool: str, path: Path, unit: str, records: Sequence[tuple[int, Mapping[str, Any]]], label: str
) -> None:
    """Some rows labelled and others not: the pool's name cannot say which rows it covers."""
    bare = [p for p, r in records if r.get(label) is None or str(r.get(label)).strip() == ""]
    if bare:
        raise DataError(
            f"the {pool!r} pool {path} labels only {len(records) - len(bare)} of {len(records)} "
            f"rows with {label!r}; {len(bare)} row(s) lack it: {unit}s {_row_names(records, bare)}."
            f" Give every row a label, or remove {label!r} from every row so the pool's name "
            f"({_CLASS[POOL_LABELS[pool]]}) labels them all."
        )


def _file_pool(
    pool: str, path: Path, text_field: str | None, label_field: str | None
) -> LoadedData:
    """Rows of a data file: labelled rows are checked against the pool's class; a file with no
    label field takes it. The rows go through the loaders' own checks (empty text, UTF-8...)."""
    columns, rows, unit = _file_rows(path)
    parsed = list(rows)
    records = [(pos, r) for pos, r in parsed if isinstance(r, Mapping)]
    names = {str(n) for n in set(columns or ()).union(*(r for _, r in records))}
    label = _label_field(names, label_field)
    _refuse_unrecognised(pool, path, names, label, (text_field, label_field))
    if label is None:  # the pool's name is the label of every row; bad rows are still reported
        label = _POOL_LABEL_FIELD
        parsed = [
            (p, {**r, label: POOL_LABELS[pool]} if isinstance(r, Mapping) else r) for p, r in parsed
        ]
        columns = None if columns is None else [*columns, label]
    else:
        _refuse_partial(pool, path, unit, records, label)
    loaded = loaders._collect(
        parsed,
        source=str(path),
        unit=unit,
        id_prefix=path.stem,
        columns=columns,
        field_names={"text_field": text_field, "label_field": label, "id_field": None},
        on_bad="raise",
        require_both_classes=False,
    )
    check_pool(pool, loaded.samples, source=str(path))
    return loaded


def load_shot_pool(
    name: str, spec: str, *, text_field: str | None = None, label_field: str | None = None
) -> tuple[Sample, ...]:
    """The texts of pool ``name`` (``nonmembers`` or ``members``) from data ``spec``.

    ``spec``: a ``.txt`` file (one text per line), a JSONL/CSV/Parquet file with or without a
    label field, or any data spec (``game-heldout:DIR``...). Unlabelled texts take the pool's
    class; labelled ones must all be of it (:func:`check_pool`). One class is enough.
    ``text_field``/``label_field`` (the run's ``--text-field``/``--label-field``) name a data
    file's fields, as for the evaluation data; a field named like a label that is not the label
    field, or a label on some rows only, is refused.
    """
    label = _check_name(name)
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".txt":
        return _text_lines(path, label).samples
    if path.is_file() and path.suffix.lower() in (
        *loaders.JSONL_SUFFIXES,
        *loaders.CSV_SUFFIXES,
        *loaders.PARQUET_SUFFIXES,
    ):
        return _file_pool(name, path, text_field, label_field).samples
    loaded = resolve_data(spec, require_both_classes=False)
    check_pool(name, loaded.samples, source=spec)
    return loaded.samples


def load_unlabelled(path: str | Path, *, text_field: str | None = None) -> LoadedData:
    """The texts of a JSONL/CSV/Parquet file whose labels do not matter (a privacy game's pool):
    a label field is optional, every row gets label 0 and a row's own label fields, if any, stay
    in its meta. Ids, text-field choice and bad-row errors are those of ``load_file``."""
    p = Path(path).expanduser()
    suffix = loaders._checked_suffix(p)
    columns, rows, unit = loaders._file_rows(p, suffix)
    parsed = [(pos, {**r, _IGNORED_LABEL: 0} if isinstance(r, Mapping) else r) for pos, r in rows]
    return loaders._collect(
        parsed,
        source=str(p),
        unit=unit,
        id_prefix=p.stem,
        columns=None if columns is None else [*columns, _IGNORED_LABEL],
        field_names={"text_field": text_field, "label_field": _IGNORED_LABEL, "id_field": None},
        on_bad="raise",
        require_both_classes=False,
    )
