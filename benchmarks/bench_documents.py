"""Document- and dataset-level inference on a document privacy game built from SmolLM2-135M.

    .venv/bin/python benchmarks/bench_documents.py --out /tmp/bench-docs

1. Builds (or reuses) a document game: 32 WikiMIA-256 articles (the pool's labels ignored) cut
   into 10 sequences x 25 words, 16 members (every sequence fine-tuned on, 2 epochs, lr 2e-5),
   16 non-members, plus 16 held-out documents never trained (a second unseen set). Sampling
   480-word documents from the model instead took over 70 minutes on this shared CPU.
2. ``imprint run --unit document --doc-field doc`` on the game: sequence-level and
   document-level AUC of each attack with intervals resampled over documents.
3. The same run on the two unseen sets (non-members labelled 1, held-out labelled 0): dataset
   inference there is the false-positive check; its passes for the non-members come from the
   cache.
4. Dataset inference repeated with seeds 0-19 on both runs' stored sequence scores: members
   flagged (p < 0.05) and unseen sets not flagged, counted.

Prints the figures and writes ``OUT/bench_documents.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from imprint.documents import dataset_inference
from imprint.documents.run_hook import DocumentOptions
from imprint.game.build import build_game
from imprint.game.config import GameConfig
from imprint.run import RunConfig, execute_run

ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "ref")
WIKIMIA_256 = Path(__file__).resolve().parents[2] / "shared/data/wikimia/WikiMIA_length256.jsonl"
GAME = {
    "pool": str(WIKIMIA_256),
    "pool_size": 32,
    "words": 25,
    "doc_sequences": 10,
    "heldout": 16,
    "canary_repetitions": (),
    "epochs": 2,
    "lr": 2e-5,
    "max_length": 128,
}


def _unseen_file(game: Path, out: Path) -> Path:
    """The non-member documents (label 1) and the held-out documents (label 0): two unseen sets."""
    rows = []
    for name, label in (("data.jsonl", 1), ("heldout.jsonl", 0)):
        for line in (game / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if name == "data.jsonl" and row["label"] != 0:
                continue  # members stay out
            rows.append({"id": row["id"], "text": row["text"], "label": label, **row["meta"]})
    path = out / "unseen.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(model: str, data: str, out: Path, cache: Path, seed: int) -> Any:
    return execute_run(
        RunConfig(
            model=model,
            data=data,
            out=out,
            attacks=ATTACKS,
            refs=(("base", "smollm2-135m"),),
            documents=DocumentOptions(doc_field="doc", max_seqs=10),  # rows stay whole
            cache=cache,
            seed=seed,
            overwrite=True,
        )
    )


def _seeds(run: Path, features: list[str], n: int = 20) -> list[float]:
    """Dataset-inference p-values (label 1 = suspect, label 0 = validation) for seeds 0..n-1."""
    table = pq.read_table(run / "scores.parquet").to_pandas()
    docs = np.array([json.loads(m)["doc_id"] for m in table["meta"]])
    x = table[features].to_numpy(dtype=float)
    s = table["label"].to_numpy() == 1
    return [
        dataset_inference(x[s], x[~s], docs[s], docs[~s], seed=seed).p_value for seed in range(n)
    ]


def _figures(metrics: Any) -> dict[str, Any]:
    docs = metrics.documents
    rows = {}
    for name, row in docs.rows.items():
        rows[name] = {
            "document_auc": row.metrics.auc.to_dict(),
            "sequence_auc": None if row.sequence_auc is None else row.sequence_auc.to_dict(),
            "gain": None if row.gain is None else row.gain.to_dict(),
        }
    return {"rows": rows, "dataset": docs.dataset, "notes": list(docs.notes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-docs"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "signals.sqlite"
    t0 = time.time()
    game = build_game(GameConfig(seed=args.seed, **GAME), out=args.out / "game")
    t_game = time.time() - t0
    members = _run(f"game:{game}", f"game:{game}", args.out / "run-members", cache, args.seed)
    unseen_data = _unseen_file(game, args.out)
    unseen = _run(f"game:{game}", str(unseen_data), args.out / "run-unseen", cache, args.seed)
    features = members.metrics.documents.dataset["features"]
    p_members = _seeds(args.out / "run-members", features)
    p_unseen = _seeds(args.out / "run-unseen", features)
    free = [f for f in features if not f.startswith("ref")]  # no reference model
    p_members_free = _seeds(args.out / "run-members", free)
    p_unseen_free = _seeds(args.out / "run-unseen", free)
    summary = {
        "game": str(game),
        "game_config": GAME,
        "elapsed_s": {"game": round(t_game, 1), "total": round(time.time() - t0, 1)},
        "members_run": _figures(members.metrics),
        "unseen_run": _figures(unseen.metrics),
        "sequence_auc_sequence_bootstrap": {
            k: v.auc.to_dict() for k, v in members.metrics.attacks.items()
        },
        "seeds": {
            "members_flagged": int(sum(p < 0.05 for p in p_members)),
            "unseen_not_flagged": int(sum(p >= 0.05 for p in p_unseen)),
            "n": len(p_members),
            "p_members": p_members,
            "p_unseen": p_unseen,
        },
        "seeds_reference_free": {
            "features": free,
            "members_flagged": int(sum(p < 0.05 for p in p_members_free)),
            "unseen_not_flagged": int(sum(p >= 0.05 for p in p_unseen_free)),
            "p_members": p_members_free,
            "p_unseen": p_unseen_free,
        },
    }
    (args.out / "bench_documents.json").write_text(json.dumps(summary, indent=2, default=str))
    _print(summary)


def _print(summary: dict[str, Any]) -> None:
    def fmt(iv: dict[str, Any] | None) -> str:
        if not iv or iv["estimate"] is None:
            return "-"
        return f"{iv['estimate']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]"

    print(f"game {summary['game']}  elapsed {summary['elapsed_s']}")
    for name, row in summary["members_run"]["rows"].items():
        print(
            f"{name:<58} doc {fmt(row['document_auc'])}  seq {fmt(row['sequence_auc'])}  "
            f"gain {fmt(row['gain'])}"
        )
    ds = summary["members_run"]["dataset"]
    print("members vs non-members:", ds.get("members_vs_nonmembers", {}).get("p_value"))
    print("two non-member halves:", (ds.get("false_positive_check") or {}).get("p_value"))
    fp = summary["unseen_run"]["dataset"].get("members_vs_nonmembers", {})
    print("unseen A vs unseen B:", fp.get("p_value"))
    print("documents needed:", ds.get("documents_needed"))
    for run in ("members_run", "unseen_run"):  # the report's own three-state verdict
        found = summary[run]["dataset"].get("verdict") or {}
        print(f"{run} verdict:", found.get("state"), "; ".join(found.get("reasons", [])))
    for key in ("seeds", "seeds_reference_free"):
        seeds = summary[key]
        print(
            f"{key}: members flagged {seeds['members_flagged']}/20 (max p "
            f"{max(seeds['p_members']):.3g}), unseen not flagged {seeds['unseen_not_flagged']}/20 "
            f"(min p {min(seeds['p_unseen']):.3g})"
        )


if __name__ == "__main__":
    main()
