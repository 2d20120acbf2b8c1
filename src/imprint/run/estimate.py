"""The plan line: what a run will do and about how long it takes, said before the work starts.

``plan: 776 texts (388 members, 388 non-members) x 27 attacks (...); model calls: target logprobs
1,552 passes (~98k tokens, about 4 min at 410 tokens/s measured now on 1,030 tokens); target
sample 388 (about 6 min at 0.9 s per request, recorded by the run of ...); embedder embed 798
(not estimated: not timed on this machine yet); ...; about 10 min for what is estimated``.

Counts are distinct requests per model role and request kind, before the store answers any: the
log-prob passes of every attack's needs (as the planner builds them) merged with the requests the
model-call attacks build (:mod:`.calls`), so a run on an empty store executes these numbers. The
time of the passes comes from a throughput of this machine: the rate recorded by the last run of
the same model on the same device with this store (``<cache>.throughput.json``), or else a quick
timed forward of a few of the run's own texts; every other kind from the seconds per request the
last run here measured for it (:class:`TimedExecutor`), or "not estimated". The end line
(:func:`ran_line`) says what each kind took.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from imprint.attacks import Attack
from imprint.backends.base import LOGPROBS, TOKENS, ScoreRequest
from imprint.data import Sample
from imprint.data.sample import MEMBER
from imprint.requests.logprobs import LogprobRequest
from imprint.run.calls import plan_calls

__all__ = [
    "KindPlan",
    "TimedExecutor",
    "WorkPlan",
    "plan_work",
    "ran_line",
    "record_rates",
    "served_part",
]

_PROBE_TOKENS = 1024  # tokens the quick measurement scores (a few of the run's texts)
LOGPROBS_KIND = "logprobs"


@dataclass(frozen=True)
class KindPlan:
    """One (model role, request kind) of the plan: distinct requests, their tokens (log-prob
    passes), the seconds estimated (None: not estimated) and how (or why not)."""

    role: str
    kind: str
    count: int
    tokens: int | None = None
    estimate_s: float | None = None
    how: str = ""
    stored: int | None = None  # of ``count``, already in the store (None: not checked)

    def text(self) -> str:
        noun = "passes" if self.kind == LOGPROBS_KIND else "requests"
        size = f"~{_k(self.tokens)} tokens, " if self.tokens is not None else ""
        if self.stored is not None and self.stored >= self.count:
            return f"{self.role} {self.kind} {self.count:,} {noun} ({size}all in the store)"
        held = f"{self.stored:,} in the store, " if self.stored else ""
        when = (
            f"about {duration(self.estimate_s)} {self.how}"
            if self.estimate_s is not None
            else f"not estimated: {self.how}"
        )
        return f"{self.role} {self.kind} {self.count:,} {noun} ({size}{held}{when})"


@dataclass(frozen=True)
class WorkPlan:
    """The work of a run as planned: texts, attacks, the distinct requests per role and kind
    (``calls``; ``passes``/``tokens``: the log-prob ones by role), the calls that cannot be
    counted before the answers (attack -> kinds), model calls already made while the attacks
    were prepared (role -> kind -> executed), the HTTP lines of an API target, and the
    log-prob throughput used (tokens/s; None: not estimated, ``rate_source`` says why)."""

    texts: int
    members: int
    attacks: tuple[str, ...]
    passes: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    calls: tuple[KindPlan, ...] = ()
    uncounted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    prepared: dict[str, dict[str, int]] = field(default_factory=dict)
    http: tuple[str, ...] = ()
    tokens_per_s: float | None = None
    rate_source: str = ""

    @property
    def estimate_s(self) -> float | None:
        """Seconds of every estimated kind (an upper figure: the store may answer some), or
        None when no kind is estimated."""
        known = [c.estimate_s for c in self.calls if c.estimate_s is not None]
        return sum(known) if known else None

    @property
    def estimated_all(self) -> bool:
        return all(c.estimate_s is not None for c in self.calls) and not self.uncounted

    def line(self) -> str:
        """The one-line plan said before the work."""
        parts = [c.text() for c in self.calls]
        if self.uncounted:
            named = "; ".join(f"{a}: {', '.join(k)}" for a, k in self.uncounted.items())
            parts.append(f"not counted before the answers: {named}")
        if self.prepared:
            parts.append(f"made while preparing the attacks: {_counts(self.prepared)}")
        total = self.estimate_s
        estimate = (
            "no time estimate"
            if total is None
            else f"about {duration(total)} in all"
            if self.estimated_all
            else f"about {duration(total)} for what is estimated"
        )
        return (
            f"plan: {self.texts:,} texts ({self.members:,} members, "
            f"{self.texts - self.members:,} non-members) x {len(self.attacks)} attacks "
            f"({', '.join(self.attacks)}); model calls: {'; '.join(parts) or 'none'}; {estimate}"
        )

    def lines(self) -> list[str]:
        """The plan line and, for an HTTP target, its request lines."""
        return [self.line(), *self.http]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "estimate_s": self.estimate_s}


def _counts(by_role: dict[str, dict[str, int]]) -> str:
    return ", ".join(f"{role} {kind} {n:,}" for role, kinds in by_role.items()
                     for kind, n in kinds.items())  # fmt: skip


def duration(seconds: float | None) -> str:
    """``42 s``, ``3.5 min``, ``2.1 h``."""
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _k(n: int) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n:,}"


def plan_work(
    attacks: Sequence[Attack],
    samples: Sequence[Sample],
    backends: dict[str, Any],
    prefixes: dict[str, str],
    *,
    cache_path: Path,
    prepared: dict[str, dict[str, dict[str, int]]] | None = None,
    store: Any = None,
) -> WorkPlan:
    """The run's :class:`WorkPlan`: the distinct log-prob requests of every attack's needs (as
    the planner builds them) and those the model-call attacks build (:func:`~imprint.run.calls.
    plan_calls`), per model role and kind; the log-prob rate recorded for the target in this
    store, else measured now on a few of the texts; ``prepared``: the request counts so far
    (the manifest's ``requests`` layout), made while the attacks were prepared; ``store``: the
    run's request store, whose answers are no work (checked for the loaded models)."""
    texts = [s.text for s in samples]
    target = backends.get("target")
    local = target is not None and target.local_model() is not None
    extra = plan_calls(attacks, texts, target_local=local)
    wanted: dict[str, dict[tuple[str, str | None], None]] = {}
    for need in dict.fromkeys(n for a in attacks for n in a.needs()):
        prefix = prefixes.get(need.prefix) if need.prefix else None
        rows = wanted.setdefault(need.model, {})
        for text in texts:
            rows.update(dict.fromkeys((v, prefix) for v in need.variant.apply(text)))
    for role, rows in extra.logprobs.items():
        wanted.setdefault(role, {}).update(rows)
    passes = {role: len(rows) for role, rows in wanted.items()}
    tokens = {role: _tokens(_tokenizer_of(backends, role), rows) for role, rows in wanted.items()}
    # what the store already answers is no work: checked for the roles whose model is loaded
    stored = {role: _stored(store, _role_model(backends, role, extra.roles), LOGPROBS_KIND,
                            [LogprobRequest(t, p).key() for t, p in rows])
              for role, rows in wanted.items()}  # fmt: skip
    todo = {role: _tokens(_tokenizer_of(backends, role), _missing(rows, stored[role]))
            for role, rows in wanted.items()}  # fmt: skip
    rate, source = (
        (None, "no log-prob passes to compute")
        if not any(todo.values())
        else _rate(backends, texts, cache_path)
    )
    calls = [
        KindPlan(
            role,
            LOGPROBS_KIND,
            passes[role],
            tokens[role],
            (todo[role] / rate if rate else None) if todo[role] else 0.0,
            f"at {rate:,.0f} tokens/s ({source})" if rate else source,
            _size(stored[role]),
        )  # fmt: skip
        for role in passes
    ]
    records = _read_records(cache_path)
    for (role, kind), keys in extra.keys.items():
        found = _stored(store, _role_model(backends, role, extra.roles), kind, sorted(keys))
        left = len(keys) - len(found or ())
        seconds, how = _kind_rate(records, target, role, kind)
        estimate = left * seconds if seconds else (0.0 if left == 0 else None)
        calls.append(KindPlan(role, kind, len(keys), None, estimate, how,
                              _size(found)))  # fmt: skip
    from imprint.run.http_plan import plan_lines

    held = stored.get("target")  # the target's log-prob requests the store answers
    held_n = None if held is None else len(held)
    http = tuple(plan_lines(attacks, texts, target, held_n)) if target is not None else ()
    return WorkPlan(
        texts=len(samples),
        members=sum(s.label == MEMBER for s in samples),
        attacks=tuple(a.name for a in attacks),
        passes=passes,
        tokens=tokens,
        calls=tuple(calls),
        uncounted=dict(extra.uncounted),
        prepared=_executed(prepared or {}),
        http=http,
        tokens_per_s=rate,
        rate_source=source,
    )


def _stored(store: Any, backend: Any, kind: str, keys: list[str]) -> set[str] | None:
    """The ``keys`` of ``kind`` the store holds for ``backend`` (a backend or an embedder: both
    define ``fingerprint``); None when not checked (no store, no model of that role)."""
    if store is None or backend is None or not keys:
        return None
    return set(store.get_keys(backend.fingerprint, kind, keys, lambda blob: None))


def _role_model(backends: dict[str, Any], role: str, added: dict[str, Any]) -> Any:
    """The model of ``role`` whose fingerprint keys its stored answers: a loaded backend, the
    model of a role an attack adds itself, as the attack finds it (``added``: e.g. ACMIA's
    tempered view of the loaded target, no reload), or the run's embedder (MiniLM, whose
    fingerprint needs no loading); None otherwise."""
    if role in backends:
        return backends[role]
    if role in added:
        return added[role](backends)
    if role == "embedder":
        from imprint.requests.embed import default_embedder

        return default_embedder()
    return None


def _size(found: set[str] | None) -> int | None:
    return None if found is None else len(found)


def _missing(
    rows: dict[tuple[str, str | None], None], stored: set[str] | None
) -> dict[tuple[str, str | None], None]:
    if not stored:
        return rows
    return {r: None for r in rows if LogprobRequest(*r).key() not in stored}


def _executed(counts: dict[str, dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """role -> kind -> requests executed, the kinds with any."""
    out: dict[str, dict[str, int]] = {}
    for role, kinds in counts.items():
        for kind, c in kinds.items():
            if c.get("executed"):
                out.setdefault(role, {})[kind] = int(c["executed"])
    return out


def _kind_rate(
    records: dict[str, Any], target: Any, role: str, kind: str
) -> tuple[float | None, str]:
    """(seconds per request, how) recorded for ``kind`` in ``role`` by an earlier run on this
    target and device, or (None, why not)."""
    record = records.get(_kind_key(target, role, kind)) if target is not None else None
    if isinstance(record, dict) and record.get("s_per_request"):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.get("at", 0)))
        seconds = float(record["s_per_request"])
        return seconds, (
            f"at {_per(seconds)} per request, measured by the run of {when} here (its model "
            "loading included)"
        )
    return None, f"no {kind} timing on this machine yet (a run that computes some records one)"


def _per(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else duration(seconds)


def _kind_key(target: Any, role: str, kind: str) -> str:
    return f"{_key(target)}|{role}|{kind}"


def _tokenizer_of(backends: dict[str, Any], role: str) -> Any:
    """The backend whose tokenizer counts ``role``'s tokens: its own, else for a derived role
    (acmia's ``target@t=0.5``: the target under another temperature) its base role's."""
    return backends.get(role) or backends.get(role.partition("@")[0])


def _tokens(backend: Any, rows: dict[tuple[str, str | None], None]) -> int:
    """Tokens of the scored texts (the prefix is encoded once and reused, so not counted);
    words x 1.3 where the backend has no tokenizer."""
    if backend is not None and backend.supports(TOKENS):
        return sum(len(backend.encode(text)) for text, _ in rows)
    return int(sum(len(text.split()) for text, _ in rows) * 1.3)


def _key(backend: Any) -> str:
    device = backend.describe().get("device", "")
    return f"{backend.fingerprint}|{device}"


def _record_path(cache_path: Path) -> Path:
    return cache_path.with_name(cache_path.name + ".throughput.json")


def _read_records(cache_path: Path) -> dict[str, Any]:
    try:
        records = json.loads(_record_path(cache_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _rate(
    backends: dict[str, Any], texts: Sequence[str], cache_path: Path
) -> tuple[float | None, str]:
    """(tokens/s, where it comes from) of the target's log-prob passes on this machine."""
    target = backends.get("target")
    if target is None or not target.supports(LOGPROBS):
        return None, "the target gives no log-probabilities"
    record = _read_records(cache_path).get(_key(target))
    if isinstance(record, dict) and record.get("tokens_per_s"):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.get("at", 0)))
        return float(record["tokens_per_s"]), f"recorded by the run of {when} on this machine"
    if not target.supports(TOKENS):
        return None, "no tokenizer to time the target by"
    probe, total = [], 0
    for text in texts:  # a few of the run's own texts, scored once and thrown away
        probe.append(ScoreRequest(text))
        total += len(target.encode(text))
        if total >= _PROBE_TOKENS:
            break
    started = time.perf_counter()
    target.score(probe)
    elapsed = time.perf_counter() - started
    if elapsed <= 0 or total == 0:
        return None, "the timing probe measured nothing"
    return total / elapsed, f"measured now on {total:,} tokens"


class TimedExecutor:
    """An executor that times every ``run_batches`` call of the one it wraps, per (role, kind):
    ``seconds`` (the wall time of a kind's batches, the store's writes overlapped)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds: dict[tuple[str, str], float] = {}

    def __getattr__(self, name: str) -> Any:  # kind, stats, register, factory, close
        return getattr(self.inner, name)

    def run_batches(self, work: Any) -> None:
        started = time.perf_counter()
        try:
            self.inner.run_batches(work)
        finally:
            key = (work.role, str(work.kind.kind))
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - started


def record_rates(
    cache_path: Path,
    target: Any,
    counts: dict[str, dict[str, dict[str, int]]],
    seconds: dict[tuple[str, str], float],
    *,
    min_tokens: int = 2000,
) -> dict[str, float]:
    """Record what this run measured for later plans: the target's log-prob rate (tokens/s,
    from at least ``min_tokens`` new tokens) and, per role and other kind, seconds per executed
    request; returns what was recorded ("role kind" -> rate)."""
    records = _read_records(cache_path)
    done: dict[str, float] = {}
    now = time.time()
    for role, kinds in counts.items():
        for kind, c in kinds.items():
            took, executed = seconds.get((role, kind), 0.0), int(c.get("executed", 0))
            if took <= 0 or executed == 0:
                continue
            if kind == LOGPROBS_KIND:
                if role == "target" and c.get("tokens", 0) >= min_tokens:
                    rate = c["tokens"] / took
                    records[_key(target)] = {"tokens_per_s": round(rate, 1), "at": now}
                    done[f"{role} {kind}"] = rate
                continue
            per = took / executed
            records[_kind_key(target, role, kind)] = {"s_per_request": round(per, 4), "at": now}
            done[f"{role} {kind}"] = per
    if done:
        path = _record_path(cache_path)
        try:
            # a name of this process's own: two runs recording at once never share a file
            temporary = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
            temporary.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
            temporary.replace(path)
        except OSError:
            return {}  # a read-only store: the next run measures again
    return done


def served_part(counts: dict[str, int]) -> str:
    """What a served (HTTP) backend did for one kind, from the manifest's own ``requests``
    entry (``sent``, ``answered_by_store``: its ``usage()`` counted between the calls): the
    POSTs sent, which differ from the requests where the server caps ``n`` (llama-cpp-python:
    4 SaMIA requests of 2 samples are 8 POSTs), and the answers read back from those an
    earlier run kept; "" for a backend that sends none (a local model)."""
    if counts.get("sent") is None:
        return ""
    sent, read = int(counts["sent"]), int(counts.get("answered_by_store", 0))
    return (
        f" ({sent:,} POST{'s' * (sent != 1)} sent, {read:,} read back from the answers an "
        "earlier run kept)"
    )


def ran_line(
    plan: WorkPlan | None,
    counts: dict[str, dict[str, dict[str, int]]],
    seconds: dict[tuple[str, str], float],
) -> str:
    """What each (role, kind) took, against the plan: ``model calls as run: target logprobs
    24 passes (300 tokens) in 2.1 s (planned 24, about 2 s); target sample 12 requests, 3 from
    the store, in 35 s (planned 12, not estimated); ...``."""
    planned = {(c.role, c.kind): c for c in plan.calls} if plan is not None else {}
    parts = []
    for role, kinds in counts.items():
        for kind, c in kinds.items():
            noun = "passes" if kind == LOGPROBS_KIND else "requests"
            text = f"{role} {kind} {c.get('executed', 0):,} {noun} executed"
            if c.get("tokens"):
                text += f" ({_k(int(c['tokens']))} tokens)"
            text += served_part(c)
            if c.get("cache_hits"):
                text += f", {c['cache_hits']:,} answered by the store"
            if c.get("damaged"):
                text += f" ({c['damaged']:,} damaged in the store, computed again)"
            text += f" in {duration(seconds.get((role, kind), 0.0))}"
            said = planned.get((role, kind))
            if said is not None:
                when = duration(said.estimate_s) if said.estimate_s is not None else "not estimated"
                text += (
                    f" (planned {said.count:,}, {'about ' * (said.estimate_s is not None)}{when})"
                )
            parts.append(text)
    return f"model calls as run: {'; '.join(parts) or 'none'}"
