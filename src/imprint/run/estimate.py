"""The plan line: what a run will do and about how long it takes, said before the work starts.

``plan: 776 texts (388 members, 388 non-members) x 27 attacks; model calls: target logprobs
1552 passes (~98k tokens), ...; about 4 min at 410 tokens/s (measured now)``. The time is
estimated for the log-prob passes from a throughput of this machine: the rate recorded by the
last run of the same model on the same device with this store (``<cache>.throughput.json``), or
else a quick timed forward of a few of the run's own texts. Attacks that call the model
otherwise (sampling, neighbours) are named, not timed. The actual time is said at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from imprint.attacks import Attack
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import LOGPROBS, TOKENS, ScoreRequest
from imprint.data import Sample
from imprint.data.sample import MEMBER

__all__ = ["WorkPlan", "plan_work", "record_throughput"]

_PROBE_TOKENS = 1024  # tokens the quick measurement scores (a few of the run's texts)


@dataclass(frozen=True)
class WorkPlan:
    """The work of a run as planned: texts, attacks, distinct log-prob passes and their tokens
    per model role (before the store answers any), attacks making other model calls, and the
    throughput the estimate uses (tokens/s; None: not estimated, ``rate_source`` says why)."""

    texts: int
    members: int
    attacks: tuple[str, ...]
    passes: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    other_calls: tuple[str, ...] = ()
    tokens_per_s: float | None = None
    rate_source: str = ""

    @property
    def estimate_s(self) -> float | None:
        """Seconds the log-prob passes take at ``tokens_per_s`` (an upper figure: the store may
        answer some), or None."""
        if not self.tokens_per_s:
            return None
        return sum(self.tokens.values()) / self.tokens_per_s

    def line(self) -> str:
        """The one-line plan said before the work."""
        calls = [
            f"{role} logprobs {self.passes[role]:,} passes (~{_k(self.tokens[role])} tokens)"
            for role in self.passes
        ]
        if self.other_calls:
            calls.append(f"other model calls by {', '.join(self.other_calls)} (not timed)")
        estimate = (
            f"about {duration(self.estimate_s)} for the passes at {self.tokens_per_s:,.0f} "
            f"tokens/s ({self.rate_source})"
            if self.estimate_s is not None
            else f"no time estimate ({self.rate_source})"
        )
        return (
            f"plan: {self.texts:,} texts ({self.members:,} members, "
            f"{self.texts - self.members:,} non-members) x {len(self.attacks)} attacks "
            f"({', '.join(self.attacks)}); model calls: {'; '.join(calls) or 'none'}; {estimate}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "estimate_s": self.estimate_s}


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
) -> WorkPlan:
    """The run's :class:`WorkPlan`: the distinct log-prob requests of every attack's needs (as
    the planner builds them) counted and tokenised per model; the rate recorded for the target
    in this store, else measured now on a few of the texts."""
    texts = [s.text for s in samples]
    needs = list(dict.fromkeys(n for a in attacks for n in a.needs()))
    wanted: dict[str, dict[tuple[str, str | None], None]] = {}
    for need in needs:
        prefix = prefixes.get(need.prefix) if need.prefix else None
        rows = wanted.setdefault(need.model, {})
        for text in texts:
            rows.update(dict.fromkeys((v, prefix) for v in need.variant.apply(text)))
    passes = {role: len(rows) for role, rows in wanted.items()}
    tokens = {role: _tokens(backends.get(role), rows) for role, rows in wanted.items()}
    others = tuple(a.name for a in attacks if isinstance(a, ModelCallAttack))
    rate, source = (
        (None, "no log-prob passes") if not passes else _rate(backends, texts, cache_path)
    )
    return WorkPlan(
        texts=len(samples),
        members=sum(s.label == MEMBER for s in samples),
        attacks=tuple(a.name for a in attacks),
        passes=passes,
        tokens=tokens,
        other_calls=others,
        tokens_per_s=rate,
        rate_source=source,
    )


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


def record_throughput(
    cache_path: Path, backend: Any, tokens: int, seconds: float, *, min_tokens: int = 2000
) -> float | None:
    """Record ``tokens / seconds`` as the target's log-prob rate for later plans (only from a
    run that scored at least ``min_tokens`` new tokens and nothing but log-prob passes, so the
    time is theirs); returns the rate recorded, or None."""
    if tokens < min_tokens or seconds <= 0:
        return None
    rate = tokens / seconds
    records = _read_records(cache_path)
    records[_key(backend)] = {"tokens_per_s": round(rate, 1), "at": time.time()}
    path = _record_path(cache_path)
    try:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
        temporary.replace(path)
    except OSError:
        return None  # a read-only store: the next run measures again
    return rate


def logprob_tokens(counts: dict[str, dict[str, dict[str, int]]]) -> int:
    """Tokens the run's log-prob passes executed (all roles), from the manifest's ``requests``."""
    return sum(kinds.get("logprobs", {}).get("tokens", 0) for kinds in counts.values())
