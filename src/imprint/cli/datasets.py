"""``imprint datasets``: the named benchmarks, what each is, its caveats, whether it is here.

Nothing is downloaded: a set counts as here when its files are in a data dir or the hub cache.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from imprint.cli.common import console, handle_errors
from imprint.data.benchmarks import BenchmarkInfo

__all__ = ["list_datasets"]

Filter = Annotated[
    str | None,
    typer.Argument(help="list only names starting with this, e.g. mimir, mimir:arxiv, wikimia:"),
]
AsJson = Annotated[bool, typer.Option("--json", help="print every field as JSON")]


COLUMNS = ("name", "family", "here", "size", "licence", "source", "fields", "caveats")


@handle_errors
def list_datasets(name: Filter = None, as_json: AsJson = False, fmt: str = "table") -> None:
    """List the named benchmarks: provenance, licence, size, fields, caveats, local copy."""
    from imprint.data import list_benchmarks
    from imprint.data.catalog import did_you_mean, iter_benchmarks
    from imprint.errors import DataError

    infos = [i for i in list_benchmarks() if not name or i.name.startswith(name)]
    if not infos:
        known = [e.name for e in iter_benchmarks()]
        raise DataError(f"no benchmark name starts with {name!r}.{did_you_mean(name or '', known)}")
    if as_json or fmt == "json":  # every field
        typer.echo(json.dumps([i.to_dict() for i in infos], indent=2, ensure_ascii=False))
        return
    if fmt in ("md", "tsv"):
        from imprint.cli.listing import emit

        emit([_row(i) for i in infos], COLUMNS, fmt)
        return
    for family in dict.fromkeys(i.entry.family if i.entry else i.name for i in infos):
        _family_table(family, [i for i in infos if i.entry and i.entry.family == family])
    here = sum(i.available for i in infos)
    console.print(
        f"{len(infos)} benchmarks, {here} here. A missing one is downloaded on first use "
        "(--data NAME); offline, the error names the file to place and where. --json shows "
        "every field, including the files' hub paths."
    )


def _family_table(family: str, infos: list[BenchmarkInfo]) -> None:
    """One table per family: what the family shares in the title, one row per name."""
    first = infos[0]
    origin = "" if first.origin == "built-in" else f" ({escape(first.origin)})"
    title = (
        f"[bold]{escape(family)}[/bold]{origin}: {escape(first.provenance)}\n"
        f"source: {escape(first.source)} | licence: {escape(first.licence)}\n"
        f"fields: {escape(first.fields)}"
    )
    # a terminal's width is shared out; a pipe's (imprint.cli.common.PIPE_WIDTH) is not filled
    table = Table(title=title, title_justify="left", show_lines=False, expand=console.is_terminal)
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("here", overflow="fold", max_width=40 if console.is_terminal else None)
    table.add_column("size", overflow="fold", ratio=1)
    table.add_column("caveats", overflow="fold", ratio=3)
    for info in infos:
        table.add_row(
            escape(info.name),
            _here(info),
            escape(info.size),
            escape("\n".join(f"- {c}" for c in info.caveats)),
        )
    console.print(table)


def _here(info: BenchmarkInfo) -> str:
    if info.local_path is not None:
        return escape(str(info.local_path))
    if info.in_hub_cache:
        return "hub cache"
    return "[dim]no (built locally)[/dim]" if info.source.startswith("build:") else "[dim]no[/dim]"


def _row(info: BenchmarkInfo) -> dict[str, object]:
    """One benchmark as a row of :data:`COLUMNS`."""
    here = (
        str(info.local_path)
        if info.local_path is not None
        else "hub cache"
        if info.in_hub_cache
        else "no"
    )
    family = info.entry.family if info.entry else info.name
    return {"name": info.name, "family": family, "here": here, "size": info.size,
            "licence": info.licence, "source": info.source, "fields": info.fields,
            "caveats": list(info.caveats)}  # fmt: skip
