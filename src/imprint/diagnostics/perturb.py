"""Modified members: how often does an attack still call a slightly changed member a member?

MIMIR (Duan et al. 2024, Table 4) edits members at small word edit distances and asks what
"false positive" rate these near-members get at thresholds calibrated on natural non-members.
Three offline perturbations, all seeded and deterministic:

- ``editD``: exactly D distinct words replaced by a different word drawn from the candidates'
  vocabulary (word-level Hamming distance D; punctuation around a word is kept);
- ``neighbour5``: 5 % of the words (at least one) replaced by a context-plausible word: the most
  frequent successor of the previous word in a bigram table fitted on the candidate pool (a
  deterministic offline stand-in for masked-LM neighbours);
- ``paraphrase``: any ``generate(prompt) -> str`` callable, e.g. :func:`hf_generator` on a local
  causal LM.

:func:`perturbed_rows` writes natural members, natural non-members and the perturbed members as
dataset rows; perturbed members are labelled 0 (their exact text was never trained on) with
``perturbation`` and ``source_id`` fields. :func:`imprint.diagnostics.runs.perturbation_table`
reads the run folder ``imprint run`` produces on that dataset.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from imprint.data import Sample, text_hash
from imprint.errors import ConfigError, DataError

__all__ = [
    "DEFAULT_EDITS",
    "PARAPHRASE_PROMPT",
    "BigramNeighbours",
    "PerturbedSet",
    "hf_generator",
    "paraphrase",
    "perturbed_rows",
    "random_word_edits",
    "word_tokens",
    "write_perturbed",
]

DEFAULT_EDITS = (1, 10, 25)
DEFAULT_NEIGHBOUR_FRACTION = 0.05
PARAPHRASE_PROMPT = (
    "Paraphrase the following text. Keep its meaning and roughly its length, but change the "
    "wording. Answer with the paraphrase only.\n\nText: {text}\n\nParaphrase:"
)
_TOKEN = re.compile(r"\S+")
_AFFIX = re.compile(r"^(\W*)(.*?)(\W*)$", re.S)


def word_tokens(text: str) -> list[str]:
    """Whitespace-separated tokens of ``text`` (the unit of the edit distance)."""
    return text.split()


def _core(token: str) -> tuple[str, str, str]:
    match = _AFFIX.match(token)
    assert match is not None
    return match.group(1), match.group(2), match.group(3)


def _replace(text: str, replacements: dict[int, str]) -> str:
    """``text`` with the cores of tokens at the given indices replaced; whitespace preserved."""
    pieces, last = [], 0
    for i, match in enumerate(_TOKEN.finditer(text)):
        if i in replacements:
            pre, _, post = _core(match.group())
            pieces.append(text[last : match.start()])
            pieces.append(pre + replacements[i] + post)
            last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _editable(tokens: Sequence[str]) -> list[int]:
    return [i for i, t in enumerate(tokens) if _core(t)[1]]


def _match_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word.capitalize() if like[:1].isupper() else word


def vocabulary(texts: Iterable[str]) -> list[str]:
    """Distinct lowercase word cores of ``texts``, sorted (the replacement pool)."""
    return sorted({_core(t)[1].lower() for text in texts for t in text.split()} - {""})


def random_word_edits(
    text: str, distance: int, *, vocab: Sequence[str], rng: np.random.Generator
) -> str | None:
    """``text`` with exactly ``distance`` distinct words replaced by other vocabulary words.

    Returns None when the text has fewer than ``distance`` editable words. Each chosen word's
    core (the word without surrounding punctuation) becomes a vocabulary word that differs from
    it case-insensitively, so exactly ``distance`` tokens differ.
    """
    if distance < 1:
        raise ConfigError(f"edit distance must be >= 1, got {distance}")
    if len(vocab) < 2:
        raise DataError("the vocabulary needs at least two distinct words to draw edits from")
    tokens = text.split()
    editable = _editable(tokens)
    if len(editable) < distance:
        return None
    chosen = rng.choice(editable, size=distance, replace=False)
    replacements = {}
    for i in sorted(int(c) for c in chosen):
        original = _core(tokens[i])[1]
        word = original
        while word.lower() == original.lower():
            word = vocab[int(rng.integers(len(vocab)))]
        replacements[i] = _match_case(word, original)
    return _replace(text, replacements)


class BigramNeighbours:
    """Deterministic offline neighbours from a bigram table fitted on a pool of texts."""

    def __init__(self, texts: Iterable[str], *, top: int = 8) -> None:
        following: dict[str, Counter[str]] = {}
        unigrams: Counter[str] = Counter()
        for text in texts:
            cores = [_core(t)[1].lower() for t in text.split()]
            unigrams.update(c for c in cores if c)
            for prev, nxt in zip(cores, cores[1:], strict=False):
                if prev and nxt:
                    following.setdefault(prev, Counter())[nxt] += 1
        self.following = {w: [x for x, _ in c.most_common(top)] for w, c in following.items()}
        self.frequent = [w for w, _ in unigrams.most_common(200)]
        if len(self.frequent) < 2:
            raise DataError("the pool is too small to fit neighbours (fewer than two words)")

    def substitute(self, previous: str, original: str) -> str:
        """The most frequent successor of ``previous`` that differs from ``original``."""
        low = original.lower()
        for word in self.following.get(previous.lower(), []):
            if word != low:
                return word
        close = [w for w in self.frequent if w != low and abs(len(w) - len(low)) <= 1]
        return (close or [w for w in self.frequent if w != low])[0]

    def neighbour(self, text: str, fraction: float, *, rng: np.random.Generator) -> str | None:
        """``text`` with ``ceil(fraction * words)`` words replaced; None if nothing to edit."""
        tokens = text.split()
        editable = _editable(tokens)
        count = min(len(editable), max(1, math.ceil(fraction * len(tokens))))
        if not editable:
            return None
        chosen = sorted(int(c) for c in rng.choice(editable, size=count, replace=False))
        replacements = {}
        for i in chosen:
            previous = _core(tokens[i - 1])[1] if i else ""
            original = _core(tokens[i])[1]
            replacements[i] = _match_case(self.substitute(previous, original), original)
        return _replace(text, replacements)


def paraphrase(
    texts: Sequence[str],
    generate: Callable[[str], str],
    *,
    prompt: str = PARAPHRASE_PROMPT,
) -> list[str | None]:
    """Paraphrase each text with ``generate(prompt.format(text=...))``.

    An empty answer, or one identical to the text, gives None (counted by the caller).
    """
    if "{text}" not in prompt:
        raise ConfigError("the paraphrase prompt must contain '{text}' where the text goes")
    out: list[str | None] = []
    for text in texts:
        answer = generate(prompt.format(text=text)).strip()
        out.append(answer if answer and answer != text.strip() else None)
    return out


def hf_generator(
    spec: str, *, max_new_tokens: int = 256, device: str = "auto", dtype: str = "auto"
) -> Callable[[str], str]:
    """``generate(prompt) -> str`` on a local causal LM (greedy; chat template if it has one)."""
    import torch

    from imprint.backends.models import load_causal_lm

    model, tokenizer = load_causal_lm(spec, dtype=dtype, device=device)

    def generate(prompt: str) -> str:
        if getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}],
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )["input_ids"]
        else:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        ids = ids.to(model.device)
        with torch.no_grad():
            new = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            )[0, ids.shape[1] :]
        return str(tokenizer.decode(new, skip_special_tokens=True))

    return generate


def _row(sample: Sample, text: str, label: int, kind: str, **extra: Any) -> dict[str, Any]:
    row = {k: v for k, v in sample.meta.items() if k not in {"id", "text", "label"}}
    row.update(id=sample.id if kind == "none" else f"{sample.id}::{kind}", text=text, label=label)
    row.update(perturbation=kind, source_id=sample.id, **extra)
    return row


def perturbed_rows(
    samples: Sequence[Sample],
    *,
    edits: Sequence[int] = DEFAULT_EDITS,
    neighbour_fraction: float | None = DEFAULT_NEIGHBOUR_FRACTION,
    paraphraser: Callable[[str], str] | None = None,
    prompt: str = PARAPHRASE_PROMPT,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Dataset rows (natural samples + perturbed members) and a summary of what was made.

    Every member yields one row per perturbation it admits; members too short for an edit
    distance are skipped and counted under ``skipped``.
    """
    if not any(s.label == 1 for s in samples) or not any(s.label == 0 for s in samples):
        raise DataError("perturbation needs members (label 1) and non-members (label 0)")
    texts = [s.text for s in samples]
    members = [s for s in samples if s.label == 1]
    rows = [_row(s, s.text, s.label, "none") for s in samples]
    made: dict[str, int] = {}
    skipped: dict[str, int] = {}
    vocab = vocabulary(texts)
    for distance in edits:
        edited = _edited(members, distance, vocab, seed)
        _add_perturbed(rows, made, skipped, f"edit{distance}", edited, edit_distance=distance)
    if neighbour_fraction:
        kind = f"neighbour{round(100 * neighbour_fraction):g}"
        neighbours = _neighbours(members, BigramNeighbours(texts), neighbour_fraction, seed)
        _add_perturbed(rows, made, skipped, kind, neighbours)
    if paraphraser is not None:
        said = paraphrase([m.text for m in members], paraphraser, prompt=prompt)
        _add_perturbed(rows, made, skipped, "paraphrase", zip(members, said, strict=True))
    summary = {
        "n_members": len(members),
        "n_nonmembers": len(samples) - len(members),
        "made": made,
        "skipped": skipped,
        "edits": list(edits),
        "neighbour_fraction": neighbour_fraction,
        "paraphrase_prompt": prompt if paraphraser is not None else None,
        "seed": seed,
        "label_of_perturbed": 0,
    }
    return rows, summary


def _edited(
    members: Sequence[Sample], distance: int, vocab: list[str], seed: int
) -> Iterator[tuple[Sample, str | None]]:
    """Each member with ``distance`` random word edits (None: too short), seeded per id."""
    for s in members:
        rng = np.random.default_rng([seed, distance, int(text_hash(s.id)[:8], 16)])
        yield s, random_word_edits(s.text, distance, vocab=vocab, rng=rng)


def _neighbours(
    members: Sequence[Sample], table: BigramNeighbours, fraction: float, seed: int
) -> Iterator[tuple[Sample, str | None]]:
    """Each member with a bigram neighbour (None: none found), seeded per id."""
    for s in members:
        rng = np.random.default_rng([seed, 7919, int(text_hash(s.id)[:8], 16)])
        yield s, table.neighbour(s.text, fraction, rng=rng)


def _add_perturbed(
    rows: list[dict[str, Any]],
    made: dict[str, int],
    skipped: dict[str, int],
    kind: str,
    perturbed: Iterable[tuple[Sample, str | None]],
    **extra: Any,
) -> None:
    """Append a non-member row per perturbed member text; count made and skipped (None)."""
    for s, text in perturbed:
        if text is None:
            skipped[kind] = skipped.get(kind, 0) + 1
            continue
        rows.append(_row(s, text, 0, kind, **extra, source_label=1))
        made[kind] = made.get(kind, 0) + 1


@dataclass(frozen=True)
class PerturbedSet:
    """A perturbed dataset on disk: ``dataset`` (JSONL that ``imprint run`` loads as-is),
    ``manifest`` (source and ``summary``), ``n_rows`` and the summary of what was made."""

    dataset: Path
    manifest: Path
    n_rows: int
    summary: dict[str, Any]


def write_perturbed(
    samples: Sequence[Sample],
    out: str | Path,
    *,
    source: str,
    edits: Sequence[int] = DEFAULT_EDITS,
    neighbour_fraction: float | None = DEFAULT_NEIGHBOUR_FRACTION,
    paraphraser: Callable[[str], str] | None = None,
    prompt: str = PARAPHRASE_PROMPT,
    seed: int = 0,
) -> PerturbedSet:
    """:func:`perturbed_rows` written to ``out/perturbed.jsonl`` (UTF-8, text as is) and
    ``out/perturbed.manifest.json`` (``source``, the data spec, plus the summary)."""
    rows, summary = perturbed_rows(
        samples,
        edits=edits,
        neighbour_fraction=neighbour_fraction,
        paraphraser=paraphraser,
        prompt=prompt,
        seed=seed,
    )
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "perturbed.jsonl"
    with open(dataset, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    manifest = folder / "perturbed.manifest.json"
    manifest.write_text(json.dumps({"source": source, **summary}, indent=2) + "\n")
    return PerturbedSet(dataset, manifest, len(rows), summary)
