"""The n-gram index built on Ray (``imprint overlap build --executor ray``): shards, then a union.

Each corpus file is dealt into ``k`` shards, one per worker: shard ``j`` holds the documents whose
number in the file is ``j`` modulo ``k`` (every worker reads the file, which is cheap, and hashes
and inserts only its own documents, which is not). A shard is a Ray task that fills filters of
the final size and rate and returns their bytes; the driver merges them by bitwise union as they
arrive. A Bloom filter's union holds exactly the bits of one filter built over everything, so
the index is the one :func:`~imprint.diagnostics.overlap.build_index` writes, bit for bit. A
task whose worker is lost is run again by Ray (it only reads the corpus: retrying is safe).
Every worker reads the corpus files at the same path (one machine, or a shared file system).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imprint.diagnostics.bloom_filters import _HASH_FUNC, _bloom
from imprint.diagnostics.corpus import (
    CorpusFileStats,
    Unit,
    batched_by_chars,
    iter_documents,
    new_stats,
)
from imprint.diagnostics.ngrams import NgramBatch
from imprint.diagnostics.overlap_plan import Filled, IndexSettings, Progress, plan_filters
from imprint.errors import ConfigError
from imprint.executors import ExecutorConfig

BATCH_CHARS = 1_000_000
Shard = tuple[str, int, int]  # (path, j, k): documents j, j + k, j + 2k, ... of the file


def _shard_docs(shard: Shard, text_field: str | None, unit: Unit, stats: CorpusFileStats):
    """The shard's documents in batches of about BATCH_CHARS characters."""
    path, j, k = shard
    docs = iter_documents(path, stats, text_field=text_field, unit=unit)
    return batched_by_chars((d for i, d in enumerate(docs) if i % k == j), BATCH_CHARS)


def count_shard(shard: Shard, ns: list[int], text_field: str | None, unit: Unit) -> dict[int, int]:
    """Upper bound on the shard's n-grams per n (as :func:`~.overlap.count_ngrams`)."""
    totals = dict.fromkeys(ns, 0)
    for batch in _shard_docs(shard, text_field, unit, new_stats(shard[0])):
        for doc in batch:
            w = len(doc.split())
            for n in ns:
                totals[n] += max(0, w - n + 1)
    return totals


def fill_shard(
    shard: Shard,
    sizes: dict[int, tuple[int, float]],
    text_field: str | None,
    unit: Unit,
) -> tuple[dict[int, bytes], dict[int, int], dict[str, Any]]:
    """Filters (``sizes[n]`` = capacity, rbloom rate) of the shard's n-grams, as bytes; the
    n-grams inserted per n; and the statistics of reading the whole file."""
    blooms = {n: _bloom(cap, rate) for n, (cap, rate) in sizes.items()}
    inserted = dict.fromkeys(sizes, 0)
    stats = new_stats(shard[0])
    for batch in _shard_docs(shard, text_field, unit, stats):
        hashed = NgramBatch.from_texts(batch)
        for n, bloom in blooms.items():
            keys, _ = hashed.ngrams(n)
            bloom.update(keys.tolist())
            inserted[n] += keys.size
    return {n: b.save_bytes() for n, b in blooms.items()}, inserted, stats.to_dict()


def _run_shards(
    fn: Any, shards: list[Shard], args: tuple[Any, ...], label: str, progress: Progress | None
):
    """Yield ``(shard, result)`` as each Ray task ends (Ray retries a task whose worker died).
    A wait checks every ``check_s`` that the cluster still answers (a shard may legitimately
    take long); a ready result's transfer has the deadline ``reply_s``
    (:mod:`imprint.executors.ray_waits`)."""
    import ray

    from imprint.executors.ray_waits import (
        ENV,
        ClusterLostError,
        WaitLimits,
        check_cluster,
        cluster_name,
        wait_any,
    )

    limits = WaitLimits.from_env()
    task = ray.remote(num_cpus=1, max_retries=3)(fn)
    pending = {task.remote(shard, *args): shard for shard in shards}
    advance = progress(label, len(shards)) if progress else None
    while pending:
        ready = wait_any(list(pending), limits, check_cluster)
        shard = pending.pop(ready[0])
        try:
            result = ray.get(ready[0], timeout=limits.reply_s)
        except ray.exceptions.GetTimeoutError:
            raise ClusterLostError(
                f"{cluster_name()}: the result of shard {shard[1]} of {shard[0]} did not arrive "
                f"within {limits.reply_s:g} s of being ready (a node cut off?); check `ray "
                f"status`, or allow longer with {ENV['reply_s']}"
            ) from None
        yield shard, result
        if advance:
            advance(1)


def fill_on_ray(
    paths: list[Path],
    settings: IndexSettings,
    capacity: int | dict[int, int] | None,
    max_memory_gb: float | None,
    progress: Progress | None,
    executor: ExecutorConfig,
) -> Filled:
    """:func:`~imprint.diagnostics.overlap.build_index`'s counting and filling, in shards on Ray
    (``executor.workers`` shards per file, default: the cluster's CPUs)."""
    if isinstance(capacity, dict):
        raise ConfigError("a capacity per n is not supported on Ray; give one int or none")
    ns, text_field, unit = settings.ns, settings.text_field, settings.unit
    owned = _connect(executor)
    try:
        k = executor.workers or _cluster_cpus()
        shards = [(str(p), j, k) for p in paths for j in range(k)]
        caps = _capacities(shards, ns, capacity, text_field, unit, progress)
        plans = plan_filters(caps, settings.fp_rate_target, max_memory_gb)
        sizes = {n: (max(1, caps[n]), plans[n]["requested_rate"]) for n in ns}
        blooms, inserted, stats = _merge_shards(shards, sizes, text_field, unit, progress)
    finally:
        if owned:
            import ray

            ray.shutdown()
    corpus_stats = [stats[str(p)] for p in paths]
    built_on = {"executor": "ray", "shards_per_file": k}
    return Filled(caps, plans, blooms, inserted, corpus_stats, {"built_on": built_on})


def _capacities(
    shards: list[Shard],
    ns: list[int],
    capacity: int | None,
    text_field: str | None,
    unit: Unit,
    progress: Progress | None,
) -> dict[int, int]:
    if capacity is not None:
        return dict.fromkeys(ns, int(capacity))
    totals = dict.fromkeys(ns, 0)
    args = (ns, text_field, unit)
    for _, counts in _run_shards(count_shard, shards, args, "counting n-grams (shards)", progress):
        for n in ns:
            totals[n] += counts[n]
    return totals


def _merge_shards(
    shards: list[Shard],
    sizes: dict[int, tuple[int, float]],
    text_field: str | None,
    unit: Unit,
    progress: Progress | None,
) -> tuple[dict[int, Any], dict[int, int], dict[str, dict[str, Any]]]:
    """Union the shards' filters as they arrive; the file statistics come from shard 0 (every
    shard reads its whole file; documents are counted once per file)."""
    from rbloom import Bloom

    blooms: dict[int, Any] = {}
    inserted = {n: 0 for n in sizes}
    stats: dict[str, dict[str, Any]] = {}
    args = (sizes, text_field, unit)
    for shard, (data, counts, file_stats) in _run_shards(
        fill_shard, shards, args, "indexing n-grams (shards)", progress
    ):
        for n, raw in data.items():
            bloom = Bloom.load_bytes(raw, _HASH_FUNC)
            blooms[n] = bloom if n not in blooms else blooms[n] | bloom
            inserted[n] += counts[n]
        if shard[1] == 0:
            stats[shard[0]] = file_stats
    return blooms, inserted, stats


def _connect(executor: ExecutorConfig) -> bool:
    """Join or start Ray; True when this call started it (and must shut it down)."""
    import ray

    from imprint.executors.ray_setup import connect

    if ray.is_initialized():
        return False
    connect(executor)
    return True


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))
