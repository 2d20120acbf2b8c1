"""The planner: gather every pass the attacks need, run each once, serve them all from the cache.

Steps: expand needs into (model, prefix, text) requests, deduplicate, look them up in the cache,
sort the misses by length, batch them by a token budget, score, commit each batch to the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from imprint.backends.base import LOGPROBS, TOKEN_LOGPROBS, LogprobBackend, ScoreRequest, TokenStats
from imprint.errors import CapabilityError, ConfigError
from imprint.executors import Executor, LocalExecutor, PlannedBatch
from imprint.signals.cache import Key, SignalCache, make_key
from imprint.signals.needs import Need, SignalSet

DEFAULT_TOKEN_BUDGET = 4096  # used where neither the run nor the backend sets one


@dataclass
class PassCounts:
    """Work accounting for one backend: unique requests, cache hits, newly scored."""

    requests: int = 0
    cache_hits: int = 0
    scored: int = 0
    scored_tokens: int = 0
    batches: int = 0


@dataclass
class PlanReport:
    per_model: dict[str, PassCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {name: vars(counts) for name, counts in self.per_model.items()}


def check_capabilities(needs: Iterable[Need], backends: dict[str, LogprobBackend]) -> None:
    """Fail before any work when a need names a missing or incapable backend."""
    for need in needs:
        if need.model not in backends:
            raise CapabilityError(
                f"an attack needs model {need.model!r} but the run has only "
                f"{sorted(backends)}; add it (for reference attacks: --ref NAME=SPEC)"
            )
        if not {LOGPROBS, TOKEN_LOGPROBS} & set(backends[need.model].capabilities):
            raise CapabilityError(
                f"model {need.model!r} cannot return log-probabilities; use a gray-box backend"
            )


def batches_by_budget(
    lengths: Sequence[int], budget: int, *, max_length: int | None = None
) -> list[list[int]]:
    """Indices sorted by length (longest first) and grouped so that rows x width <= budget.

    A text longer than ``max_length`` is a batch of its own: the backend streams its sliding
    windows and its result reaches the cache (and the progress bar) before the next text starts.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        if max_length and lengths[i] > max_length:
            out.append([i])
            continue
        n = lengths[i]
        if current and (len(current) + 1) * max(width, n) > budget:
            out.append(current)
            current, width = [], 0
        current.append(i)
        width = max(width, n)
    if current:
        out.append(current)
    return out


def run_plan(
    texts: Sequence[str],
    needs: Iterable[Need],
    backends: dict[str, LogprobBackend],
    cache: SignalCache,
    *,
    prefixes: dict[str, str] | None = None,
    token_budget: int | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    executor: Executor | None = None,
) -> tuple[SignalSet, PlanReport]:
    """Compute (or fetch) the signals of every need for every text.

    ``progress(label, total_tokens)`` returns a callback advanced by tokens scored. ``executor``
    runs the planned batches (default: this process; see :mod:`imprint.executors`), stored here
    as they arrive; ``token_budget=None`` batches by each backend's own budget.
    """
    needs = list(dict.fromkeys(needs))
    check_capabilities(needs, backends)
    prefixes = prefixes or {}
    for need in needs:
        if need.prefix is not None and need.prefix not in prefixes:
            raise ConfigError(f"an attack needs prefix {need.prefix!r}, which the run lacks")
    layout: dict[Need, list[list[tuple[str, str, str | None]]]] = {}
    wanted: dict[str, dict[Key, ScoreRequest]] = {}
    for need in needs:
        backend = backends[need.model]
        prefix = prefixes.get(need.prefix) if need.prefix else None
        rows = []
        for text in texts:
            variants = need.variant.apply(text)
            rows.append([(need.model, v, prefix) for v in variants])
            for v in variants:
                wanted.setdefault(need.model, {})[make_key(backend.fingerprint, v, prefix)] = (
                    ScoreRequest(v, prefix)
                )
        layout[need] = rows
    for model, requests in wanted.items():
        check_context(backends[model], model, requests.values())
    report = PlanReport()
    results: dict[str, dict[Key, TokenStats]] = {}
    for model, requests in wanted.items():
        results[model] = _fetch_or_score(
            backends[model],
            model,
            requests,
            cache,
            token_budget,
            progress,
            report,
            executor or LocalExecutor(),
        )
    data = {
        need: [
            tuple(results[m][make_key(backends[m].fingerprint, v, p)] for m, v, p in row)
            for row in rows
        ]
        for need, rows in layout.items()
    }
    return SignalSet(texts, data), report


def check_context(backend: LogprobBackend, model: str, requests: Iterable[ScoreRequest]) -> None:
    """Fail before any forward pass when a prefix plus a text cannot fit the context.

    (Texts alone never fail: the backend scores them with a sliding window.)
    """
    max_length = getattr(backend, "max_length", None)
    by_prefix: dict[str, list[str]] = {}
    for req in requests:
        if req.prefix is not None:
            by_prefix.setdefault(req.prefix, []).append(req.text)
    if not max_length:
        return
    for prefix, texts in by_prefix.items():
        prefix_len = backend.count_tokens([prefix])[0]  # BOS + prefix
        longest = max(backend.count_tokens(texts)) - 1
        if prefix_len + longest > max_length:
            raise ConfigError(
                f"model {model!r}: a prefix of {prefix_len} tokens plus texts of up to {longest} "
                f"tokens exceeds its context of {max_length}; use fewer shots (e.g. --param "
                "recall.n_shots=3), truncate texts (--truncate N) or leave prefix attacks out"
            )


def _fetch_or_score(
    backend: LogprobBackend,
    model: str,
    requests: dict[Key, ScoreRequest],
    cache: SignalCache,
    token_budget: int | None,
    progress: Callable[[str, int], Callable[[int], None]] | None,
    report: PlanReport,
    executor: Executor,
) -> dict[Key, TokenStats]:
    counts = report.per_model.setdefault(model, PassCounts())
    found = cache.get_many(list(requests))
    counts.requests += len(requests)
    counts.cache_hits += len(found)
    missing = [(k, r) for k, r in requests.items() if k not in found]
    if not missing:
        return found
    counted = backend.count_tokens([r.text for _, r in missing])
    lengths = dict(zip([k for k, _ in missing], counted, strict=True))
    own = getattr(backend, "batch_tokens", None) or getattr(backend, "token_budget", None)
    budget = token_budget or own or DEFAULT_TOKEN_BUDGET
    keys = _plan_batches(missing, lengths, budget, getattr(backend, "max_length", None))
    batches = [
        PlannedBatch(tuple(requests[k] for k in ks), sum(lengths[k] for k in ks)) for ks in keys
    ]
    advance = progress(f"scoring with {model}", sum(lengths.values())) if progress else None

    # Each batch is committed as it arrives (in any order under a parallel executor), by one
    # writer thread: on a GPU the next forward runs while SQLite writes the last batch (the
    # write releases the GIL). A write error surfaces here; a kill loses at most the batches
    # still queued, which the next run scores again.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="imprint-cache") as writer:
        writes: list[Future[None]] = []

        def store(index: int, stats: list[TokenStats]) -> None:
            writes.append(writer.submit(cache.put_many, list(zip(keys[index], stats, strict=True))))
            found.update(zip(keys[index], stats, strict=True))
            counts.scored += len(keys[index])
            counts.scored_tokens += batches[index].n_tokens
            counts.batches += 1

        try:
            executor.score_batches(model, backend, batches, store, advance=advance)
        finally:
            for write in writes:
                write.result()
    return found


def _plan_batches(
    missing: list[tuple[Key, ScoreRequest]],
    lengths: dict[Key, int],
    token_budget: int,
    max_length: int | None,
) -> list[list[Key]]:
    """The keys of each batch: one prefix per batch (so each batch reuses a single prefix KV
    cache), longest first, within the token budget."""
    by_prefix: dict[str | None, list[Key]] = {}
    for key, req in missing:
        by_prefix.setdefault(req.prefix, []).append(key)
    out: list[list[Key]] = []
    for group in by_prefix.values():
        for idx in batches_by_budget(
            [lengths[k] for k in group], token_budget, max_length=max_length
        ):
            out.append([group[i] for i in idx])
    return out
