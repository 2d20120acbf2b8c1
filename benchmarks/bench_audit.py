"""Privacy auditing on SmolLM2-135M games: no DP, DP epsilon 8 and DP epsilon 1, one run each.

Each game fine-tunes LoRA adapters (rank 8, attention and MLP projections) on ``--pool-size / 2``
WikiMIA texts (cut to 16 words) plus ``--canaries`` random-token canaries of 8 words, each in
with probability 1/2 by its own coin (Steinke et al. 2023's one-run design), for ``--epochs``
epochs; the DP games run DP-SGD (Opacus, Poisson sampling, clipping 1.0, RDP accountant,
delta 1e-5) at the same learning rate. ``imprint audit`` then scores the canaries with loss,
zlib, min_k and min_k_pp (5 score columns: zlib also gives zlib_char) and reports the one-run
bound of the best (column, number of guesses), every bound computed at beta / (5 columns x 5
guess counts) (Bonferroni), so the best holds at 95 %. Required: every DP game's bound <= its
claimed epsilon; the no-DP bound clearly positive.
Writes ``OUT/bench_audit.json`` and a table; games are cached (rebuilt only when changed).

Sized for a shared 2-core CPU (about 130 training sequences of ~20 tokens per game).

Run: python benchmarks/bench_audit.py [--canaries 200] [--pool-size 60] [--epochs 4] [--lr 3e-3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
POOL = REPO.parent / "shared" / "data" / "wikimia" / "WikiMIA_length64.jsonl"
SETTINGS: tuple[tuple[str, float | None], ...] = (
    ("no DP", None),
    ("DP eps 8", 8.0),
    ("DP eps 1", 1.0),
)
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def config(args: argparse.Namespace, dp_epsilon: float | None) -> Any:
    from imprint.game.config import GameConfig

    return GameConfig(
        model="smollm2-135m",
        pool=str(POOL),
        pool_size=args.pool_size,
        words=16,
        seed=args.seed,
        method="lora",
        epochs=args.epochs,
        lr=args.lr,
        batch_size=8,
        max_length=160,
        lora_targets=TARGETS,
        canary_repetitions=(1,),
        canaries_per_repetition=args.canaries,
        canary_generator="random",
        canary_words=8,
        canary_inclusion="bernoulli",
        heldout=0,
        # a few natural members beside the canaries (CPU time goes to training, not filler)
        max_canary_share=0.8,
        dp_epsilon=dp_epsilon,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=200)
    parser.add_argument("--pool-size", type=int, default=60)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench-audit")
    parser.add_argument("--only", choices=[n for n, _ in SETTINGS], help="build/audit one game")
    parser.add_argument("--progress", action="store_true", help="show training progress")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from rich.console import Console

    from imprint.audit.audit import audit_game
    from imprint.game.build import build_game

    console = Console()
    rows: list[dict[str, Any]] = []
    for name, eps in SETTINGS:
        if args.only and name != args.only:
            continue
        t0 = time.time()
        folder = build_game(config(args, eps), out=args.out / f"game-{name.replace(' ', '-')}",
                            device="cpu", console=console, progress=args.progress)  # fmt: skip
        built = time.time() - t0
        t1 = time.time()
        result = audit_game(folder, args.out / f"audit-{name.replace(' ', '-')}", overwrite=True,
                            run={"device": "cpu", "n_bootstrap": 100, "progress": False},
                            console=console)  # fmt: skip
        manifest = json.loads((folder / "game.json").read_text())
        rows.append({
            "setting": name,
            "claimed_epsilon": manifest.get("dp", {}).get("epsilon"),
            "target_epsilon": eps,
            "noise_multiplier": manifest.get("dp", {}).get("noise_multiplier"),
            **{k: v for k, v in result.to_dict().items() if k not in ("curves",)},
            "train_loss": manifest["train_loss"],
            "build_s": round(built, 1),
            "audit_s": round(time.time() - t1, 1),
        })  # fmt: skip
    checks = {
        "every DP bound <= claimed epsilon": all(
            r["epsilon_lower_bound"] <= r["claimed_epsilon"] for r in rows if r["target_epsilon"]
        ),
    }
    if any(not r["target_epsilon"] for r in rows):
        checks["no-DP bound clearly positive (> 0.5)"] = all(
            r["epsilon_lower_bound"] > 0.5 for r in rows if not r["target_epsilon"]
        )
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "checks": checks}
    name = f"bench_audit-{args.only.replace(' ', '-')}.json" if args.only else "bench_audit.json"
    (args.out / name).write_text(json.dumps(record, indent=2))
    console.print("\n| setting | claimed eps | lower bound (95 %) | attack | correct / guesses | "
                  "build s | audit s |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for r in rows:
        claimed = f"{r['claimed_epsilon']:.2f}" if r["claimed_epsilon"] else "-"
        console.print(
            f"| {r['setting']} | {claimed} | {r['epsilon_lower_bound']:.3f} | {r['attack']} | "
            f"{r['correct_guesses']} / {r['guesses']} | {r['build_s']} | {r['audit_s']} |"
        )
    for check, ok in checks.items():
        console.print(f"{'PASS' if ok else 'FAIL'}: {check}")


if __name__ == "__main__":
    main()
