"""The texts of a game: pool texts split into members, non-members and held-out non-members
(drawn from a pool file or sampled from the base model), and canaries with repetition counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from imprint.data import MEMBER, NON_MEMBER
from imprint.game.config import BuildPlan, GameConfig
from imprint.game.texts import (
    NATURAL_PROMPTS,
    SHIFT_PROMPTS,
    generate_texts,
    high_perplexity_texts,
    inclusion_draw,
    random_token_texts,
)

__all__ = ["make_records"]

#: Top-k sampling for pool texts (canaries are sampled from the full distribution); top-k, not
#: nucleus sampling, because sorting the vocabulary every step costs a third of generation time.
POOL_TOP_K = 50
#: High-temperature canaries are odd text: more tokens per word than natural text.
CANARY_TOKENS_PER_WORD = 2.0


# Roles of pool texts after the split.
MEMBER_ROLE, NONMEMBER_ROLE, HELDOUT_ROLE = "member", "nonmember", "heldout"


def _roles(rng: np.random.Generator, n_total: int, config: GameConfig) -> list[str]:
    """A seeded random role per pool text: members, held-out non-members, non-members."""
    order = rng.permutation(n_total)
    roles = [NONMEMBER_ROLE] * n_total
    for rank, i in enumerate(order):
        if rank < config.n_members:
            roles[i] = MEMBER_ROLE
        elif rank < config.n_members + config.heldout:
            roles[i] = HELDOUT_ROLE
    return roles


def _natural_records(
    plan: BuildPlan, model: Any, tokenizer: Any, *, console: Any, progress: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pool texts with labels (a seeded 50/50 split, or with shift two distributions), and the
    held-out non-members (never trained, not evaluated: few-shot prefixes)."""
    config = plan.config
    n_mem, n_total = config.n_members, config.pool_size + config.heldout
    rng = np.random.default_rng([config.seed, 1])
    if plan.pool is not None:
        chosen = sorted(rng.choice(len(plan.pool), size=n_total, replace=False))
        pool = [plan.pool[i] for i in chosen]
        ids, texts = [s.id for s in pool], [s.text for s in pool]
        roles = _roles(rng, n_total, config)
    else:
        texts = _generate_pool(config, model, tokenizer, console=console, progress=progress)
        if config.shift:  # members from the natural prompts, everything else shifted
            roles = [MEMBER_ROLE] * n_mem + [NONMEMBER_ROLE] * (n_total - n_mem)
            for i in n_mem + rng.permutation(n_total - n_mem)[: config.heldout]:
                roles[i] = HELDOUT_ROLE
        else:
            roles = _roles(rng, n_total, config)
        order = rng.permutation(n_total)  # ids reveal neither prompt nor label
        ids = [""] * n_total
        for k, i in enumerate(order):
            ids[i] = f"text-{k:05d}"
    records = [
        _record(ids[i], texts[i], roles[i] == MEMBER_ROLE, "natural", 1)
        for i in range(n_total)
        if roles[i] != HELDOUT_ROLE
    ]
    heldout = [
        {"id": ids[i], "text": texts[i], "label": NON_MEMBER, "meta": {"kind": "heldout"}}
        for i in range(n_total)
        if roles[i] == HELDOUT_ROLE
    ]
    return records, heldout


def _generate_pool(
    config: GameConfig, model: Any, tokenizer: Any, *, console: Any, progress: bool
) -> list[str]:
    """Pool texts sampled from the base model; with shift, the first ``n_members`` from the
    natural prompts and the rest from the shifted ones.

    Without shift a text is the continuation alone: prompt words shared by both classes add
    nothing but small-sample noise (the blind baseline can even fall below 0.5 on them). With
    shift a text starts with its prompt, so the topic shows as a title does in real shifted
    benchmarks."""
    assert config.words is not None
    n_total = config.pool_size + config.heldout
    n_natural = config.n_members if config.shift else n_total
    parts = [(NATURAL_PROMPTS, n_natural, config.seed, config.pool_temperature)]
    if n_natural < n_total:
        parts.append(
            (SHIFT_PROMPTS, n_total - n_natural, config.seed + 7919, config.shift_temperature)
        )
    texts: list[str] = []
    with _bar(console, progress, "generating pool", n_total) as advance:
        for prompts, n, seed, temperature in parts:
            texts += generate_texts(
                model,
                tokenizer,
                n,
                words=config.words,
                prompts=prompts,
                seed=seed,
                temperature=temperature,
                top_k=POOL_TOP_K,
                avoid=set(texts),
                advance=advance,
                keep_prompt=config.shift,
            )
    return texts


def _canary_records(
    config: GameConfig,
    model: Any,
    tokenizer: Any,
    avoid: set[str],
    *,
    console: Any,
    progress: bool,
) -> list[dict[str, Any]]:
    n = config.n_canaries_made
    if n == 0:
        return []
    words = config.canary_words
    assert words is not None
    if config.canary_generator == "random":
        texts = random_token_texts(tokenizer, n, words=words, seed=config.seed, avoid=avoid)
    else:
        make = (
            high_perplexity_texts
            if config.canary_generator == "high-perplexity"
            else generate_texts
        )
        with _bar(console, progress, "generating canaries", n) as advance:
            texts = make(
                model,
                tokenizer,
                n,
                words=words,
                prompts=("",),
                seed=config.seed + 104729,
                temperature=config.canary_temperature,
                avoid=avoid,
                advance=advance,
                tokens_per_word=CANARY_TOKENS_PER_WORD,
            )
    if config.canary_inclusion == "bernoulli":  # one-run design: a fair coin per canary text
        r = config.canary_repetitions[0]
        roles = [(bool(b), r) for b in inclusion_draw(texts, seed=config.seed)]
    else:
        roles = _canary_roles(config, n)
    records = []
    order = np.random.default_rng([config.seed, 2]).permutation(n)  # ids reveal no role
    for j, i in enumerate(order):
        member, r = roles[i]
        records.append(_record(f"canary-{j:05d}", texts[i], member, "canary", r))
    return records


def _canary_roles(config: GameConfig, n: int) -> list[tuple[bool, int]]:
    """(member, repetition count) of the ``i``-th generated canary, from a seeded permutation.

    The role must not follow generation order: later generation rounds sample with a larger
    token budget and keep other texts (those the first round cut short), so a split by position
    would put them all among the non-members of the last group. Each of the ``n`` slots is one
    role: ``k`` members and ``k`` non-members per repetition count."""
    half, k, reps = n // 2, config.canaries_per_repetition, config.canary_repetitions
    slots = np.random.default_rng([config.seed, 3]).permutation(n)
    return [(bool(s < half), reps[int(s % half) // k]) for s in slots]


def _record(key: str, text: str, member: bool, kind: str, r: int) -> dict[str, Any]:
    group = "natural" if kind == "natural" else f"canary x{r}"
    return {
        "id": key,
        "text": text,
        "label": MEMBER if member else NON_MEMBER,
        "meta": {
            "kind": kind,
            "repetitions": r if member else 0,
            "group": group,
            "split": "member" if member else "nonmember",
        },
    }


def make_records(
    plan: BuildPlan, model: Any, tokenizer: Any, *, console: Any, progress: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(candidates: natural texts and canaries, held-out non-members) of a game of single texts
    (a document game's rows are :func:`imprint.game.documents.document_records`)."""
    natural, heldout = _natural_records(plan, model, tokenizer, console=console, progress=progress)
    avoid = {r["text"] for r in natural + heldout}
    canaries = _canary_records(
        plan.config, model, tokenizer, avoid, console=console, progress=progress
    )
    return natural + canaries, heldout


class _bar:
    """A rich progress bar as a context manager yielding ``advance(n)``."""

    def __init__(self, console: Any, enabled: bool, label: str, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._bar = Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
        )
        self._task = self._bar.add_task(label, total=total)

    def __enter__(self) -> Any:
        self._bar.start()
        return lambda n: self._bar.advance(self._task, n)

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()
