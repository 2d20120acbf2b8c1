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
from imprint.errors import ConfigError, DataError

__all__ = ["POOL_LABELS", "check_pool", "derived_from_member", "is_natural", "load_shot_pool"]

NONMEMBER_POOL = "nonmembers"
MEMBER_POOL = "members"
#: pool name -> the class every text in it must belong to
POOL_LABELS: dict[str, int] = {NONMEMBER_POOL: NON_MEMBER, MEMBER_POOL: MEMBER}
_CLASS = {NON_MEMBER: "non-member", MEMBER: "member"}
_POOL_LABEL_FIELD = "label"


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
    shown = ", ".join(s.id for s in samples[:10])
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
            f"{_ids(wrong)} (file:line unless the data names ids). Its shots are used as "
            f"{_CLASS[want]} text; remove these rows from the pool, or drop the label field to "
            f"declare every text a {_CLASS[want]}."
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
        if line.strip()
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


def _unlabelled_file(path: Path, label: int) -> LoadedData | None:
    """Rows of a data file without any label field, given the pool's class; None if labelled.

    The rows go through the loaders' own checks (empty text, UTF-8, duplicate ids...).
    """
    columns, rows, unit = _file_rows(path)
    parsed = list(rows)
    # labelled if any row has a label field: those labels are checked, never overwritten
    names = set(columns or ()).union(*(r for _, r in parsed if isinstance(r, Mapping)))
    if names & set(LABEL_FIELDS):
        return None
    # the pool's name is the label of every row; bad rows pass through to be reported
    labelled = [
        (pos, {**r, _POOL_LABEL_FIELD: label} if isinstance(r, Mapping) else r) for pos, r in parsed
    ]
    return loaders._collect(
        labelled,
        source=str(path),
        unit=unit,
        id_prefix=path.stem,
        columns=None if columns is None else [*columns, _POOL_LABEL_FIELD],
        field_names={"text_field": None, "label_field": _POOL_LABEL_FIELD, "id_field": None},
        on_bad="raise",
        require_both_classes=False,
    )


def load_shot_pool(name: str, spec: str) -> tuple[Sample, ...]:
    """The texts of pool ``name`` (``nonmembers`` or ``members``) from data ``spec``.

    ``spec``: a ``.txt`` file (one text per line), a JSONL/CSV/Parquet file with or without a
    label field, or any data spec (``game-heldout:DIR``...). Unlabelled texts take the pool's
    class; labelled ones must all be of it (:func:`check_pool`). One class is enough.
    """
    label = _check_name(name)
    path = Path(spec).expanduser()
    loaded: LoadedData | None = None
    if path.suffix.lower() == ".txt":
        loaded = _text_lines(path, label)
    elif path.is_file() and path.suffix.lower() in (
        *loaders.JSONL_SUFFIXES,
        *loaders.CSV_SUFFIXES,
        *loaders.PARQUET_SUFFIXES,
    ):
        loaded = _unlabelled_file(path, label)
    if loaded is None:
        loaded = resolve_data(spec, require_both_classes=False)
        check_pool(name, loaded.samples, source=spec)
    return loaded.samples
