"""Same results before and after a change: run the same commands with two source trees, compare.

    python benchmarks/same_results.py --before 2df37b6 [--after HEAD] [--quick]

Each tree is checked out with ``git worktree`` under ``--work`` and run as
``PYTHONPATH=<tree>/src python -m imprint ...`` with fresh caches, both trees at once, one thread
each (so the two share the two cores and neither's floating-point order depends on the other's
thread count). Every score column of every ``scores.parquet`` is then compared: max |difference|,
NaNs at the same rows, and whether ``metrics.json`` is byte-identical. ``--quick`` runs SimMIA at
N = 10 and 20 texts per label instead of the default N and 30 per label.

``--bench bench_core.py --bench bench_attacks.py ...`` instead runs each tree's own copy of those
benchmarks, alternating before / after ``--rounds`` times (one at a time, all threads), and
prints every output line tagged with its tree, so the ratios are read side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands(game: Path | None, quick: bool) -> dict[str, list[str]]:
    """The runs to repeat with each tree, by name."""
    per_label = "20" if quick else "30"
    simmia = ["--param", "simmia.n_samples=10"] if quick else []
    runs = {
        "wikimia": ["run", "--model", "smollm2-135m", "--data", "wikimia:32"]
        + ["--n-per-label", per_label, "--attacks", "all,samia,simmia,petal", *simmia],
    }
    if game is not None:
        runs["game"] = ["run", "--model", f"game:{game}", "--data", f"game:{game}"]
        runs["game"] += ["--references", str(game), "--attacks", "all,lira,rmia"]
    # batch sizes pinned at the CPU default: left free, each tree sizes its batches from the
    # throughput it measures, and a different padding changes float32 sums in the last bits
    # (tiny model, 2026-12-07: 15 columns off by <= 6.8e-4 free, identical pinned)
    return {name: args + ["--token-budget", "4096"] for name, args in runs.items()}


def checkout(rev: str, work: Path) -> Path:
    """A worktree of ``rev``: a fixed tree, so edits made meanwhile here do not leak in."""
    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = work / f"tree-{rev}"
    if not tree.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True
        )
    return tree


def start(tree: Path, tag: str, runs: dict[str, list[str]], work: Path) -> subprocess.Popen[bytes]:
    """Run every command with one tree, one after another, in one background shell."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    lines = []
    for name, args in runs.items():
        out, cache = work / f"{tag}-{name}", work / f"{tag}-{name}.sqlite"
        argv = [
            sys.executable,
            "-m",
            "imprint",
            *args,
            "--cache",
            str(cache),
            "--out",
            str(out),
            "--overwrite",
        ]
        lines.append(
            " ".join(f"'{a}'" for a in argv) + f" > '{out}.log' 2>&1 || echo 'FAILED {name}'"
        )
    return subprocess.Popen(["bash", "-c", " && ".join(lines) if lines else "true"], env=env)


def compare(before: Path, after: Path) -> dict[str, object]:
    """Column-by-column differences of two runs' scores.parquet, and metrics.json equality."""
    import numpy as np
    import pandas as pd

    a, b = pd.read_parquet(before / "scores.parquet"), pd.read_parquet(after / "scores.parquet")
    cols = sorted(set(a.columns) | set(b.columns))
    only = sorted(set(a.columns) ^ set(b.columns))
    worst, nan_mismatch, text_differs = 0.0, [], []
    per_col = {}
    for col in cols:
        if col in only:
            continue
        if not pd.api.types.is_numeric_dtype(a[col]):
            if not a[col].astype(str).equals(b[col].astype(str)):
                text_differs.append(col)
            continue
        x, y = a[col].to_numpy(float), b[col].to_numpy(float)
        if len(x) != len(y) or (np.isnan(x) != np.isnan(y)).any():
            nan_mismatch.append(col)
            continue
        ok = ~np.isnan(x)
        diff = float(np.max(np.abs(x[ok] - y[ok]))) if ok.any() else 0.0
        per_col[col], worst = diff, max(worst, diff)
    same_metrics = (before / "metrics.json").read_bytes() == (after / "metrics.json").read_bytes()
    return {
        "rows": [len(a), len(b)],
        "score_columns": len(per_col),
        "max_abs_diff": worst,
        "columns_differing": {c: d for c, d in per_col.items() if d > 0},
        "columns_only_in_one": only,
        "nan_mismatch": nan_mismatch,
        "other_columns_differing": text_differs,
        "metrics_json_identical": same_metrics,
    }


def benchmarks(trees: dict[str, Path], names: list[str], rounds: int, extra: list[str]) -> None:
    """Each tree's copy of each benchmark, alternating trees so machine noise hits both alike."""
    for name in names:
        for round_ in range(rounds):
            for tag, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{tree / 'benchmarks'}"}
                argv = [sys.executable, str(tree / "benchmarks" / name), *extra]
                started = time.perf_counter()
                proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
                wall = time.perf_counter() - started
                load = os.getloadavg()[0]
                print(
                    f"## {name} round {round_ + 1} {tag} ({wall:.0f} s, load {load:.1f})",
                    flush=True,
                )
                for line in proc.stdout.splitlines():
                    print(f"{tag}: {line}", flush=True)
                if proc.returncode:
                    print(f"{tag}: FAILED rc={proc.returncode}: {proc.stderr[-800:]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision run first (e.g. 2df37b6)")
    parser.add_argument("--after", default="HEAD", help="git revision to compare")
    parser.add_argument("--game", type=Path, help="a game folder, run with its reference models")
    parser.add_argument("--work", type=Path, default=Path("/tmp/imprint-same-results"))
    parser.add_argument("--quick", action="store_true", help="SimMIA N = 10, 20 texts per label")
    parser.add_argument(
        "--bench", action="append", default=[], help="a benchmarks/ file to compare"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternations per benchmark")
    parser.add_argument("--bench-args", default="", help="arguments passed to every benchmark")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    shared = args.work / "shared"  # the benchmarks read ../shared beside their tree
    if not shared.exists():
        shared.symlink_to(REPO.parent / "shared")
    if args.bench:
        trees = {
            "before": checkout(args.before, args.work),
            "after": checkout(args.after, args.work),
        }
        benchmarks(trees, args.bench, args.rounds, args.bench_args.split())
        return
    runs = commands(args.game, args.quick)
    started = time.perf_counter()
    procs = [
        start(checkout(rev, args.work), tag, runs, args.work)
        for tag, rev in (("before", args.before), ("after", args.after))
    ]
    for proc in procs:
        proc.wait()
    report = {
        "before": args.before,
        "after": args.after,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    for name in runs:
        report[name] = compare(args.work / f"before-{name}", args.work / f"after-{name}")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
