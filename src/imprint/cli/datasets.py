"""``imprint datasets``: the named benchmarks, what each is, its caveats, whether it is here.

Nothing is downloaded: a set counts as here when its files are in a data dir or the hub cache.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.text import Text

from imprint.cli.common import console, handle_errors, say
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
    say(
        f"{len(infos)} benchmarks, {here} here. A missing one is downloaded on first use "
        "(--data NAME); offline, the error names the file to place and where. --json shows "
        "every field, including the files' hub paths."
    )


def _family_table(family: str, infos: list[BenchmarkInfo]) -> None:
    """One block per family, wrapped to the console's width (80 columns in a pipe): what the
    family shares first (caveats every name has are said once), then one line per name with
    its size, where its copy is (a path kept whole) and its own caveats."""
    from imprint.report.terminal import print_wrapped

    first = infos[0]
    origin = "" if first.origin == "built-in" else f" ({first.origin})"
    console.print(Text(f"{family}{origin}", style="bold"), soft_wrap=True)
    for line in (first.provenance, f"source: {first.source}", f"licence: {first.licence}",
                 f"fields: {first.fields}"):  # fmt: skip
        print_wrapped(console, line, indent="  ")
    shared = [c for c in first.caveats if all(c in i.caveats for i in infos)]
    if shared:
        print_wrapped(console, "caveats" + (" (every name)" if len(infos) > 1 else "") + ":",
                      indent="  ")  # fmt: skip
        for caveat in shared:
            print_wrapped(console, f"- {caveat}", indent="  ")
    width = max(len(i.name) for i in infos)
    for info in infos:
        print_wrapped(console, f"{info.name:<{width}}  {info.size}; here: {_here(info)}",
                      indent="  ")  # fmt: skip
        for caveat in (c for c in info.caveats if c not in shared):
            print_wrapped(console, f"- {caveat}", indent="    ")


def _here(info: BenchmarkInfo) -> str:
    if info.local_path is not None:
        return str(info.local_path)
    if info.in_hub_cache:
        return "hub cache"
    return "no (built locally)" if info.source.startswith("build:") else "no"


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
