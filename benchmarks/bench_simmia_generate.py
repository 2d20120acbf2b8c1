"""SimMIA's local next-word law against generate-per-prefix (per-text tree vs naive generate).

Naive: for every word position i and both contexts (x_<i and P + x_<i), one HF ``generate`` call
with ``num_return_sequences=N`` (top-k 50, temperature 1, ``max_word_tokens`` new tokens) and the
first word of every continuation. Fast: :class:`imprint.requests.next_word.LocalNextWordSampler`
(one pass over x, batched token tree, P's KV cache). Same model (smollm2-135m), texts
(WikiMIA-32, half members), non-member shots P, N and sampling settings; defaults are SimMIA's
(N = 100, 7 shots, whole texts, 8 tokens per word).

Reported:
- speed: seconds per (text, context, word position) of each path and their ratio (target
  >= 50x). A naive call takes from seconds (x_<i) to minutes (P + x_<i, 100 x ~350 tokens) on a
  CPU, so it runs on a subset: ``--naive-texts`` texts, ``--naive-positions`` evenly spaced
  positions per text without P and ``--naive-prefixed-positions`` with P. Its cost per position
  is the mean over the two contexts of the mean call time (0 = every position).
- agreement on the positions both paths ran: Spearman of the word scores s(x_i | ctx), mean
  |s - s_ref| of each path against the exact-mode reference (s_ref: the exact next-word
  distribution under the same sampling law, branches below ``--min-mass`` dropped), and Spearman
  of per-text SimMIA scores, fast vs reference (and vs naive for texts the naive path covered).

Both paths tokenise each prompt as one string, BOS + encode(P + x_<i), as the remote path does.
``--non-latin`` replaces the WikiMIA texts by short Chinese and Russian texts written for this
benchmark (multi-byte characters split over byte tokens, no spaces between Chinese words).

The time against the floor (two plain passes) and against the per-text path is
``benchmarks/bench_simmia.py``; the batched tree the attack uses gives the per-text sampler's
draws (tests/test_simmia_batch.py), so the agreement here holds for it too.

Run: python benchmarks/bench_simmia_generate.py [--texts 4 --naive-texts 2 --out report.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_simmia import load_texts  # the same WikiMIA-32 texts and prefix P

Dists = list[dict[str, float]]
# written for this benchmark (no labels: agreement only); the first two are the shots
NON_LATIN = [
    "昨天下午，市图书馆举办了一场关于古代丝绸之路的讲座。",
    "Вчера вечером в городском парке прошёл небольшой концерт.",
    "这座小城的居民每年春天都会在河边种植新的柳树。",
    "Учёные из Казани описали новый вид жука в горах Урала.",
    "北京的地铁系统在二零零八年奥运会之前扩建了好几条线路。",
    "Почтовое отделение на углу закрылось после сильного снегопада.",
]


def load_non_latin(n_texts: int) -> tuple[list[str], list[int], str]:
    """Up to four of :data:`NON_LATIN` (label -1: unknown) and P from the first two."""
    texts = NON_LATIN[2 : 2 + n_texts]
    return texts, [-1] * len(texts), "".join(t + "\n\n" for t in NON_LATIN[:2])


def naive_dist(backend: Any, prompt_ids: list[int], cfg: Any, seed: int) -> dict[str, float]:
    """Next-word counts from one ``generate`` call with N return sequences."""
    import torch

    from imprint.data.words import first_word

    torch.manual_seed(seed)
    with torch.no_grad():
        out = backend.model.generate(
            input_ids=torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            do_sample=True,
            top_k=cfg.top_k,
            temperature=cfg.temperature,
            top_p=1.0,
            max_new_tokens=cfg.max_word_tokens,
            num_return_sequences=cfg.n,
            pad_token_id=backend.pad_id,
        )
    eos = backend.tokenizer.eos_token_id
    dist: dict[str, float] = {}
    for row in out[:, len(prompt_ids) :].tolist():
        row = row[: row.index(eos)] if eos in row else row
        word = first_word(backend.tokenizer.decode(row, skip_special_tokens=True), ended=True)[0]
        dist[word] = dist.get(word, 0.0) + 1.0
    return dist


def chosen_positions(n_positions: int, k: int) -> list[int]:
    """``k`` evenly spaced word positions among 1..n_positions (all when k = 0)."""
    if k <= 0 or k >= n_positions:
        return list(range(1, n_positions + 1))
    return sorted({int(round(p)) for p in np.linspace(1, n_positions, k)})


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def run_fast(sampler: Any, texts: list[str], contexts: dict, seed: int) -> dict[str, list[Dists]]:
    return {
        name: [
            sampler.distributions(t, prefix=ctx, rng=np.random.default_rng([seed, i]))
            for i, t in enumerate(texts)
        ]
        for name, ctx in contexts.items()
    }


def run_naive(backend: Any, texts: list[str], contexts: dict, cfg: Any, args: Any) -> tuple:
    """Naive next-word counts per (context, text, position) and call times per context."""
    from imprint.data.words import split_words

    counts: dict[tuple[str, int, int], dict[str, float]] = {}
    times: dict[str, list[float]] = {name: [] for name in contexts}
    per_ctx = {"plain": args.naive_positions, "prefixed": args.naive_prefixed_positions}
    for t, text in enumerate(texts[: args.naive_texts]):
        words = split_words(text)
        for name, ctx in contexts.items():
            for i in chosen_positions(len(words) - 1, per_ctx[name]):
                # one string, as HFTextBackend and the fast path tokenise it
                ids = [backend.bos_id, *backend.encode((ctx or "") + text[: words[i - 1].end])]
                started = time.perf_counter()
                counts[(name, t, i)] = naive_dist(backend, ids, cfg, seed=args.seed + 7919 * t + i)
                times[name].append(time.perf_counter() - started)
                print(f"naive {name} text {t} word {i}: {times[name][-1]:.1f}s", flush=True)
    return counts, times


def agreement(rows: list[dict[str, Any]], text_scores: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"positions_compared": len(rows)}
    out["spearman_s_naive_vs_fast"] = spearman(
        [r["naive"] for r in rows], [r["fast"] for r in rows]
    )
    for key in ("naive", "fast"):
        out[f"mean_abs_s_{key}_minus_reference"] = float(
            np.mean([abs(r[key] - r["reference"]) for r in rows])
        )
    out["spearman_text_fast_vs_reference"] = spearman(text_scores["fast"], text_scores["reference"])
    if text_scores.get("naive"):
        covered = sorted(text_scores["naive"])
        out["spearman_text_naive_vs_fast"] = spearman(
            [text_scores["naive"][t] for t in covered], [text_scores["fast"][t] for t in covered]
        )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from imprint.attacks.simmia import relative_score, word_scores
    from imprint.backends.hf import HFLogprobBackend
    from imprint.data.words import split_words
    from imprint.requests.embed import MiniLMEmbedder
    from imprint.requests.next_word import LocalNextWordSampler, NextWordConfig

    torch.set_num_threads(args.threads)
    backend = HFLogprobBackend("smollm2-135m", device="cpu")
    if args.non_latin:
        texts, labels, prefix = load_non_latin(args.texts)
    else:
        texts, labels, prefix = load_texts(args.texts, args.words, args.shots)
    cfg = NextWordConfig(n=args.n, top_k=args.top_k, max_word_tokens=args.max_word_tokens)
    contexts = {"plain": None, "prefixed": prefix}
    embedder = MiniLMEmbedder()

    sampler = LocalNextWordSampler(backend, cfg)
    sampler.distributions(texts[0], prefix=prefix, rng=np.random.default_rng(0))  # warm-up
    sampler.forwarded_tokens = 0
    started = time.perf_counter()
    fast = run_fast(sampler, texts, contexts, args.seed)
    fast_s = time.perf_counter() - started
    print(f"fast: {fast_s:.1f}s, {sampler.forwarded_tokens} tokens through the model", flush=True)
    n_positions = sum(len(d) for d in fast["plain"]) * len(contexts)
    exact_cfg = NextWordConfig(**{**vars(cfg), "mode": "exact", "min_mass": args.min_mass})
    exact = LocalNextWordSampler(backend, exact_cfg)
    reference = run_fast(exact, texts, contexts, 0)
    unresolved = exact.unresolved_mass / max(n_positions, 1)
    naive, times = run_naive(backend, texts, contexts, cfg, args)

    def scores(t: int, dists: Dists) -> np.ndarray:
        words = [w.text for w in split_words(texts[t])]
        return word_scores(words, dists, embedder, n=args.n, exact_numbers=False)[0]

    s = {
        (path, name): [scores(t, d) for t, d in enumerate(runs[name])]
        for path, runs in (("fast", fast), ("reference", reference))
        for name in contexts
    }
    rows = []
    for (name, t, i), dist in sorted(naive.items()):
        dists: Dists = [{} for _ in fast[name][t]]
        dists[i - 1] = dist
        rows.append(
            {
                "context": name,
                "text": t,
                "word": i,
                "naive": float(scores(t, dists)[i - 1]),
                "fast": float(s[("fast", name)][t][i - 1]),
                "reference": float(s[("reference", name)][t][i - 1]),
            }
        )
    text_scores: dict[str, Any] = {"labels": labels}
    for path in ("fast", "reference"):
        text_scores[path] = [
            relative_score(s[(path, "prefixed")][t], s[(path, "plain")][t])
            for t in range(len(texts))
        ]
    complete = [
        t
        for t in range(len(texts))
        if all((n, t, i) in naive for n in contexts for i in range(1, len(fast["plain"][t]) + 1))
    ]
    text_scores["naive"] = {
        t: relative_score(
            *(
                scores(t, [naive[(n, t, i)] for i in range(1, len(fast[n][t]) + 1)])
                for n in ("prefixed", "plain")
            )
        )
        for t in complete
    }
    naive_per_position = float(np.mean([np.mean(v) for v in times.values() if v]))
    fast_per_position = fast_s / n_positions
    return {
        "config": {
            **vars(args),
            "sampling": vars(cfg),
            "prefix_tokens": len(backend.encode(prefix)),
        },
        "speed": {
            "fast_total_s": round(fast_s, 2),
            "fast_s_per_position": round(fast_per_position, 4),
            "fast_tokens_through_model": sampler.forwarded_tokens,
            "positions": n_positions,
            "naive_calls": {k: len(v) for k, v in times.items()},
            "naive_mean_call_s": {k: round(float(np.mean(v)), 2) for k, v in times.items() if v},
            "naive_s_per_position": round(naive_per_position, 3),
            "ratio": round(naive_per_position / fast_per_position, 1),
            "naive_s_for_all_positions_estimated": round(naive_per_position * n_positions, 1),
        },
        "agreement": {
            **agreement(rows, text_scores),
            "reference_unresolved_mass_per_position": round(unresolved, 5),
        },
        "text_scores": text_scores,
        "positions": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=4)
    parser.add_argument("--words", type=int, default=0, help="truncate texts and shots (0: no)")
    parser.add_argument("--shots", type=int, default=7)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--max-word-tokens", type=int, default=8)
    parser.add_argument("--naive-texts", type=int, default=2)
    parser.add_argument("--naive-positions", type=int, default=3, help="without P; 0 = all")
    parser.add_argument("--naive-prefixed-positions", type=int, default=1, help="0 = all")
    parser.add_argument("--threads", type=int, default=1, help="1 is fastest on a busy CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-mass", type=float, default=1e-4, help="exact reference's cut-off")
    parser.add_argument("--non-latin", action="store_true", help="Chinese and Russian texts")
    parser.add_argument("--out", type=Path, default=None, help="write the full JSON report here")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps({k: report[k] for k in ("speed", "agreement")}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
