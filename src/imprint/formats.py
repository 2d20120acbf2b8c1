"""The version of the files imprint writes for others to read, and their JSON Schemas.

``metrics.json``, a run's ``manifest.json`` and every folder marker (``.imprint-output.json``,
:mod:`imprint.outdir`) carry ``"format_version": "MAJOR.MINOR"``. A reader accepts its own
major version at any minor (a minor adds fields, never changes one) and a file written before
versions existed (no ``format_version``: read as it always was); a newer major is refused with
the version it needs, never misread. The schemas (``imprint/schemas/*.schema.json``, shipped as
package data and shown in the docs) describe what the writer of :data:`FORMAT_VERSION` writes;
tests validate every output kind against them.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from imprint.errors import DataError

__all__ = ["FORMAT_VERSION", "SCHEMAS", "check_format", "schema"]

#: the version written now; bump the minor for an added field, the major for a changed one
FORMAT_VERSION = "1.0"
MAJOR = int(FORMAT_VERSION.split(".")[0])
#: schema name -> the file it describes
SCHEMAS = {
    "metrics": "metrics.json",
    "manifest": "manifest.json (a run folder's)",
    "marker": ".imprint-output.json (every output folder's marker)",
}
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)")  # ASCII digits: "١.٠" is no version


def check_format(data: Any, where: str) -> str | None:
    """The ``format_version`` of ``data`` (a file's JSON, named ``where`` in errors): None for a
    file written before versions (read as it is); a newer major version than this imprint reads
    raises :class:`DataError` saying which version it needs."""
    if not isinstance(data, dict) or "format_version" not in data:
        return None
    version = data["format_version"]
    match = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise DataError(
            f"{where}: format_version {version!r} is not MAJOR.MINOR (e.g. {FORMAT_VERSION!r}); "
            "was the file edited by hand? Rewrite it with the imprint that made it"
        )
    if int(match.group(1)) > MAJOR:
        from imprint import __version__

        raise DataError(
            f"{where} has format_version {version}, written by a newer imprint; this imprint "
            f"({__version__}) reads format {MAJOR}.x and files written before versions. "
            f"Upgrade to an imprint that reads format {match.group(1)}.x "
            "(pip install -U llm-imprint)"
        )
    return version


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``name``, one of :data:`SCHEMAS`."""
    if name not in SCHEMAS:
        raise KeyError(f"no schema {name!r}; choose from {sorted(SCHEMAS)}")
    file = resources.files("imprint").joinpath("schemas", f"{name}.schema.json")
    text = file.read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
