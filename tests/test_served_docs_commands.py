"""The served recipe's commands run as written against real servers on 127.0.0.1 (issue 36).

docs/recipes/served.md gives, per server, the line that starts it and the ``imprint`` commands
that use it. This test reads those lines from the page's ``bash`` blocks and runs them: the
server lines as processes (only the page's placeholders replaced: the GGUF path, port 8000 by a
free port, ``python`` by this venv's), the ``imprint`` lines through the real CLI with only the
address, ``--out`` and the sizes the page states for the tests changed (the page says which:
``SIZES_SAID``). Servers: llama-cpp-python 0.3.36 (``./scripts/setup --served``; skipped, loudly,
only when it is not installed) and ``transformers serve``.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from llama_server import LlamaServer, ServerProcess, smollm2_gguf
from test_docs_recipes import bash_commands
from typer.testing import CliRunner

from imprint.backends.models import materialize, resolve_model
from imprint.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "recipes" / "served.md"
GGUF_PLACEHOLDER = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = [("The bridge fell.", 1), ("Birds sang today.", 1), ("Our team won.", 0),
         ("She painted walls.", 0)]  # fmt: skip
SHOT = "A new library opened downtown today."  # SimMIA's known non-member prefix
#: what the page says the tests change, each checked to be said there
SIZES_SAID = [
    "`--n-per-label 2`", "`simmia.n_samples=1`", "4 short texts",
    "`--param simmia.n_shots=1 --param samia.n_samples=2 --pool nonmembers=...`",
]  # fmt: skip


def command(prefix: str) -> list[str]:
    """The one command of the page that starts with ``prefix``, as words."""
    found = [c for c in bash_commands(PAGE) if c.startswith(prefix)]
    assert len(found) == 1, f"served.md: {len(found)} commands start with {prefix!r}"
    return shlex.split(found[0])


def served_line(prefix: str) -> tuple[dict[str, str], list[str]]:
    """A server line of the page: its ``NAME=value`` prefix as environment, its words with port
    8000 made ``{port}`` (``ServerProcess`` puts a free one there)."""
    words = command(prefix)
    env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    words = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
    return env, ["{port}" if w == "8000" else w for w in words]


def with_values(words: list[str], values: dict[str, str]) -> list[str]:
    out = list(words)
    for flag, value in values.items():
        assert flag in out, f"the page's command has no {flag}: {shlex.join(words)}"
        out[out.index(flag) + 1] = value
    return out


def graybox_llama() -> list[str]:
    found = [w for w in (shlex.split(c) for c in bash_commands(PAGE))
             if w[:3] == ["imprint", "run", "--model"] and w[3].startswith("openai-logprobs:")
             and "max_top_logprobs=49152" in w]  # fmt: skip
    assert len(found) == 1, "served.md: one gray-box command for llama-cpp-python"
    return found[0][1:]


def blackbox() -> list[str]:
    return command("imprint run --api-base http://127.0.0.1:8000/v1")[1:]


def test_the_page_states_the_sizes_the_tests_run() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    for said in SIZES_SAID:
        assert said in text, f"served.md does not say the tests run {said}"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    _, words = served_line("python -m llama_cpp.server")
    words = [sys.executable if w == "python" else w for w in words]
    words = [smollm2_gguf() if w == GGUF_PLACEHOLDER else w for w in words]
    with LlamaServer(tmp_path_factory.mktemp("llama"), command=words) as server:
        yield server


def _run(args: list[str]) -> dict:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output[-4000:]
    out = Path(args[args.index("--out") + 1])
    return json.loads((out / "manifest.json").read_text())


def test_the_llama_graybox_command_runs_as_written(llama, tmp_path) -> None:
    """4 WikiMIA-32 texts scored through the real server with the page's options: the echo form,
    shifted by one and corrected, one request at a time, every text scored or counted."""
    out = tmp_path / "graybox"
    args = with_values(graybox_llama(), {"--api-base": llama.base_url, "--out": str(out),
                                         "--n-per-label": "2"})  # fmt: skip
    manifest = _run(args)
    target = manifest["models"]["target"]
    assert target["mode"] == "echo" and target["alignment"]["shift"] == 1
    import pandas as pd

    scores = pd.read_parquet(out / "scores.parquet")
    assert len(scores) >= 1 and scores["loss"].notna().all()
    assert llama.posts() >= len(scores)
    # the same texts scored locally by the model the GGUF de-quantises: the same scores, up to
    # llama.cpp's Q4_1 kernels (issue 36's figure, at this size)
    local = tmp_path / "local"
    words = with_values(graybox_llama(), {"--model": "smollm2-135m", "--out": str(local),
                                          "--n-per-label": "2"})  # fmt: skip
    words = [w for i, w in enumerate(words) if "--api-base" not in words[i - 1 : i + 1]]
    words = [w for i, w in enumerate(words) if "--model-arg" not in words[i - 1 : i + 1]]
    _run([*words, "--dtype", "float32", "--device", "cpu"])
    both = scores.merge(pd.read_parquet(local / "scores.parquet"), on="id", suffixes=("", "_hf"))
    assert len(both) == len(scores)
    for attack, bound in (("loss", 0.1), ("zlib", 0.002), ("min_k", 0.3)):
        assert (both[attack] - both[f"{attack}_hf"]).abs().max() < bound, both


def _blackbox_args(base_url: str, tmp_path: Path) -> list[str]:
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in TEXTS))
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"text": SHOT}) + "\n")
    args = with_values(blackbox(), {"--api-base": base_url, "--data": str(data),
                                    "--out": str(tmp_path / "run")})  # fmt: skip
    args = [re.sub(r"^simmia\.n_samples=\d+$", "simmia.n_samples=1", a) for a in args]
    return [*args, "--param", "simmia.n_shots=1", "--param", "samia.n_samples=2",
            "--pool", f"nonmembers={pool}"]  # fmt: skip


def test_the_blackbox_command_runs_as_written_on_llama_cpp(llama, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-this-server")
    target = _run(_blackbox_args(llama.base_url, tmp_path))["models"]["target"]
    assert target["server"]["dialect"] == "llama.cpp"
    assert target["limits"]["choices_per_request"] == 1
    assert target["usage"]["failed"] == 0 and target["usage"]["requests"] == 8 + 2 * 4 * 3


def test_the_transformers_serve_line_and_the_blackbox_command_run_as_written(
    tmp_path, monkeypatch
) -> None:
    env, words = served_line("HF_HUB_OFFLINE=1 transformers serve")
    assert env == {"HF_HUB_OFFLINE": "1"} and words[:3] == ["transformers", "serve", "my-model"]
    words[0] = str(Path(sys.executable).with_name("transformers"))
    (tmp_path / "my-model").symlink_to(materialize(resolve_model("smollm2-135m")).location)
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-this-server")
    with ServerProcess(tmp_path, words, {**env, "OMP_NUM_THREADS": "1"}) as server:
        target = _run(_blackbox_args(server.base_url, tmp_path))["models"]["target"]
        posts = server.posts()
    assert target["server"]["dialect"] == "transformers"
    assert target["limits"]["choices_per_request"] == 1
    assert target["usage"]["failed"] == 0 and posts == target["usage"]["requests"] == 8 + 2 * 4 * 3
