"""Texts of a game: the pool (a file, or sampled from the base model) and the canaries.

Generated texts are sampled with a fixed seed per batch, so the same seed, model and settings give
the same texts. Every text is cut to its first ``words`` words joined by single spaces (texts the
model ends early are re-sampled with a fresh seed), so members and non-members have one length.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.backends.scoped import seeded_torch
from imprint.data import LoadedData, Sample, fingerprint_samples, resolve_data
from imprint.data.loaders import CSV_SUFFIXES, JSONL_SUFFIXES, PARQUET_SUFFIXES
from imprint.data.pools import load_unlabelled
from imprint.data.text_checks import is_blank
from imprint.errors import ConfigError, DataError
from imprint.game.start import training_start_token

__all__ = [
    "NATURAL_PROMPTS",
    "SHIFT_PROMPTS",
    "generate_texts",
    "high_perplexity_texts",
    "inclusion_draw",
    "load_pool",
    "random_token_texts",
    "word_tokens",
]

#: Generic prompts for a generated pool: members and non-members are drawn from them alike.
NATURAL_PROMPTS: tuple[str, ...] = (
    "Once upon a time,",
    "Yesterday I",
    "The history of the town",
    "Scientists have found that",
    "My favourite place is",
    "The best way to learn",
    "In the news today,",
    "A good friend",
)
#: Prompts of a different topic: with ``shift=True`` the non-members come from these (sampled at
#: ``GameConfig.shift_temperature``), a stand-in for e.g. newer documents on other subjects.
SHIFT_PROMPTS: tuple[str, ...] = (
    "Recipe: to cook a simple soup,",
    "In the kitchen, the chef",
    "The secret of a good cake is",
    "Ingredients for dinner tonight:",
)

#: Samples per generation batch (bigger batches use the CPU better).
GEN_BATCH = 64
#: Extra samples drawn per round, as a fraction of those still missing.
SPARE = 0.2
MAX_ROUNDS = 8

Advance = Callable[[int], None]
DATA_FILE_SUFFIXES = (*JSONL_SUFFIXES, *CSV_SUFFIXES, *PARQUET_SUFFIXES)


def _cut(text: str, words: int | None) -> str:
    parts = text.split()
    return " ".join(parts[:words]) if words is not None else text


def load_pool(spec: str, *, words: int | None) -> tuple[list[Sample], LoadedData | None, dict]:
    """Texts of a pool: a ``.txt`` file (one text per line), a JSONL/CSV/Parquet file with or
    without a label field, or any data spec; labels are ignored.

    Returns ``(samples, loaded, dropped)``: samples cut to ``words`` words (duplicates after the
    cut removed and counted in ``dropped``), in file order.
    """
    path = Path(spec).expanduser()
    loaded: LoadedData | None = None
    if path.suffix.lower() == ".txt":
        if not path.is_file():
            raise DataError(f"pool file {spec!r} does not exist; pass a file or 'generate'")
        lines = path.read_text(encoding="utf-8").splitlines()
        samples = [
            Sample(f"{path.stem}:{i}", line.strip(), 0)
            for i, line in enumerate(lines, 1)
            if not is_blank(line)  # an empty line, or one of zero-width characters only
        ]
        if not samples:
            raise DataError(f"pool file {spec!r} has no non-empty lines")
    else:
        try:  # a pool's labels are ignored: a data file needs none (as `imprint run --pool`)
            if path.suffix.lower() in DATA_FILE_SUFFIXES:
                loaded = load_unlabelled(path)
            else:
                loaded = resolve_data(spec, require_both_classes=False)
        except DataError as err:
            raise DataError(f"pool {spec!r}: {err}") from err
        samples = list(loaded.samples)
    out: list[Sample] = []
    seen: set[str] = set()
    dropped: dict[str, int] = {}
    for s in samples:
        text = _cut(s.text, words)
        if text in seen:
            dropped["duplicate text"] = dropped.get("duplicate text", 0) + 1
            continue
        seen.add(text)
        out.append(Sample(s.id, text, 0, {}))
    return out, loaded, dropped


def pool_fingerprint(samples: Sequence[Sample]) -> str:
    return fingerprint_samples(Sample(s.id, s.text, 0) for s in samples)


def _start_id(tokenizer: Any) -> int:
    """Texts are sampled after the token they are trained and scored after (game format 5)."""
    try:
        return training_start_token(tokenizer).ids[0]
    except ConfigError as err:
        raise DataError(f"cannot generate: {err}") from err


def _sample_batch(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    seed: int,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
) -> list[str]:
    """One batch of continuations (prompt not included), left-padded, seeded."""
    import torch

    bos = _start_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else bos
    encoded = [[bos, *tokenizer(p, add_special_tokens=False)["input_ids"]] for p in prompts]
    width = max(len(e) for e in encoded)
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    device = next(model.parameters()).device
    # seeded inside a fork of torch's RNGs: the caller's random state is left as it was
    with seeded_torch(seed, device), torch.no_grad():
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=True,
            temperature=temperature,
            top_p=1.0,
            top_k=top_k,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            pad_token_id=pad,
        )
    return [tokenizer.decode(row[width:], skip_special_tokens=True) for row in out.tolist()]


def generate_texts(
    model: Any,
    tokenizer: Any,
    n: int,
    *,
    words: int,
    prompts: Sequence[str],
    seed: int,
    temperature: float,
    top_k: int = 0,
    avoid: set[str] | None = None,
    advance: Advance | None = None,
    tokens_per_word: float = 1.4,
    keep_prompt: bool = False,
) -> list[str]:
    """``n`` distinct texts of exactly ``words`` words sampled from ``model``.

    Samples are drawn in seeded batches, the ``j``-th sample steered by prompt
    ``j % len(prompts)``; a text is the continuation (``keep_prompt``: the prompt followed by
    the continuation), cut to ``words`` words. Samples that come out short or
    duplicate (also of ``avoid``) are skipped. Each round asks for :data:`SPARE` more samples than
    still missing, so a second round is rare; after :data:`MAX_ROUNDS` rounds a
    :class:`DataError` says how many could be made. A sample is ``ceil(words *
    tokens_per_word) + 4`` tokens (1.5 times that in later rounds): the budget, not the model,
    bounds generation time. ``top_k=0`` samples from the whole (tempered) distribution.
    """
    avoid = set(avoid or ())
    texts: list[str] = []
    max_new = math.ceil(words * tokens_per_word) + 4
    drawn = batch_no = 0
    for round_no in range(MAX_ROUNDS):
        need = n - len(texts)
        if need <= 0:
            break
        wanted = need + math.ceil(need * SPARE)
        for start in range(0, wanted, GEN_BATCH):
            size = min(GEN_BATCH, wanted - start)
            used = [prompts[(drawn + j) % len(prompts)] for j in range(size)]
            outs = _sample_batch(
                model,
                tokenizer,
                used,
                seed=seed * 1_000_003 + batch_no,
                max_new_tokens=max_new if round_no == 0 else math.ceil(max_new * 1.5),
                temperature=temperature,
                top_k=top_k,
            )
            drawn, batch_no = drawn + size, batch_no + 1
            added = _accept(outs, used if keep_prompt else None, words, n, texts, avoid)
            if advance is not None:
                advance(added)
            if len(texts) >= n:
                break
    if len(texts) < n:
        raise DataError(
            f"could generate only {len(texts)} of {n} distinct texts of {words} words in "
            f"{MAX_ROUNDS} rounds (the model keeps ending early or repeating itself). Fix: ask "
            "for fewer or shorter texts, a higher temperature, or give a pool file."
        )
    return texts


def _accept(
    outs: Sequence[str],
    prompts: Sequence[str] | None,
    words: int,
    n: int,
    texts: list[str],
    avoid: set[str],
) -> int:
    """Append to ``texts`` (up to ``n``) the samples long enough and not in ``avoid``, each cut
    to ``words`` words and prefixed by its prompt when ``prompts`` are given; returns how many."""
    before = len(texts)
    for j, raw in enumerate(outs):
        if prompts is not None and prompts[j]:
            raw = f"{prompts[j]} {raw}"
        text = _cut(raw, words)
        if len(texts) < n and len(raw.split()) >= words and text not in avoid:
            texts.append(text)
            avoid.add(text)
    return len(texts) - before


def word_tokens(tokenizer: Any) -> list[tuple[int, str]]:
    """Token ids that decode to one printable word with a leading space (e.g. ``" cat"``)."""
    special = set(tokenizer.all_special_ids)
    out = []
    for i in range(len(tokenizer)):
        if i in special:
            continue
        piece = tokenizer.decode([i])
        word = piece[1:]
        if (
            piece.startswith(" ")
            and word.isprintable()
            and word
            and not any(c.isspace() for c in word)
        ):
            out.append((i, piece))
    return out


def random_token_texts(
    tokenizer: Any,
    n: int,
    *,
    words: int,
    seed: int,
    avoid: set[str] | None = None,
) -> list[str]:
    """``n`` distinct texts of ``words`` uniformly random token ids, decoded.

    Ids are drawn from the tokens that decode to one word with a leading space (see
    :func:`word_tokens`), so each text has exactly ``words`` words and no broken bytes.
    """
    vocab = word_tokens(tokenizer)
    if len(vocab) < 2:
        raise DataError(
            "the tokenizer has fewer than 2 word tokens (a leading space and a printable word); "
            "random canaries need them. Use canary_generator='sampled'."
        )
    rng = np.random.default_rng([seed, 7])
    avoid = set(avoid or ())
    out: list[str] = []
    for _ in range(n * MAX_ROUNDS):
        if len(out) == n:
            break
        picks = rng.integers(0, len(vocab), size=words)
        text = "".join(vocab[k][1] for k in picks).strip()
        if text not in avoid:
            out.append(text)
            avoid.add(text)
    if len(out) < n:
        raise DataError(
            f"could make only {len(out)} of {n} distinct random canaries of {words} words from "
            f"this tokenizer's {len(vocab)} word tokens. Fix: more canary words or fewer canaries."
        )
    return out


def inclusion_draw(texts: Sequence[str], *, seed: int) -> np.ndarray:
    """One-run inclusion mask: canary ``i`` is in (True) with probability 1/2, independently.

    Each bit is the low bit of SHA-256 over the seed and the canary's own text, so a canary's
    draw depends on nothing else: not its position, nor the other canaries (Steinke et al. 2023
    need independent fair coins; a hash of text and secret seed is one, and reordering or
    subsetting the canary file leaves every draw as it was).
    """
    bits = [
        hashlib.sha256(f"imprint-canary\0{seed}\0{text}".encode()).digest()[0] & 1 for text in texts
    ]
    return np.array(bits, dtype=bool)


def _mean_nll(model: Any, tokenizer: Any, texts: Sequence[str], *, batch: int = 16) -> np.ndarray:
    """Mean token negative log-likelihood of each text under ``model``, after the start token."""
    import torch

    start = _start_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start
    device = next(model.parameters()).device
    out: list[float] = []
    for i in range(0, len(texts), batch):
        rows = [
            [start, *tokenizer(t, add_special_tokens=False)["input_ids"]]
            for t in texts[i : i + batch]
        ]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[:, 1:], reduction="none"
        )
        keep = mask[:, 1:].float()
        out += ((nll * keep).sum(1) / keep.sum(1).clamp(min=1)).tolist()
    return np.array(out)


def high_perplexity_texts(
    model: Any, tokenizer: Any, n: int, *, pool_factor: int = 2, **generate: Any
) -> list[str]:
    """``n`` sampled texts the base model finds least likely: ``pool_factor * n`` are sampled
    (:func:`generate_texts` with ``generate``'s arguments) and the ``n`` with the highest mean
    token loss kept, in sampling order. Odd texts are memorised from fewer exposures."""
    texts = generate_texts(model, tokenizer, pool_factor * n, **generate)
    nll = _mean_nll(model, tokenizer, texts)
    keep = np.sort(np.argsort(-nll, kind="stable")[:n])
    return [texts[i] for i in keep]
