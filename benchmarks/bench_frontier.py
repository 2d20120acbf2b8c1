"""The attack frontier on one privacy game of the demo's kind with K reference models.

Builds (or reuses) exactly ``imprint demo``'s game (SmolLM2-135M, 100 generated texts of 24
words + 10 held-out, random-token canaries 8 per repetition count 1/3/8, 2 epochs of full
fine-tuning at lr 2e-5; the same config hash, so a demo run's game is reused), trains K reference
models like the target on random halves of the 148 candidates (timed), and runs loss, ref[base],
min_k_pp, recall, lira (online, offline), rmia (online, offline), and ez_mia, wbc, informia
(token-level InfoRMIA), ramia (range MIA, 10 range samples per text), camia, qmia and probe
(fitted on the game's 10 held-out texts) when registered, through the run pipeline
(``--attacks a,b`` keeps only those). RMIA runs twice: z = the 10 held-out texts, and z = the
candidates. Prints AUC and TPR at the lowest resolvable FPR (5 % with 74 non-members), 1 % and
0.1 % FPR with 95 % bootstrap intervals and writes
them to ``OUT/frontier.json``. Sized for the shared 2-core CPU: the demo's pool gives 74
candidate non-members, too few to resolve 1 % FPR (100 needed) or 0.1 % (1,000): those columns
are then the TPR at zero false positives, and the table says so. ``--pool-size 200`` resolves
1 % at about twice the training cost. Reruns reuse the game, the reference models and the cache.

Run: python benchmarks/bench_frontier.py [--k 8] [--pool-size 100] [--heldout 10] [--attacks a,b]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

ORDER = ("loss", "ref[base]", "min_k_pp", "recall", "lira", "lira_offline", "rmia", "rmia_offline")
FPRS = (0.1, 0.05, 0.01, 0.001)


def game_config(pool_size: int, heldout: int, seed: int) -> Any:
    from imprint.game.config import GameConfig
    from imprint.game.demo import DEMO_DEFAULTS

    settings = {k: v for k, v in DEMO_DEFAULTS.items() if k != "epochs"}
    settings.update(pool_size=pool_size, heldout=heldout, seed=seed)
    return GameConfig(model="smollm2-135m", epochs=DEMO_DEFAULTS["epochs"][0], **settings)


def summarise(labels: np.ndarray, scores: np.ndarray, n_boot: int) -> dict[str, Any]:
    from imprint.metrics import bootstrap_metrics, unresolvable_reason

    keep = np.isfinite(scores)
    summary = bootstrap_metrics(
        labels[keep], scores[keep], n_resamples=n_boot, seed=0, fpr_bounds=FPRS
    )
    out: dict[str, Any] = {"dropped_nan": int((~keep).sum()), **summary.to_dict()}
    for bound in FPRS:
        reason = unresolvable_reason(bound, summary.n_nonmembers)
        if reason:
            out[f"note@{bound:g}"] = reason
    return out


def lowest_resolvable(n_nonmembers: int) -> float:
    """The lowest FPR of FPRS (in %) that ``n_nonmembers`` resolve (the one rule of
    :mod:`imprint.metrics.resolution`: at least 4/t of them)."""
    from imprint.metrics import unresolvable_reason

    ok = [t for t in FPRS if unresolvable_reason(t, n_nonmembers) is None]
    return 100 * min(ok) if ok else 100 * max(FPRS)


def cell(entry: dict[str, Any]) -> str:
    est, low, high = entry["estimate"], entry["low"], entry["high"]
    if est is None or math.isnan(est):
        return "n/a"
    return f"{est:.3f} [{low:.3f}, {high:.3f}]"


def run_attacks(game: Path, out: Path, attacks: list[str], params: dict[str, Any]) -> Any:
    from imprint.cli.flags import config_from_flags
    from imprint.run import execute_run

    config = config_from_flags(
        model=f"game:{game}",
        data=f"game:{game}",
        out=out,
        attacks=tuple(attacks),
        refs=(("base", "smollm2-135m"),),
        references=str(game),
        pools={"nonmembers": f"game-heldout:{game}"},
        params=params,
        n_bootstrap=100,  # the run's own report; the table below uses --bootstrap
        blind=False,
        overwrite=True,
        device="cpu",
    )
    return execute_run(config)


def main() -> None:
    from imprint.attacks import available_attacks
    from imprint.game import build_game
    from imprint.game.reference import build_references, reference_timings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--pool-size", type=int, default=100)
    parser.add_argument("--heldout", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("bench-frontier"))
    parser.add_argument("--attacks", default="", help="comma-separated subset of the attacks")
    args = parser.parse_args()

    t0 = time.perf_counter()
    game = build_game(game_config(args.pool_size, args.heldout, args.seed), device="cpu")
    game_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_references(game, args.k, device="cpu")
    refs_s = time.perf_counter() - t0
    train_s = reference_timings(game)
    attacks = ["loss", "ref", "min_k_pp", "recall", "lira", "rmia"]
    attacks += [a for a in ("ez_mia", "wbc", "informia", "ramia") if a in available_attacks()]
    # fitted on the run's held-out non-members (the game's 10 held-out texts: the pool below),
    # never on an evaluated text
    attacks += [a for a in ("camia", "qmia", "probe") if a in available_attacks()]
    if args.heldout < 20:  # qmia's head reads the text only from 20 texts; fewer are refused
        attacks.remove("qmia")
    if args.attacks:
        attacks = [a for a in attacks if a in args.attacks.split(",")]
    t0 = time.perf_counter()
    result = run_attacks(game, args.out / "run", attacks, {})
    run_s = time.perf_counter() - t0
    z_cand = run_attacks(
        game, args.out / "run-z-candidates", ["rmia"], {"rmia": {"population": "candidates"}}
    )
    labels = np.array([s.label for s in result.samples])
    columns = {c: result.scores[c] for c in result.scores}
    columns["rmia (z = candidates)"] = z_cand.scores["rmia"]
    columns["rmia_offline (z = candidates)"] = z_cand.scores["rmia_offline"]
    rows = {c: summarise(labels, v, args.bootstrap) for c, v in columns.items()}
    report = {
        "game": str(game),
        "k": args.k,
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "game_build_s": round(game_s, 1),
        "reference_build_wall_s": round(refs_s, 1),
        "reference_train_s": train_s,
        "run_s": round(run_s, 1),
        "metrics": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "frontier.json").write_text(json.dumps(report, indent=1))
    print_table(report)


def print_table(report: dict[str, Any]) -> None:
    rows = report["metrics"]
    names = [c for c in ORDER if c in rows] + [c for c in rows if c not in ORDER]
    print(
        f"game {report['game']}: {report['n_members']} members, {report['n_nonmembers']} "
        f"non-members, K = {report['k']} reference models"
    )
    trained = report["reference_train_s"]
    print(
        f"game build {report['game_build_s']} s; reference models: "
        f"{report['reference_build_wall_s']} s wall this call, {sum(trained.values()):.0f} s of "
        f"training in all ({len(trained)} models); attack run {report['run_s']} s"
    )
    low = lowest_resolvable(report["n_nonmembers"])
    print(
        f"\n| attack | AUC | TPR @ {low:g} % FPR (lowest resolvable) | TPR @ 1 % FPR | "
        "TPR @ 0.1 % FPR |\n|---|---|---|---|---|"
    )
    for c in names:
        r = rows[c]
        nan = f" ({r['dropped_nan']} NaN left out)" if r["dropped_nan"] else ""
        print(
            f"| {c}{nan} | {cell(r['auc'])} | {cell(r[f'tpr@{low:g}%'])} | "
            f"{cell(r['tpr@1%'])} | {cell(r['tpr@0.1%'])} |"
        )
    notes = {v for r in rows.values() for k, v in r.items() if k.startswith("note@")}
    for note in sorted(notes):
        print(f"note: {note}")
    best = max(names, key=lambda c: rows[c]["tpr@1%"]["estimate"] or -1.0)
    print(f"highest TPR at 1 % FPR: {best} ({cell(rows[best]['tpr@1%'])})")


if __name__ == "__main__":
    main()
