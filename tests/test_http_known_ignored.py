"""A sampling field the server's request model does not read is not sent, nor reported as sent
(issue 36 item 6): llama-cpp-python's request models (0.3.36, ``llama_cpp/server/types.py``)
have no ``typical_p``, so the manifest listed it among the fields sent although the server
dropped it unread; llama.cpp's own server reads it."""

from __future__ import annotations

import pytest
from fake_openai_server import FakeOpenAIServer

from imprint.backends.http import OpenAICompatibleBackend


def generate(prompt, n, max_tokens, stop, seed, temperature):
    return [f"{prompt} more"] * n


def draw(backend: OpenAICompatibleBackend) -> None:
    try:
        from imprint.backends.base import SamplingSettings
    except ImportError:  # the flat signature
        backend.sample(["a"], 1, 2, seed=0, top_k=50)
        return
    backend.sample(["a"], SamplingSettings(n=1, max_tokens=2, seed=0, top_k=50))


@pytest.mark.parametrize(("owned_by", "reads_it"), [("me", False), ("llamacpp", True)])
def test_typical_p_goes_only_to_a_server_that_reads_it(owned_by, reads_it):
    with FakeOpenAIServer(generate, owned_by=owned_by) as server:
        with OpenAICompatibleBackend(server.base_url, "tiny", api_key_env=None) as backend:
            draw(backend)
            described = backend.describe()
        body = server.log[0]["body"]
    assert body["top_k"] == 50 and body["repeat_penalty"] == 1.0  # the rest of the law is sent
    assert ("typical_p" in body) is reads_it
    assert all(("typical_p" in law) is reads_it for law in described["sampling_sent"])
    ignored = described["server"]["known_ignored"]
    if reads_it:
        assert ignored is None
    else:
        assert "llama-cpp-python" in ignored["typical_p"] and "1.0 (off)" in ignored["typical_p"]
