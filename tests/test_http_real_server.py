"""The black-box HTTP client against a real server nobody here wrote: ``transformers serve``
(transformers' own OpenAI-compatible server, the ``transformers[serving]`` dependencies in the
dev extra) serving SmolLM2-135M's local files offline on 127.0.0.1 (issue 22).

What this server really does, and the client must survive: it ignores ``n`` (one choice per
request), answers one request at a time, refuses unknown fields such as ``top_k`` with 422, is
pinned to the model it was started with (400 for another name), and, given only a temperature,
decodes greedily (SmolLM2's generation config has no ``do_sample``), so the sampling law has to
be sent whole, as a ``generation_config``. Faults it cannot produce on cue (429, truncated
bodies, shape errors) stay in ``tests/fake_openai_server.py``.

``TransformersServe`` is reusable: ``with TransformersServe(tmp_dir) as server: server.base_url``.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from llama_server import ServerProcess
from typer.testing import CliRunner

from imprint.attacks.base import get_attack_class
from imprint.backends.base import SamplingSettings
from imprint.backends.http import APIError, OpenAICompatibleBackend, RetryPolicy
from imprint.backends.models import materialize, resolve_model
from imprint.cli import app
from imprint.requests.store import RequestStore
from imprint.run.http_plan import request_counts

NAME = "my-model"  # the docs' command's model name: a folder of that name in the server's cwd
TEXTS = [  # short: SimMIA asks 2 x (words - 1) next words per text, one request each here
    ("The bridge fell.", 1),
    ("Birds sang today.", 1),
    ("Our team won.", 0),
    ("She painted walls.", 0),
]
SHOT = "A new library opened downtown today."  # SimMIA's known non-member prefix P


class TransformersServe(ServerProcess):
    """``transformers serve my-model`` on 127.0.0.1 (offline, one torch thread), ``my-model``
    being a link in ``workdir`` to SmolLM2-135M's converted local folder. ``kill()`` ends it at
    once (SIGKILL, as a crash); ``start()`` starts it again on the same port."""

    def __init__(self, workdir: Path) -> None:
        command = [str(Path(sys.executable).with_name("transformers")), "serve", NAME]
        command += ["--host", "127.0.0.1", "--port", "{port}", "--device", "cpu"]
        super().__init__(workdir, command, {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
        link = workdir / NAME
        if not link.exists():
            link.symlink_to(materialize(resolve_model("smollm2-135m")).location)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with TransformersServe(tmp_path_factory.mktemp("serve")) as running:
        yield running


@pytest.fixture()
def up(server):
    server.ensure_up()
    return server


def _data(path: Path) -> Path:
    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in TEXTS))
    return path


def _docs_command() -> list[str]:
    """The black-box ``imprint run --api-base ... --model my-model`` command of the README (or
    of the docs page the README sends readers to), as words."""
    root = Path(__file__).resolve().parents[1]
    for page in ("README.md", "docs/guide/models.md", "docs/served/blackbox.md"):
        text = (root / page).read_text(encoding="utf-8")
        found = re.search(r"^imprint run --api-base \S+ --model my-model(?:.*\\\n)*.*$", text, re.M)
        if found:
            return shlex.split(found.group(0).replace("\\\n", " "))
    raise AssertionError("no black-box 'imprint run --api-base ... --model my-model' command")


def test_the_docs_black_box_command_runs_unchanged_on_a_one_choice_server(
    up, tmp_path, monkeypatch
):
    """The documented command, with no server-specific flag: only the URL, the data, the output
    folder and the sample counts are made small; the client learns one choice per request and
    one request at a time from the first answers, and retries nothing."""
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-this-server")
    words = _docs_command()[1:]  # without the program name
    swap = {"--api-base": up.base_url, "--data": str(_data(tmp_path / "t.jsonl"))}
    swap["--out"] = str(tmp_path / "run")
    args = [swap.get(words[i - 1], w) if i else w for i, w in enumerate(words)]
    args = [re.sub(r"^simmia\.n_samples=\d+$", "simmia.n_samples=1", a) for a in args]
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"text": SHOT}) + "\n")
    args += ["--param", "simmia.n_shots=1", "--param", "samia.n_samples=2"]
    args += ["--pool", f"nonmembers={pool}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    target = json.loads((tmp_path / "run" / "manifest.json").read_text())["models"]["target"]
    assert target["server"]["dialect"] == "transformers"
    assert target["limits"]["choices_per_request"] == 1 and target["limits"]["concurrency"] == 1
    assert target["usage"]["retries"] == {} and target["usage"]["failed"] == 0
    laws = [json.loads(law["generation_config"]) for law in target["sampling_sent"]]
    assert {"do_sample": True, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.0} in [
        {k: law[k] for k in ("do_sample", "top_k", "top_p", "repetition_penalty")} for law in laws
    ]
    assert target["server_reported"]["model"] == [NAME]

    # the counts the plan says, for the attacks as run (SimMIA prepared with its prefix P)
    simmia = replace(get_attack_class("simmia")(n_samples=1), shot_prefix=SHOT)
    attacks = [get_attack_class("samia")(n_samples=2), simmia]
    planned = request_counts(attacks, [t for t, _ in TEXTS], 1)
    assert target["usage"]["requests"] == sum(planned.values()) == 8 + 2 * 4 * 3


def test_samples_differ_because_the_whole_sampling_law_is_sent(up):
    """Given a temperature alone this server decodes greedily (three equal "samples"); with the
    law sent as its generation_config the seeded samples differ and repeat under their seed."""
    with OpenAICompatibleBackend(up.base_url, NAME, api_key_env=None) as backend:
        first = backend.sample(["The city of Boston is"], SamplingSettings(3, 6, seed=7, top_k=50))[
            0
        ]
        again = backend.sample(["The city of Boston is"], SamplingSettings(1, 6, seed=7, top_k=50))[
            0
        ]
        usage = backend.usage()
    assert len(set(first)) > 1 and again[0] == first[0]
    assert usage["requests"] == 4 and usage["retries"] == {}
    plain = {"model": NAME, "prompt": "The city of Boston is", "max_tokens": 6, "temperature": 1}
    greedy = {httpx.post(f"{up.base_url}/completions", json=plain, timeout=60).text for _ in "ab"}
    assert len({json.loads(t)["choices"][0]["text"] for t in greedy}) == 1  # the pitfall itself


def test_a_wrong_model_name_is_refused_listing_the_served_ones(up, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    sent = up.posts()
    args = ["run", "--api-base", up.base_url, "--model", "my-modle", "--attacks", "samia"]
    result = CliRunner().invoke(app, [*args, "--data", str(_data(tmp_path / "t.jsonl"))])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "'my-modle' is not served" in flat and "lists 'my-model'" in flat
    assert up.posts() == sent  # refused before any completion request


class _KillAfter(RequestStore):
    """The real store; the server is killed (SIGKILL) right after the ``k``-th answer is stored."""

    def __init__(self, path: Path, server: TransformersServe, k: int) -> None:
        super().__init__(path)
        self.server, self.k, self.stored = server, k, 0

    def put_response(self, key, texts):
        super().put_response(key, texts)
        self.stored += 1
        if self.stored == self.k:
            self.server.kill()


def test_a_killed_server_resumes_with_nothing_sent_twice(up, tmp_path):
    prompts = [f"Fact {i}: the harbour" for i in range(6)]
    retry = RetryPolicy(max_retries=1, base_s=0.05, cap_s=0.1)
    store = _KillAfter(tmp_path / "cache.sqlite", up, k=3)
    first = OpenAICompatibleBackend(up.base_url, NAME, api_key_env=None, retry=retry, cache=store)
    with first, pytest.raises(APIError) as err:
        first.sample(prompts, SamplingSettings(1, 4, seed=3))
    stored = first.usage()["stored"]
    assert stored >= 3 and f"{stored} answers of this call" in str(err.value)
    store.close()
    up.start()  # the same port: the same API root, so the same stored answers
    again_store = RequestStore(tmp_path / "cache.sqlite")
    with OpenAICompatibleBackend(up.base_url, NAME, api_key_env=None, cache=again_store) as again:
        out = again.sample(prompts, SamplingSettings(1, 4, seed=3))
        usage = again.usage()
    again_store.close()
    assert [len(o) for o in out] == [1] * len(prompts)
    assert usage["cached"] == stored and usage["requests"] == len(prompts) - stored
    assert up.posts() == len(prompts) - stored  # the restarted server saw only the rest
