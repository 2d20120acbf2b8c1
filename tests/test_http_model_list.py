"""A served ``GET /v1/models`` that answers garbage, 404, 429 or 500 is reported as that
endpoint's problem, not as SaMIA's top_k (issue 37 item 19). A real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_openai_server import FakeOpenAIServer

from imprint.backends.base import SamplingSettings
from imprint.backends.http import OpenAICompatibleBackend, RetryPolicy
from imprint.errors import ImprintError


class BrokenModelList(FakeOpenAIServer):
    """The fake server, with ``GET /v1/models`` answering ``status`` and ``body`` as given."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(lambda prompt, n, *_: ["a b c"] * n)
        self.status, self.body = status, body

    def _handler(self) -> Any:
        base, server = super()._handler(), self

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                self.send_response(server.status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(server.body)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(server.body)

        return Handler


def _sample(server: FakeOpenAIServer) -> None:
    backend = OpenAICompatibleBackend(
        server.base_url, "tiny", api_key_env=None, timeout_s=2.0,
        retry=RetryPolicy(max_retries=1, base_s=0.01, cap_s=0.01),
    )  # fmt: skip
    with backend:
        backend.sample(
            ["some text"], SamplingSettings(n=2, max_tokens=4, temperature=1.0, top_k=50)
        )


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (200, b"<html>this is not an API</html>", r"/v1/models answered 200 but not a model list"),
        (200, json.dumps({"models": "none"}).encode(), r"/v1/models answered 200 but not a model"),
        (429, b"slow down", r"/v1/models answered 429 \(rate-limited\)"),
        (500, b"internal error", r"/v1/models answered 500 \(a server error\)"),
        (503, b"", r"/v1/models answered 503 \(a server error\)"),
    ],
)
def test_a_broken_model_list_is_named_as_the_problem(status: int, body: bytes, said: str) -> None:
    with BrokenModelList(status, body) as server, pytest.raises(ImprintError) as err:
        _sample(server)
    message = str(err.value)
    assert "\n" not in message and "top_k" not in message, message
    assert server.base_url in message
    import re

    assert re.search(said, message), message


def test_a_server_without_a_model_list_says_so_where_top_k_is_refused() -> None:
    """404: not every server lists its models; then its sampling fields are unknown, and the
    top_k refusal says that the list was missing and how to name the server's dialect."""
    with BrokenModelList(404, b"no route") as server, pytest.raises(ImprintError) as err:
        _sample(server)
    message = str(err.value)
    assert "top_k" in message and "--model-arg server=vllm" in message
    assert "GET /v1/models answered 404" in message, message


def test_a_resumed_served_run_counts_what_was_sent_and_what_the_store_answered(tmp_path):
    """A served run stopped by a failing request keeps the answers it got; the rerun said "20
    requests executed, cache_hits 0" while it sent 13 and read 7 from the store."""
    from io import StringIO

    from rich.console import Console

    from imprint.backends.http import APIError
    from imprint.cli.flags import config_from_flags
    from imprint.run import execute_run

    rows = [(f"Text number {i} says {'something ' * (i % 3 + 1)}here.", i % 2) for i in range(12)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    words = lambda prompt, n, *_: [f"{prompt.split()[0]} w{i}" for i in range(n)]  # noqa: E731
    with FakeOpenAIServer(words, faults=[None] * 7 + ["500"]) as server:  # the 8th fails

        def run(out: str, console: Any = None) -> Any:
            config = config_from_flags(
                model="tiny", data=str(data), out=tmp_path / out, attacks=("samia",),
                params={"samia": {"n_samples": 2, "top_k": 0}}, api_base=server.base_url,
                api_key_env=None, api_concurrency=1, api_max_retries=0, n_bootstrap=20,
                shot_holdout=0, blind=False,
                cache=tmp_path / "cache.sqlite", progress=False,
            )  # fmt: skip
            return execute_run(config, console=console)

        with pytest.raises(APIError):
            run("first")
        before = len(server.log)
        out = StringIO()
        second = run("second", Console(file=out, width=400))
        sent = len(server.log) - before
    counts = second.manifest["requests"]["target"]["sample"]
    usage = second.manifest["models"]["target"]["usage"]
    assert usage["requests"] == sent > 0 and usage["cached"] > 0  # the first run's answers kept
    assert counts["sent"] == sent and counts["answered_by_store"] == usage["cached"]
    assert counts["sent"] + counts["answered_by_store"] == counts["executed"]
    line = " ".join(out.getvalue().split())
    assert f"({sent} POSTs sent, {usage['cached']} read back from the answers an" in line, line
