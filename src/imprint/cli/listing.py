"""Listings in machine formats: ``--format json|md|tsv`` for ``imprint attacks``, ``backends``
and ``datasets`` (``table``, the default, is each command's own layout for people).

Rows are dicts of one listing's columns; a list value (caveats, deviations) is one JSON array,
and in Markdown and TSV one cell joined by `` | ``. Nothing is cut or wrapped: a TSV cell's tabs
and newlines become spaces, a Markdown cell's pipes are escaped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer

__all__ = ["FORMATS", "Format", "check_format", "emit"]

FORMATS = ("table", "json", "md", "tsv")
Format = Annotated[
    str,
    typer.Option(
        "--format",
        help="table (for people), json, md (a Markdown table) or tsv (a header row, then one "
        "row per entry); nothing is cut or wrapped",
    ),
]


def check_format(value: str) -> str:
    """The format, or a one-line usage error listing the choices."""
    if value not in FORMATS:
        raise typer.BadParameter(
            f"{value!r} is not a format; use one of {', '.join(FORMATS)}", param_hint="--format"
        )
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " | ".join(_cell(v) for v in value)
    return " ".join(str(value).split())


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str) -> None:
    """Print ``rows`` (their ``columns``) as ``fmt`` (json, md or tsv) on standard output."""
    if fmt == "json":
        typer.echo(json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=2,
                              ensure_ascii=False))  # fmt: skip
        return
    if fmt == "tsv":
        typer.echo("\t".join(columns))
        for row in rows:
            typer.echo("\t".join(_cell(row.get(c)).replace("\t", " ") for c in columns))
        return
    typer.echo("| " + " | ".join(columns) + " |")
    typer.echo("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        cells = (_cell(row.get(c)).replace("|", "\\|") for c in columns)
        typer.echo("| " + " | ".join(cells) + " |")
