"""Each recipe of docs/recipes run at its documented size, as a reader would, timed (issue 37).

The commands are read from the pages' ``bash`` blocks (as ``tests/test_docs_recipes.py`` reads
them) and run unchanged through ``.venv/bin/imprint`` in a fresh folder with an empty store, except
for the recipes' placeholders, which are replaced by offline stand-ins:

- ``./my-finetune`` and ``EleutherAI/pythia-160m`` -> ``smollm2-135m`` (135 M parameters, about
  the size of the models the recipes name);
- ``HuggingFaceTB/SmolLM2-135M`` (the fine-tune's base) -> ``smollm2-135m`` with every weight
  moved by seeded noise (0.1 % of its scale), saved as a folder: another model of the base's size
  and tokenizer (``ez_mia`` and ``wbc`` compare the two token by token, so a base with another
  tokenizer is refused), whose passes the target's store entries cannot answer;
- ``my-texts.jsonl`` -> every WikiMIA-32 text (387 members, 389 non-members);
- ``my-documents.jsonl`` -> 10 member and 10 non-member documents of up to 5,000 words (WikiMIA
  texts of one label joined, longest first): 25 sequences of 200 words each, the recipe's cap.

Commands the recipe marks as needing a GPU or a server (``tests/test_docs_recipes.py``'s
``NOT_RUN`` and ``STAND_INS``: the test runs the latter on a tiny local model, which says nothing
about the recipe's time) are listed with the reason, not run. A command that fails is reported
with its last output line and the benchmark goes on. Prints one line per command (wall and CPU
seconds) and a total per recipe, with the machine's load average, and writes
``OUT/bench_recipes.json``.

Run: python benchmarks/bench_recipes.py [--only audit-finetuned] [--out /tmp/bench-recipes]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import load_rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_docs_recipes import (  # noqa: E402  (the test's parser and its reasons)
    STAND_INS,
    _why_not_run,
    bash_commands,
)

#: the recipes' placeholders -> their offline stand-ins (see the module docstring)
MODELS = {
    "./my-finetune": "smollm2-135m",
    "HuggingFaceTB/SmolLM2-135M": "BASE_STAND_IN",  # made by base_stand_in()
    "EleutherAI/pythia-160m": "smollm2-135m",
}
#: recipes none of whose runs can run here, and why
WHOLE_PAGE_NOT_HERE = {
    "mimir-pythia.md": "the grid asks for a CUDA GPU and five Pythia models from the hub",
}


def write_texts(path: Path) -> Path:
    rows = load_rows(32)
    path.write_text("".join(json.dumps({"text": r["input"], "label": r["label"]}) + "\n"
                            for r in rows))  # fmt: skip
    return path


def write_documents(path: Path, per_set: int = 10, words: int = 5000) -> Path:
    """``per_set`` documents per label of up to ``words`` words: WikiMIA texts of that label
    joined, the longest files first."""
    lines = []
    for label in (1, 0):
        texts = [
            r["input"] for n in (256, 128, 64, 32) for r in load_rows(n) if r["label"] == label
        ]
        document: list[str] = []
        for text in texts:
            document += text.split()
            if len(document) >= words:
                lines.append({"text": " ".join(document[:words]), "label": label})
                document = []
            if sum(d["label"] == label for d in lines) == per_set:
                break
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def base_stand_in(folder: Path) -> Path:
    """``smollm2-135m`` with seeded noise on every weight (see the module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from imprint.backends.models import materialize, resolve_model

    source = materialize(resolve_model("smollm2-135m")).location
    model = AutoModelForCausalLM.from_pretrained(source)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for weight in model.parameters():
            noise = torch.randn(weight.shape, generator=generator)
            weight.add_(noise * 1e-3 * weight.abs().mean())
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def stand_in(command: str, files: dict[str, Path]) -> list[str]:
    words = shlex.split(command)
    for i, word in enumerate(words):
        for placeholder, model in MODELS.items():
            word = word.replace(placeholder, str(files.get(model, model)))
        for placeholder, path in files.items():
            word = word.replace(placeholder, str(path))
        words[i] = word
    return words


def run_page(page: Path, work: Path, files: dict[str, Path]) -> dict[str, Any]:
    here = work / page.stem
    here.mkdir(parents=True)
    env = {**os.environ, "IMPRINT_CACHE_DIR": str(here / "store"), "HF_HUB_OFFLINE": "1"}
    imprint = str(ROOT / ".venv" / "bin" / "imprint")
    steps, total, total_cpu = [], 0.0, 0.0
    for command in bash_commands(page):
        why = _why_not_run(command) or next(
            (reason for prefix, (reason, _) in STAND_INS.items() if command.startswith(prefix)),
            None,
        )
        if why:
            steps.append({"command": command, "not_run": why})
            print(f"  not run  {command[:90]}  ({why})", flush=True)
            continue
        words = stand_in(command, files)
        load = os.getloadavg()[0]
        cpu_before = _children_cpu_s()
        started = time.perf_counter()
        done = subprocess.run([imprint, *words[1:]], cwd=here, env=env, capture_output=True,
                              text=True)  # fmt: skip
        seconds = time.perf_counter() - started
        cpu = _children_cpu_s() - cpu_before
        total += seconds
        total_cpu += cpu
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
        steps.append({"command": command, "seconds": round(seconds, 1), "rc": done.returncode,
                      "cpu_seconds": round(cpu, 1), "load_before": round(load, 2),
                      "last_line": last[0][:300]})  # fmt: skip
        state = "ok" if done.returncode == 0 else f"FAILED rc {done.returncode}: {last[0][:200]}"
        print(f"  {seconds:7.1f} s ({cpu:7.1f} CPU s)  load {load:5.2f}  {command[:80]}  {state}",
              flush=True)  # fmt: skip
    load = os.getloadavg()[0]
    print(f"{page.name}: {total / 60:.1f} min in all, {total_cpu / 60:.1f} CPU min (load "
          f"{load:.2f} at the end)", flush=True)  # fmt: skip
    return {"steps": steps, "minutes": round(total / 60, 2),
            "cpu_minutes": round(total_cpu / 60, 2), "load_end": round(load, 2)}  # fmt: skip


def _children_cpu_s() -> float:
    """User + system CPU seconds of the finished child processes: the work itself, which a
    busy machine stretches less than the wall time."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="one recipe (its file name without .md)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-recipes"))
    args = parser.parse_args()
    work = args.out / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True)
    files = {"my-texts.jsonl": write_texts(work / "texts.jsonl"),
             "my-documents.jsonl": write_documents(work / "documents.jsonl"),
             "BASE_STAND_IN": base_stand_in(work / "base-stand-in")}  # fmt: skip
    results: dict[str, Any] = {"cpus": os.cpu_count()}
    for page in sorted((ROOT / "docs" / "recipes").glob("*.md")):
        if args.only and page.stem != args.only:
            continue
        print(f"{page.name}:", flush=True)
        if page.name in WHOLE_PAGE_NOT_HERE:
            print(f"  not run: {WHOLE_PAGE_NOT_HERE[page.name]}", flush=True)
            results[page.name] = {"not_run": WHOLE_PAGE_NOT_HERE[page.name]}
            continue
        results[page.name] = run_page(page, work, files)
    (args.out / "bench_recipes.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out / 'bench_recipes.json'}")


if __name__ == "__main__":
    main()
