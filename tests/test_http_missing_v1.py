"""An --api-base without /v1 (issue 36, tester): a server whose models are listed under /v1 is
named with the fix, not reported later as a probe's 404 or SaMIA's top_k refused."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
from json_handler import JSONHandler

from imprint.backends.http_checks import read_models
from imprint.errors import ConfigError


class _OpenAIRoot(JSONHandler):
    """Lists one model at /v1/models; any other path is 404, as llama-cpp-python answers."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/v1/models":
            self.send_json(200, {"data": [{"id": "my-model"}]})
        else:
            self.send_json(404, {"detail": "Not Found"})


@pytest.fixture()
def root():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAIRoot)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_base_without_v1_is_refused_naming_the_base_with_v1(root):
    with httpx.Client() as client, pytest.raises(ConfigError) as refused:
        read_models(client, root, str, None)
    assert f"pass --api-base {root}/v1" in str(refused.value)


def test_the_v1_base_still_lists_its_models(root):
    with httpx.Client() as client:
        listed, why = read_models(client, f"{root}/v1", str, None)
    assert why is None and listed["data"][0]["id"] == "my-model"
