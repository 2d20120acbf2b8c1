"""Canaries for a one-run audit of a user's own training run, and their secret inclusion mask.

``imprint canaries make --n M --out DIR`` writes::

    canaries.jsonl   every canary: id, text (what the audit scores)
    design.json      how the texts were made: design, words, model, the text seed
    insert.jsonl     the canaries to add to the training data, one {"text": ...} per line
    mask.json        the secret: which canary ids are in, the coin seed, a fingerprint of
                     canaries.jsonl

Each canary is in with probability 1/2 by its own fair coin (:func:`~imprint.game.texts.
inclusion_draw`), Steinke et al. 2023's one-run design. The coins' seed is secret: fresh from
:mod:`secrets` unless the user fixes one, and written to ``mask.json`` only; the texts have their
own seed, so the public files (``canaries.jsonl``, ``design.json``) do not recompute the mask.
``insert.jsonl`` is the included half itself: it goes to the training pipeline only. Train on it
(each canary once), keep ``mask.json`` away from the model, then ``imprint audit --model M
--canaries DIR``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from imprint.errors import ConfigError, DataError
from imprint.outdir import mark_output

__all__ = [
    "CANARIES",
    "DESIGN",
    "DESIGNS",
    "INSERT",
    "MASK",
    "CanarySet",
    "canary_fingerprint",
    "canary_seeds",
    "load_canaries",
    "make_canary_texts",
    "write_canaries",
]

CANARIES, INSERT, MASK = "canaries.jsonl", "insert.jsonl", "mask.json"
DESIGN = "design.json"
#: Canary designs: uniformly random word tokens, text sampled from the base model (at a
#: temperature), or the least likely half of twice as many sampled texts.
DESIGNS = ("random", "sampled", "high-perplexity")
MASK_FORMAT = 1


@dataclass(frozen=True)
class CanarySet:
    """Canaries in file order with their inclusion mask (True = trained on)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    included: np.ndarray
    info: dict[str, Any]


def canary_seeds(seed: int | None) -> tuple[int, int]:
    """``(text seed, coin seed)``. No ``seed``: both fresh, the coin seed from :mod:`secrets`
    (63 bits, unguessable). A user's ``seed`` is the coin seed and the text seed is a one-way
    hash of it, so the public text seed does not give the coins (a guessable ``seed`` does:
    whoever knows it recomputes texts and mask alike)."""
    if seed is None:
        return secrets.randbits(31), secrets.randbits(63)
    digest = hashlib.sha256(f"imprint-canary-texts\0{seed}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1, seed


def canary_fingerprint(ids: list[str], texts: list[str]) -> str:
    """Content key of a canary file: its (id, text) pairs, in any order."""
    blob = json.dumps(sorted(zip(ids, texts, strict=True)), ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def make_canary_texts(
    model: Any,
    tokenizer: Any,
    n: int,
    *,
    design: str,
    words: int,
    seed: int,
    temperature: float = 1.5,
) -> list[str]:
    """``n`` distinct canaries of ``words`` words in ``design`` (see :data:`DESIGNS`)."""
    from imprint.game.texts import generate_texts, high_perplexity_texts, random_token_texts

    if design not in DESIGNS:
        raise ConfigError(f"unknown canary design {design!r}; use one of {DESIGNS}")
    if design == "random":
        return random_token_texts(tokenizer, n, words=words, seed=seed)
    make = high_perplexity_texts if design == "high-perplexity" else generate_texts
    return make(
        model,
        tokenizer,
        n,
        words=words,
        prompts=("",),
        seed=seed + 104729,
        temperature=temperature,
        tokens_per_word=2.0,
    )


def write_canaries(out: Path, texts: list[str], *, seed: int, info: dict[str, Any]) -> CanarySet:
    """Write ``canaries.jsonl``, ``design.json`` (``info``: public), ``insert.jsonl`` and
    ``mask.json`` into the new folder ``out``; ``seed`` is the secret coin seed, in the mask only.
    """
    from imprint.game.texts import inclusion_draw

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty folder; pass a new folder")
    if len(set(texts)) != len(texts):
        raise DataError("canary texts must be distinct (duplicates would share one coin)")
    ids = [f"canary-{i:05d}" for i in range(len(texts))]
    included = inclusion_draw(texts, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    _jsonl(out / CANARIES, [{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)])
    (out / DESIGN).write_text(json.dumps(info, indent=2), encoding="utf-8")
    _jsonl(out / INSERT, [{"text": t} for t, b in zip(texts, included, strict=True) if b])
    mask = {
        "imprint_canary_mask": MASK_FORMAT,
        "canaries_fingerprint": canary_fingerprint(ids, texts),
        "n": len(ids),
        "included": [i for i, b in zip(ids, included, strict=True) if b],
        "seed": seed,
        **info,
    }
    (out / MASK).write_text(json.dumps(mask, indent=2), encoding="utf-8")
    mark_output(out, "canaries")  # no other command's --overwrite deletes the secret mask
    return CanarySet(tuple(ids), tuple(texts), included, mask)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read_rows(path: Path) -> list[dict[str, Any]]:
    from imprint.data.loaders import json_objects  # the data loaders' reading, errors and all

    rows = []
    for n, row in json_objects(path):
        if not isinstance(row.get("text"), str) or "id" not in row:
            raise DataError(f"{path}: line {n}: each canary needs an 'id' and a 'text'")
        rows.append(dict(row))
    return rows


def _included_ids(info: dict[str, Any], mask_path: Path) -> set[str]:
    """The ids the mask says were trained on; a mask whose ``included`` is not a list of ids
    (null, a string, a number: edited or damaged) is refused, never read as "none"."""
    listed = info.get("included")
    if not isinstance(listed, list) or not all(isinstance(i, str | int) for i in listed):
        raise DataError(
            f"mask {mask_path}: 'included' must be the list of canary ids that were trained on, "
            f"got {json.dumps(listed)[:40]}; pass the mask.json imprint canaries make wrote"
        )
    return set(map(str, listed))


def load_canaries(folder: Path, *, mask: Path | None = None) -> CanarySet:
    """The canaries of ``folder`` and their mask (``mask`` or ``folder/mask.json``); a mask made
    for another canary file is refused."""
    path, mask_path = Path(folder) / CANARIES, Path(mask) if mask else Path(folder) / MASK
    for p, what in ((path, "canary file"), (mask_path, "mask")):
        if not p.is_file():
            raise DataError(f"{what} {p} not found; make one with imprint canaries make --out DIR")
    rows = _read_rows(path)
    ids, texts = [str(r["id"]) for r in rows], [r["text"] for r in rows]
    try:
        info = json.loads(mask_path.read_text(encoding="utf-8"))
    except ValueError as err:  # a UnicodeDecodeError too
        raise DataError(f"mask {mask_path} is not JSON ({err}); pass the mask.json imprint "
                        "canaries make wrote") from err  # fmt: skip
    if not isinstance(info, dict) or info.get("imprint_canary_mask") != MASK_FORMAT:
        raise DataError(f"{mask_path} is not an imprint canary mask (imprint canaries make)")
    found = canary_fingerprint(ids, texts)
    if info.get("canaries_fingerprint") != found:
        raise DataError(
            f"mask {mask_path} does not match {path} (made for canaries "
            f"{info.get('canaries_fingerprint')}, the file is {found}); pass the mask written "
            "with these canaries"
        )
    inside = _included_ids(info, mask_path)
    if not inside <= set(ids):
        raise DataError(f"mask {mask_path} names {len(inside - set(ids))} id(s) not in {path}")
    included = np.array([i in inside for i in ids], dtype=bool)
    return CanarySet(tuple(ids), tuple(texts), included, info)
