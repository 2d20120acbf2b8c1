"""Benchmark: build an n-gram overlap index over a synthetic corpus; time, throughput, memory.

    python benchmarks/bench_overlap.py                 # 100 MB, n = 7
    python benchmarks/bench_overlap.py --size-mb 1024 --n 7 --n 13

The corpus is JSONL (one ``{"text": ...}`` per line, optionally gzip/zstd) of Zipf-distributed
words (50,000-word vocabulary, some punctuation), written in a streaming way. The index is
built in a child process so its peak resident memory (``ru_maxrss``) is measured alone; with a
given ``--capacity`` the first (counting) pass is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VOCAB_SIZE = 50_000


def _vocabulary(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    weights = np.linspace(2.0, 0.2, letters.size)
    weights /= weights.sum()
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        length = int(rng.integers(2, 11))
        words.add("".join(rng.choice(letters, size=length, p=weights)))
    return sorted(words)


def write_corpus(path: Path, size_mb: float, *, seed: int = 0, compression: str = "none") -> int:
    """Write about ``size_mb`` MB of JSONL text; return the number of documents."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(rng), dtype=object)
    ranks = np.arange(1, VOCAB_SIZE + 1, dtype=np.float64)
    probs = 1.0 / ranks**1.05
    probs /= probs.sum()
    punct = np.array(["", "", "", "", "", "", "", ",", ".", ";"], dtype=object)
    target = int(size_mb * 1e6)
    if compression == "gzip":
        import gzip

        fh = gzip.open(path, "wt", encoding="utf-8", compresslevel=1)  # noqa: SIM115
    elif compression == "zstd":
        import io

        import zstandard

        raw = open(path, "wb")  # noqa: SIM115 - closed through the text wrapper
        writer = zstandard.ZstdCompressor(level=1).stream_writer(raw)
        fh = io.TextIOWrapper(writer, encoding="utf-8")
    else:
        fh = open(path, "w", encoding="utf-8")  # noqa: SIM115
    written = docs = 0
    with fh:
        while written < target:
            lengths = rng.integers(100, 1000, size=256)
            idx = rng.choice(VOCAB_SIZE, size=int(lengths.sum()), p=probs)
            marks = punct[rng.integers(0, punct.size, size=idx.size)]
            tokens = vocab[idx] + marks
            lines = []
            for doc in np.split(tokens, np.cumsum(lengths)[:-1]):
                lines.append(json.dumps({"text": " ".join(doc.tolist())}) + "\n")
            chunk = "".join(lines)
            fh.write(chunk)
            written += len(chunk)
            docs += len(lines)
    return docs


def _build(corpus: str, out: str, ns: list[int], fp_rate: float, capacity: int | None) -> None:
    from imprint.diagnostics.overlap import build_index

    started = time.perf_counter()
    manifest = build_index(
        [corpus], ns, out, fp_rate=fp_rate, capacity=capacity, measure_fp=True, overwrite=True
    )
    manifest["bench_build_s"] = time.perf_counter() - started
    Path(out, "bench.json").write_text(json.dumps(manifest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--n", type=int, action="append", help="n-gram length (repeatable)")
    parser.add_argument("--fp-rate", type=float, default=0.01)
    parser.add_argument("--capacity", type=int, default=None, help="skip the counting pass")
    parser.add_argument("--compression", choices=["none", "gzip", "zstd"], default="none")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp folder")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and index")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ns = args.n or [7]
    if args.child:
        _build(args.child[0], args.child[1], ns, args.fp_rate, args.capacity)
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_overlap_"))
    work.mkdir(parents=True, exist_ok=True)
    suffix = {"none": "", "gzip": ".gz", "zstd": ".zst"}[args.compression]
    corpus = work / f"corpus.jsonl{suffix}"
    t0 = time.perf_counter()
    docs = write_corpus(corpus, args.size_mb, compression=args.compression)
    gen_s = time.perf_counter() - t0
    index = work / "index"
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(corpus),
        str(index),
        "--fp-rate",
        str(args.fp_rate),
        *sum((["--n", str(n)] for n in ns), []),
    ]
    if args.capacity:
        cmd += ["--capacity", str(args.capacity)]
    t1 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t1
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    manifest = json.loads((index / "bench.json").read_text())
    stats = manifest["corpus"][0]
    text_mb = stats["text_bytes"] / 1e6
    report = {
        "size_mb_on_disk": round(os.path.getsize(corpus) / 1e6, 1),
        "text_mb": round(text_mb, 1),
        "documents": docs,
        "ns": ns,
        "generate_s": round(gen_s, 1),
        "build_s": round(manifest["bench_build_s"], 1),
        "build_wall_s_incl_startup": round(wall, 1),
        "throughput_mb_s": round(text_mb / manifest["bench_build_s"], 2),
        "peak_rss_mb": round(peak_mb, 1),
        "filters": {
            n: {k: f[k] for k in ("capacity", "n_inserted", "size_bytes", "k",
                                  "fp_rate_at_capacity", "fp_rate_estimated", "fp_rate_measured")}
            for n, f in manifest["filters"].items()
        },
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    if not args.keep and args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
