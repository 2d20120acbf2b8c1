"""Serve a built site on 127.0.0.1 with the standard library's threaded HTTP server; a request
for a comparison page not built yet builds it first (:func:`imprint.view.site.compare_page`)."""

from __future__ import annotations

import errno
import functools
import signal
import threading
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from imprint.errors import ConfigError, DataError
from imprint.view.entries import Entry
from imprint.view.site import SEPARATOR, compare_page

__all__ = ["make_server", "serve"]

HOST = "127.0.0.1"  # never another interface: the pages show training texts


class _Handler(SimpleHTTPRequestHandler):
    """The site's files; ``/compare/<a>__vs__<b>.html`` is built on its first request."""

    def __init__(self, *args: Any, site: Path, entries: dict[str, Entry], lock: Any,
                 **kwargs: Any) -> None:  # fmt: skip
        self.site, self.entries, self.lock = site, entries, lock
        super().__init__(*args, directory=str(site), **kwargs)

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path.startswith("/compare/") and path.endswith(".html") and SEPARATOR in path:
            a, _, b = path.removeprefix("/compare/").removesuffix(".html").partition(SEPARATOR)
            with self.lock:  # one build of a page at a time; a second request then finds it
                if not (self.site / path.lstrip("/")).is_file():
                    try:
                        compare_page(self.entries, a, b, self.site)
                    except DataError as err:
                        self.send_error(404, str(err))
                        return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # one line per request would bury the address line; errors reach the page


def make_server(site: Path, entries: list[Entry], port: int) -> ThreadingHTTPServer:
    """A server of ``site`` on 127.0.0.1:``port`` (0: any free port), not yet serving."""
    handler: Callable[..., _Handler] = functools.partial(
        _Handler, site=site, entries={e.id: e for e in entries}, lock=threading.Lock()
    )
    try:
        server = ThreadingHTTPServer((HOST, port), handler)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"--port {port}: another program listens there; pass another --port, or "
                "--port 0 for any free one"
            ) from None
        raise ConfigError(
            f"--port {port}: cannot listen on {HOST} ({err.strerror or err})"
        ) from None
    server.daemon_threads = True
    return server


def serve(server: ThreadingHTTPServer, say: Callable[[str], None]) -> None:
    """Serve until Ctrl-C (or SIGTERM, e.g. ``kill``), then close the socket and say so in one
    line."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    say("imprint view: stopped")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
