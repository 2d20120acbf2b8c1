"""A Ray address that points at a service other than Ray fails within a bounded time, in one
line naming the address (issue 37 item 10: an HTTP server on 127.0.0.1 left a run at "0/498
tokens" for 4 min 46 s)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.errors import ConfigError
from imprint.executors.ray_setup import JOIN_LIMITS, check_address, connect


@pytest.fixture
def http_server() -> Iterator[int]:
    """A plain web server on 127.0.0.1 (Python's http.server in a thread); yields its port."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # no access log on the test's output
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_web_server_as_the_ray_address_fails_at_once_naming_it(
    http_server: int, tiny_model_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{http_server}"
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        ["run", "--model", str(tiny_model_dir), "--data", "wikimia:32", "--n-per-label", "5",
         "--attacks", "loss", "--out", str(tmp_path / "o"), "--executor", "ray",
         "--address", address],
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert took < 60  # before: still waiting at 4 min 46 s
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and result.output.strip() == lines[0], result.output
    assert (
        f"--address '{address}': something answers at {address}, but not Ray's protocol"
        in (lines[0])
    )
    assert "(it answered '" in lines[0]  # what the server said
    with pytest.raises(ConfigError, match=r"ray://127\.0\.0\.1:\d+.*not Ray's protocol"):
        check_address(f"ray://{address}")


@pytest.mark.parametrize("scheme", ["http", "https", "HTTP"])
def test_the_dashboard_url_as_the_ray_address_is_refused_before_any_work(
    http_server: int, tmp_path: Path, scheme: str
) -> None:
    """The dashboard's URL (what users paste) answers HTTP, so the protocol check let it pass
    and ray.init refused it only after the model had loaded; now it is refused with the fix
    before the model is looked at (a missing model would fail otherwise)."""
    pytest.importorskip("ray")
    address = f"{scheme}://127.0.0.1:{http_server}"
    result = CliRunner().invoke(
        app,
        ["run", "--model", "no-such-model-dir", "--data", "wikimia:32", "--attacks", "loss",
         "--out", str(tmp_path / "o"), "--executor", "ray", "--address", address],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert f"--address '{address}' is a web address (the Ray dashboard's" in lines[0]
    assert "127.0.0.1:6379" in lines[0] and "ray://HOST:10001" in lines[0]
    assert not (tmp_path / "o").exists()


class _Http2Only:
    """Answers an HTTP/2 preface with a SETTINGS frame, then says nothing: a gRPC-speaking
    service that is not Ray (it passes the protocol check; Ray's join must still end)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    def close(self) -> None:
        self.sock.close()
        for conn in self.open:
            conn.close()


def test_the_protocol_check_passes_a_grpc_answer() -> None:
    server = _Http2Only()
    try:
        check_address(f"127.0.0.1:{server.port}")
    finally:
        server.close()


@pytest.mark.slow
def test_joining_a_service_that_is_not_ray_ends_within_a_minute_naming_it(monkeypatch) -> None:
    ray = pytest.importorskip("ray")
    for key in JOIN_LIMITS:
        monkeypatch.delenv(key, raising=False)
    server = _Http2Only()
    address = f"127.0.0.1:{server.port}"

    class Options:
        worker_cpus = 1

    Options.address = address  # type: ignore[attr-defined]
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError, match=rf"could not start or join '{address}'"):
            connect(Options())  # type: ignore[arg-type]
    finally:
        server.close()
        ray.shutdown()
    assert time.monotonic() - started < 60  # Ray's default: 20 attempts of ~40 s each
