"""DUCI (dataset usage cardinality inference) on known-fraction games: targets fine-tuned on 0,
25, 50 and 100 % of a document set, K = 4 reference models on paired halves, the estimate and
its 95 % two-way bootstrap interval (documents, reference models and a stand-in for the
target's own training run: :func:`imprint.documents.duci.duci`) against the truth
(:mod:`imprint.game.duci_game`).

Default model: the test suite's tiny random Llama (2 layers, 320-token BPE; built in a temporary
folder), documents of 12 random words, so it finishes on a busy 2-core CPU (about a minute a
seed); ``--model smollm2-135m`` runs the real model (much slower on CPU). Several seeds (a new
document set, new halves and new targets each) show the spread the interval should cover.

Run: nice -n 15 python benchmarks/bench_duci.py [--seeds 3] [--documents 40] [--model SPEC]
     nice -n 15 python benchmarks/bench_duci.py --reanalyse bench-duci.json  (no training: the
     saved signals of an earlier run, estimated again with today's code)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    import torch

    from imprint.game.duci_game import fraction_game

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model spec (default: a tiny random one)")
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("bench-duci.json"))
    parser.add_argument("--reanalyse", type=Path, default=None, help="an earlier run's --out")
    args = parser.parse_args()
    if args.reanalyse is not None:
        rows = [reestimate(r, args.bootstrap) for r in json.loads(args.reanalyse.read_text())]
        print(f"re-estimated from {args.reanalyse}; {args.bootstrap} resamples")
        report(rows)
        args.out.write_text(json.dumps(rows, indent=1))
        return
    torch.set_num_threads(1)  # tiny models: one thread beats oversubscribed cores
    spec = args.model
    if spec is None:
        sys.path.insert(0, str(REPO / "tests"))
        from conftest import make_tiny_model

        spec = str(make_tiny_model(Path(tempfile.mkdtemp()) / "tiny"))
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t0 = time.perf_counter()
        for r in fraction_game(
            spec, n_documents=args.documents, words=args.words, epochs=args.epochs, lr=args.lr,
            seed=seed, n_bootstrap=args.bootstrap,
        ):  # fmt: skip
            r["seed"] = seed
            rows.append(r)
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(f"model {args.model or 'tiny random Llama'}; {args.documents} documents, K = 4, "
          f"{args.epochs} epochs, lr {args.lr}, {args.bootstrap} resamples")  # fmt: skip
    report(rows)
    args.out.write_text(json.dumps(rows, indent=1))


def reestimate(row: dict, n_bootstrap: int) -> dict:
    """A saved game row estimated again from its signals (documents first, then population)."""
    from imprint.documents.duci import duci_from_signals

    sig = row["signals"]
    target, refs, member = (np.asarray(sig[x]) for x in ("target", "refs", "member"))
    n = member.shape[1]
    r = duci_from_signals(
        target[:n], refs[:, :n], member, target[n:], refs[:, n:],
        n_bootstrap=n_bootstrap, seed=row["seed"],
    ).to_dict()  # fmt: skip
    keys = ("estimate", "interval", "naive", "tpr", "fpr", "a", "degenerate_share")
    return {**row, **{x: r[x] for x in keys}}


def report(rows: list[dict]) -> None:
    """The per-game table, the coverage, and the summary per truth."""
    print("\n| seed | truth | estimate | 95 % interval | covers | naive | TPR | FPR | no rates |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["interval"]
        covers = "yes" if lo <= r["truth"] <= hi else "no"
        print(
            f"| {r['seed']} | {r['truth']:.2f} | {r['estimate']:.3f} | [{lo:.3f}, {hi:.3f}] | "
            f"{covers} | {r['naive']:.3f} | {r['tpr']:.3f} | {r['fpr']:.3f} | "
            f"{r.get('degenerate_share', float('nan')):.1%} |"
        )
    n_cover = sum(r["interval"][0] <= r["truth"] <= r["interval"][1] for r in rows)
    print(f"\ncovered {n_cover} of {len(rows)}")
    print(
        "\n| truth | seeds | covered | mean estimate | mean error | mean abs error | mean width |"
    )
    print("|---|---|---|---|---|---|---|")
    for truth in sorted({r["truth"] for r in rows}):
        these = [r for r in rows if r["truth"] == truth]
        est = np.array([r["estimate"] for r in these])
        lo, hi = np.array([r["interval"] for r in these]).T
        print(
            f"| {truth:.2f} | {len(these)} | {int(((lo <= truth) & (truth <= hi)).sum())} | "
            f"{est.mean():.3f} | {(est - truth).mean():+.3f} | {np.abs(est - truth).mean():.3f} | "
            f"{(hi - lo).mean():.3f} |"
        )


if __name__ == "__main__":
    main()
