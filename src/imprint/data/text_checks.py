"""Checks on decoded text that every loader shares."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

#: what a blank text may hold besides white space: format characters (zero-width space and
#: joiners, the byte-order mark, word joiner, soft hyphen: Unicode category Cf) and control
#: characters (Cc); a model given such a text scores only its start token
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc"})


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: empty, white space, or only invisible characters (a
    text of zero-width characters passed ``not text.strip()``); every loader's empty check."""
    return all(c.isspace() or unicodedata.category(c) in _INVISIBLE_CATEGORIES for c in text)


# JSON's \ud800-style escapes can carry half of a UTF-16 pair; no UTF-8 text (the sample hash,
# Parquet, the reports) can hold one, so a row with it is refused where it is read.
_SURROGATE = re.compile("[\ud800-\udfff]")


def find_lone_surrogate(value: Any, where: str = "") -> tuple[str, int, str] | None:
    """(field path, character index, the surrogate) of the first lone surrogate in any string
    inside ``value`` (dict keys and values, lists), or None."""
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return (where, match.start(), match.group()) if match else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            found = find_lone_surrogate(str(key), f"name of {path}")
            if found or (found := find_lone_surrogate(item, path)):
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if found := find_lone_surrogate(item, f"{where}[{i}]"):
                return found
    return None


def lone_surrogate_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with a record holding a lone surrogate, and the fix; None when clean."""
    found = find_lone_surrogate(record)
    if found is None:
        return None
    path, index, char = found
    return (
        f"field {path!r} holds a lone UTF-16 surrogate {char!r} at character {index} (half of "
        "an escaped pair such as \\ud83d\\ude00); fix the escape or remove the character"
    )
