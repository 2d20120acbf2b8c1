"""Every command of the recipes (docs/recipes/), the README's quickstart and docs/quickstart.md
runs through the real CLI: the fenced ``bash`` blocks are read from the pages and each
``imprint`` command runs.

A recipe's commands run as written (issue 37): only the placeholders the page names as such
(``PLACEHOLDERS``: a tiny random model, a few WikiMIA texts) and the sizes its
``**Sizes you may change:**`` paragraph under the block names (``TINY``) change. A command that
needs a GPU or a server is marked so on its page and is either run as a local stand-in of the
same command line (``STAND_INS``, with the reason) or listed in ``NOT_RUN`` with the reason; any
other line fails the test, so a page cannot gain a command that nobody runs. Each recipe at its
documented size: ``benchmarks/bench_recipes.py``. The quickstart pages (not recipes) keep their
cuts (``QUICKSTART_SIZES``, ``QUICKSTART_EXTRA``): a tiny model for ``smollm2-135m`` and small
sizes. The ``yaml`` blocks named ``# FILE.yaml`` are written out (models made tiny, a GPU grid's
CPU stand-in) for the commands that read them, and the Python blocks of the quickstart are
executed (the Python API guide's: tests/test_python_api.py)."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import WIKIMIA
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART_PAGES = [
    ROOT / "docs" / "install.md",  # set-up only: every command of it is in NOT_RUN
    ROOT / "docs" / "quickstart.md",
    ROOT / "README.md",  # its quickstart repeats docs/quickstart.md's commands
]
RECIPES = sorted((ROOT / "docs" / "recipes").glob("*.md"))
PAGES = [*QUICKSTART_PAGES, *RECIPES]
# the Python API guide's examples run in tests/test_python_api.py (after the study and audit
# commands it names have made the folders it reads)
PYTHON_PAGES = [ROOT / "docs" / "quickstart.md"]

#: command prefix -> why this test does not run it
NOT_RUN = {
    "git clone": "the reader's own clone",
    "python3 -m venv": "set-up of a fresh machine (.ci/run does it with scripts/setup)",
    "pip install": "installs packages (.ci/run does it with scripts/setup)",
    "./scripts/setup": "the README's two commands: .ci/run runs exactly these",
    "mkdocs build": "tests/test_docs_site.py builds the site",
    "vllm serve": "vLLM needs a CUDA GPU and is not installable on this project's machines",
    "imprint run --model openai-logprobs:": (
        "needs a server answering prompt log-probs: tests/test_served_docs_commands.py runs the "
        "llama-cpp-python one against the real server; the vLLM one needs a GPU"
    ),
    "python -m llama_cpp.server": "a server: tests/test_served_docs_commands.py starts this line",
    "HF_HUB_OFFLINE=1 transformers serve": (
        "a server: tests/test_served_docs_commands.py starts this line"
    ),
    "imprint run --api-base http://127.0.0.1:8000/v1 --model my-model": (
        "tests/test_http_real_server.py runs this command against a real transformers serve "
        "(test_the_served_black_box_command_is_the_one_the_real_server_test_runs checks it is "
        "the same)"
    ),
    "export OPENAI_API_KEY": "a secret of the reader's own",
    "nice -n 10 .venv/bin/python benchmarks/": (
        "a benchmark that makes a recipe's table (tens of minutes of simulation): benchmarks/ "
        "are run by hand, as the recipe says"
    ),
    "imprint run --api-base https://api.example.com": "a hosted API (placeholder address)",
}

#: placeholder on a page -> its tiny stand-in (keys of ``_Tiny.paths``)
PLACEHOLDERS = {
    "./my-finetune": "model",
    "HuggingFaceTB/SmolLM2-135M": "ref",
    "EleutherAI/pythia-160m": "model",
    "smollm2-135m": "model",
    "my-texts.jsonl": "texts",
    "my-documents.jsonl": "documents",
}

#: a recipe's command that needs a GPU -> why, and the spec its local stand-in takes instead
STAND_INS = {
    "imprint run --model vllm:EleutherAI/pythia-160m": (
        "vLLM in-process needs a CUDA GPU (not installable here): the same command line on the "
        "tiny hf model",
        "vllm:EleutherAI/pythia-160m",
    ),
}

#: a size a recipe says may change (in a "**Sizes you may change:**" paragraph under its block)
#: -> its value here; ADDED: a size a command may leave at its default, given here when declared
TINY = {"--n-per-label": "4", "--n": "40", "--seq-words": "12", "--max-seqs": "3",
        "--bootstrap": "20"}  # fmt: skip
ADDED = ("--bootstrap",)
SIZES_SAID = "**Sizes you may change:**"

#: the quickstart pages' cuts (not recipes: issue 37's rule is the recipes')
QUICKSTART_EXTRA = {
    "run": ["--bootstrap", "20", "--device", "cpu", "--no-blind"],
    "blind": ["--bootstrap", "20", "--folds", "2", "--baseline", "date_detector"],
}
QUICKSTART_SIZES = [
    (r"--n-per-label \d+", "--n-per-label 4"),
    (r"imprint blind --data wikimia:32", "imprint blind --data my-texts.jsonl"),
]


def bash_commands(page: Path) -> list[str]:
    """The commands of a page's ``bash`` blocks: continuation lines joined, comments and blank
    lines dropped."""
    return [command for commands, _ in bash_blocks(page) for command in commands]


def bash_blocks(page: Path) -> list[tuple[list[str], set[str]]]:
    """Each ``bash`` block of a page: its commands, and the options the page says may change
    there (the flags in backticks of a ``**Sizes you may change:**`` paragraph between this
    block and the next)."""
    parts = re.split(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    blocks = []
    for block, after in zip(parts[1::2], parts[2::2], strict=True):
        commands = []
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(" ".join(shlex.quote(w) for w in words))
        said = re.findall(re.escape(SIZES_SAID) + r"(.*?)(?:\n\n|$)", after, re.S)
        blocks.append((commands, {f for p in said for f in re.findall(r"`(--[a-z-]+)`", p)}))
    return blocks


def yaml_files(page: Path) -> dict[str, str]:
    blocks = re.findall(r"```yaml\n# (\S+\.yaml)\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    return dict(blocks)


class _Tiny:
    """The stand-ins: a tiny model and reference, WikiMIA texts, documents, local MIMIR files."""

    def __init__(self, root: Path, model: Path, ref: Path) -> None:
        rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()]
        members = [r["input"] for r in rows if r["label"] == 1]
        nonmembers = [r["input"] for r in rows if r["label"] == 0]
        texts = root / "texts.jsonl"
        picked = [(t, 1) for t in members[:8]] + [(t, 0) for t in nonmembers[:8]]
        texts.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in picked))
        long_rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length128.jsonl").open()]
        docs = [r for r in long_rows if r["label"] == 1][:6]
        docs += [r for r in long_rows if r["label"] == 0][:6]
        documents = root / "documents.jsonl"
        documents.write_text(
            "".join(json.dumps({"text": r["input"], "label": r["label"]}) + "\n" for r in docs)
        )
        self.data_dir = root / "data"
        self.members, self.nonmembers = members[8:14], nonmembers[8:14]
        self.paths = {"model": model, "ref": ref, "texts": texts, "documents": documents}

    def place_benchmark(self, name: str) -> None:
        """Local files of a two-file benchmark (e.g. MIMIR), from WikiMIA texts."""
        from imprint.data.catalog import get_benchmark

        for file in get_benchmark(name).files:
            path = self.data_dir / file.local
            path.parent.mkdir(parents=True, exist_ok=True)
            texts = self.members if file.role == "member" else self.nonmembers
            path.write_text("".join(json.dumps(t) + "\n" for t in texts))

    def command(self, command: str) -> list[str]:
        """A quickstart page's command, cut (``QUICKSTART_SIZES``, ``QUICKSTART_EXTRA``)."""
        for pattern, tiny in QUICKSTART_SIZES:
            command = re.sub(pattern, tiny, command)
        words = self.placed(shlex.split(command)[1:])  # without "imprint"
        return [*words, *QUICKSTART_EXTRA.get(words[0], [])]

    def recipe_command(self, command: str, sizes: set[str]) -> list[str]:
        """A recipe's command as written: its placeholders (and a GPU-only spec, see
        ``STAND_INS``) replaced, and only the sizes the recipe says may change made tiny."""
        words = shlex.split(command)[1:]
        for prefix, (_, spec) in STAND_INS.items():
            if command.startswith(prefix):
                words[words.index(spec)] = str(self.paths["model"])
        for flag in sorted(sizes):
            if flag in words:
                words[words.index(flag) + 1] = TINY[flag]
            elif flag in ADDED:
                words += [flag, TINY[flag]]
        return self.placed(words)

    def placed(self, words: list[str]) -> list[str]:
        for i, word in enumerate(words):
            for placeholder, key in PLACEHOLDERS.items():  # also inside base=SPEC
                if placeholder in word:
                    words[i] = word.replace(placeholder, str(self.paths[key]))
        return words

    def grid(self, text: str) -> str:
        """A recipe's grid file with its first two models (made tiny) and benchmarks, sizes cut."""
        spec: dict[str, Any] = yaml.safe_load(text)
        spec["models"], spec["benchmarks"] = spec["models"][:2], spec["benchmarks"][:2]
        for model in spec["models"]:
            model["model"] = str(self.paths["model"])
        spec["refs"] = {name: str(self.paths["ref"]) for name in spec.get("refs", {})}
        spec["data"] = {**spec.get("data", {}), "n_per_label": 4}
        settings = spec.setdefault("settings", {})
        settings.update(device="cpu", dtype="float32", n_bootstrap=20, blind=False)
        for bench in spec["benchmarks"]:
            self.place_benchmark(bench["data"])
        return yaml.safe_dump(spec, sort_keys=False)


def _why_not_run(command: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if command.startswith(prefix)), None)


def test_every_line_of_a_recipe_block_is_run_or_named_as_not_run() -> None:
    for page in PAGES:
        for command in bash_commands(page):
            assert command.startswith("imprint ") or _why_not_run(command), (page.name, command)
    used = {p for page in PAGES for c in bash_commands(page) for p in NOT_RUN if c.startswith(p)}
    assert used == set(NOT_RUN), f"NOT_RUN entries no page has: {set(NOT_RUN) - used}"


def _invoke(page: Path, command: str, args: list[str]) -> None:
    from imprint.cli import app

    started = time.perf_counter()
    result = CliRunner().invoke(app, args)
    print(f"{time.perf_counter() - started:6.1f} s  {command[:100]}")  # pytest -s
    assert result.exit_code == 0, f"{page.name}: {command}\n{result.output[-3000:]}"
    if "--out" in args and args[0] != "experiment":
        out = Path(args[args.index("--out") + 1])
        assert out.exists(), f"{page.name}: {command} wrote no {out}"


def test_the_quickstart_pages_run_at_tiny_scale(
    tiny_model_dir: Path, tiny_ref_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = _Tiny(tmp_path, tiny_model_dir, tiny_ref_dir)
    ran: dict[str, int] = {}
    done: set[str] = set()
    for page in QUICKSTART_PAGES:
        here = tmp_path / page.stem  # each page from a fresh folder, as a reader would
        here.mkdir()
        monkeypatch.chdir(here)
        for command in bash_commands(page):
            if _why_not_run(command):
                continue
            ran[page.name] = ran.get(page.name, 0) + 1
            if command in done:  # the README repeats the quickstart's commands: run once
                continue
            done.add(command)
            _invoke(page, command, tiny.command(command))
    assert set(ran) == {"quickstart.md", "README.md"}, f"pages run: {ran}"


@pytest.mark.parametrize("page", RECIPES, ids=lambda page: page.stem)
def test_a_recipe_runs_as_written(
    page: Path,
    tiny_model_dir: Path,
    tiny_ref_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its commands from a fresh folder, in order, changed only where the recipe says they may
    be (placeholders, declared sizes, a GPU-only spec's local stand-in)."""
    tiny = _Tiny(tmp_path, tiny_model_dir, tiny_ref_dir)
    monkeypatch.setenv("IMPRINT_DATA_DIR", str(tiny.data_dir))
    here = tmp_path / page.stem
    here.mkdir()
    monkeypatch.chdir(here)
    for name, text in yaml_files(page).items():  # a GPU grid's CPU stand-in (see the page)
        (here / name).write_text(tiny.grid(text))
    ran = 0
    for commands, sizes in bash_blocks(page):
        for command in commands:
            if not _why_not_run(command):
                _invoke(page, command, tiny.recipe_command(command, sizes))
                ran += 1
    assert ran, f"{page.name}: no command ran"


def test_a_recipe_changes_only_its_placeholders_and_the_sizes_it_declares() -> None:
    """What ``test_a_recipe_runs_as_written`` changes is said on the page: each size in a
    "Sizes you may change" paragraph is one the test can shrink and one its block's commands
    give (or ``ADDED``); each placeholder replaced is named in a paragraph about placeholders;
    each stand-in's page says that command is GPU only."""
    for page in RECIPES:
        text = page.read_text(encoding="utf-8")
        about_placeholders = [p for p in text.split("\n\n") if "placeholder" in p]
        for commands, sizes in bash_blocks(page):
            assert sizes <= set(TINY), (page.name, sizes - set(TINY))
            for flag in sizes - set(ADDED):
                assert any(flag in shlex.split(c) for c in commands), (page.name, flag)
            for command in commands:
                if _why_not_run(command) or any(command.startswith(s) for s in STAND_INS):
                    continue
                for placeholder in PLACEHOLDERS:
                    if placeholder in command:
                        named = any(f"`{placeholder}`" in p for p in about_placeholders)
                        assert named, f"{page.name}: {placeholder} is not named a placeholder"
    for prefix in STAND_INS:
        pages = [p for p in RECIPES if any(c.startswith(prefix) for c in bash_commands(p))]
        assert pages and all("**GPU only:**" in p.read_text(encoding="utf-8") for p in pages)


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_python_examples_run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [b for page in PYTHON_PAGES for b in python_blocks(page)]
    assert blocks
    for block in blocks:
        code = block.replace('"smollm2-135m"', repr(str(tiny_model_dir)))
        code = re.sub(r"n_per_label=\d+", "n_per_label=6, n_bootstrap=20, progress=False", code)
        exec(compile(code, "<docs example>", "exec"), {"__name__": "docs_example"})


def test_the_served_black_box_command_is_the_one_the_real_server_test_runs() -> None:
    from test_http_real_server import _docs_command

    page = ROOT / "docs" / "recipes" / "served.md"
    ours = [c for c in bash_commands(page) if c.startswith("imprint run --api-base http://127.")]
    assert len(ours) == 1
    assert shlex.split(ours[0]) == _docs_command()
