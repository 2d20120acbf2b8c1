"""``imprint view``: browse run, document-run, game, audit and study folders in a web browser
(built by :mod:`imprint.view`, served on 127.0.0.1 until Ctrl-C)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from imprint.cli.common import handle_errors, on_interrupt, say
from imprint.errors import ConfigError

__all__ = ["view"]

DEFAULT_PORT = 7788


@handle_errors
@on_interrupt(
    "interrupted while building the pages (before serving): nothing of the runs was changed; "
    "rerun the same command"
)
def view(
    folders: Annotated[
        list[Path] | None,
        typer.Argument(
            help="run, game, audit or study folders, or folders holding them [default: runs]",
            show_default=False,
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1; 0 picks a free one")] = DEFAULT_PORT,
    build: Annotated[
        Path | None,
        typer.Option(help="write the site into this folder (kept; default: a temporary one)"),
    ] = None,
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="write the site (--build DIR) and stop")
    ] = False,
) -> None:
    """An index of the runs (sortable, filterable), a page per run (its report and every text's
    scores), two runs side by side; offline, on 127.0.0.1 only. Ctrl-C stops it."""
    from imprint.view.entries import find_entries
    from imprint.view.site import build_site, check_site_folder, same_data_pairs

    if no_serve and build is None:
        raise ConfigError("--no-serve writes the site only: add --build DIR to say where")
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port; pass 1-65535, or 0 for any free one")
    chosen = list(folders or [Path("runs")])
    for folder in chosen:
        if not folder.is_dir():
            where = "no runs/ here" if not folders else f"{folder} is not a folder"
            raise ConfigError(
                f"{where}: pass the folders to browse, e.g. imprint view runs/ path/to/study "
                "(a run, game, audit or study folder, or a folder holding them)"
            )
    if build is not None:
        check_site_folder(build)
        try:  # now, not after reading every run: /proc/x or a path under a file fails here
            build.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"--build {build}: cannot make that folder ({err.strerror or err}); pass a "
                "folder in a writable place"
            ) from None
    entries = find_entries(chosen)
    site = build if build is not None else Path(tempfile.mkdtemp(prefix="imprint-view-"))
    try:
        pairs = same_data_pairs(entries) if no_serve else []
        index = build_site(entries, site, served=not no_serve, pairs=pairs)
        kinds = ", ".join(f"{sum(e.kind == k for e in entries)} {k}"
                          for k in sorted({e.kind for e in entries}))  # fmt: skip
        found = f"{len(entries)} folder(s) ({kinds or 'none'})"
        if no_serve:
            say(f"imprint view: {found}; site written to {index}")
            return
        from imprint.view.server import make_server, serve

        server = make_server(site, entries, port)
        address = f"http://127.0.0.1:{server.server_address[1]}/"
        say(f"imprint view: {found} at {address} (Ctrl-C stops)")
        serve(server, say)
    finally:
        if build is None:
            shutil.rmtree(site, ignore_errors=True)
