"""Reference models of a game: K models fine-tuned like the target on random halves of the game's
population, with the membership of every candidate in every model recorded (LiRA, RMIA).

The population is the game's candidates, members and non-members alike (natural texts and
canaries; a canary of group ``canary xR`` is repeated R times in a reference model that trains
on it, as in the target). Held-out texts are in no model: they are the population texts RMIA
compares with. Models come in pairs: model ``2j`` trains on a seeded random half of the
population and model ``2j+1`` on the other half, so with an even K every candidate is IN for
exactly K/2 models (LiRA's online Gaussians both get K/2 values); pair ``j``'s split depends on
the game's seed and ``j`` only, so asking for more models later trains only the new ones.
Each model is trained with the game's method, epochs, learning rate and batch size (its own
shuffling seed) and written atomically to ``DIR/references/ref-<i>/`` with a ``reference.json``
holding its content key; a model whose key matches is reused, never retrained. The training
manifest ``DIR/references/training-manifest.json`` (see :mod:`imprint.training_manifest`) is what
``imprint run --references DIR`` reads.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from imprint.backends.models import load_causal_lm
from imprint.backends.start_token import StartToken, write_trained_start_token
from imprint.errors import ConfigError
from imprint.game.build import DATA, HELDOUT, MODEL, _check_base_model, read_manifest
from imprint.game.config import GameConfig
from imprint.game.start import game_tokens
from imprint.game.train import encode_sequences, prepare_model, save_model, train
from imprint.training_manifest import (
    GAME_MANIFEST,
    REFERENCES_DIR,
    ReferenceModel,
    write_training_manifest,
)

__all__ = ["MAX_REFERENCE_MODELS", "build_references", "reference_halves"]

#: Bump when what a reference model is changes (invalidates cached reference models).
REFERENCE_FORMAT = 1
REFERENCE_JSON = "reference.json"
#: Each reference model costs as much training as the target: a bound against typos.
MAX_REFERENCE_MODELS = 256


def reference_halves(ids: list[str], k: int, seed: int) -> list[frozenset[str]]:
    """The training set of each of ``k`` reference models over the population ``ids``.

    Model ``2j`` gets ``len(ids) // 2`` ids drawn by the seed ``(seed, 7, j)``, model ``2j+1``
    the rest; the result for model ``i`` does not depend on ``k``."""
    order = sorted(ids)
    halves: list[frozenset[str]] = []
    for i in range(k):
        perm = np.random.default_rng([seed, 7, i // 2]).permutation(len(order))
        chosen = perm[: len(order) // 2] if i % 2 == 0 else perm[len(order) // 2 :]
        halves.append(frozenset(order[j] for j in chosen))
    return halves


def _repetitions(row: dict[str, Any]) -> int:
    """Times a reference model that trains on ``row`` sees it: its canary group's count."""
    group = str(row.get("meta", {}).get("group", "natural"))
    return int(group.split("x", 1)[1]) if group.startswith("canary x") else 1


def _key(game_key: str, index: int) -> str:
    blob = json.dumps([game_key, index, REFERENCE_FORMAT]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _is_built(folder: Path, key: str) -> bool:
    try:
        info = json.loads((folder / REFERENCE_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(info.get("complete")) and info.get("key") == key and (folder / MODEL).is_dir()


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def build_references(
    folder: Path | str,
    k: int,
    *,
    device: str = "auto",
    console: Any = None,
    progress: bool = True,
) -> Path:
    """Train (or reuse) ``k`` reference models for the complete game in ``folder``; return the
    training manifest's path. Timings land in each model's ``reference.json`` (``train_s``)."""
    folder = Path(folder)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_REFERENCE_MODELS:
        raise ConfigError(
            f"reference models: K must be an integer in 1..{MAX_REFERENCE_MODELS}, got {k!r}"
        )
    manifest = read_manifest(folder)
    if manifest is None:
        raise ConfigError(f"{folder} holds no complete game; build the game first")
    config = GameConfig.from_dict(manifest["config"])
    rows = _read_rows(folder / DATA)
    halves = reference_halves([r["id"] for r in rows], k, config.seed)
    root = folder / REFERENCES_DIR
    keys = [_key(manifest["config_hash"], i) for i in range(k)]
    todo = [i for i in range(k) if not _is_built(root / f"ref-{i}", keys[i])]
    if todo:
        _train_missing(manifest, config, rows, halves, keys, todo, root, device, console, progress)
    ids = frozenset(r["id"] for r in rows)
    models = [
        ReferenceModel(f"reference-{i}", str((root / f"ref-{i}" / MODEL).resolve()), h, ids - h)
        for i, h in enumerate(halves)
    ]
    population = [r["text"] for r in _read_rows(folder / HELDOUT)]
    path = root / GAME_MANIFEST
    write_training_manifest(path, models, population=population)
    return path


def _train_missing(
    manifest: dict[str, Any],
    config: GameConfig,
    rows: list[dict[str, Any]],
    halves: list[frozenset[str]],
    keys: list[str],
    todo: list[int],
    root: Path,
    device: str,
    console: Any,
    progress: bool,
) -> None:
    """Load the base model once, then train each missing reference model from a copy of it."""
    from imprint.report.terminal import status

    status(console, f"game: training reference models {todo} ({len(todo)} of them)", stage="game")
    base, tokenizer = load_causal_lm(config.model, dtype="float32", device=device)
    _check_base_model(base, tokenizer, config)
    # the tokens the game's target was trained with (an older game's: BOS and EOS)
    start, end = game_tokens(manifest, tokenizer)
    encoded = encode_sequences(
        tokenizer,
        {r["id"]: r["text"] for r in rows},
        max_length=config.max_length,
        start_id=start.ids[0],
        end_id=end,
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start.ids[0]
    for i in todo:
        chosen = [r for r in rows if r["id"] in halves[i]]
        sequences = [encoded[r["id"]] for r in chosen for _ in range(_repetitions(r))]
        # the game's recipe with its own seed: shuffling (and LoRA's init) differ per model
        ref_config = replace(config, seed=config.seed * 1_000 + 101 + i)
        model = prepare_model(copy.deepcopy(base), ref_config, config.model)
        t0 = time.time()
        losses = train(
            model,
            sequences,
            ref_config,
            pad_id=pad,
            epochs=config.epochs,
            console=console,
            progress=progress,
        )
        info = {
            "complete": True,
            "key": keys[i],
            "index": i,
            "seed": ref_config.seed,
            "members": sorted(halves[i]),
            "training_sequences": len(sequences),
            "train_loss": losses,
            "train_s": round(time.time() - t0, 2),
        }
        _write_reference(
            root / f"ref-{i}", model, tokenizer, info, start=start, lora=config.method == "lora"
        )
        del model


def _write_reference(
    folder: Path,
    model: Any,
    tokenizer: Any,
    info: dict[str, Any],
    *,
    start: StartToken,
    lora: bool,
) -> None:
    """Save to a temporary sibling, then rename: a folder with a reference.json is complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.tmp-"))
    try:
        save_model(model, tokenizer, tmp / MODEL, lora=lora)
        write_trained_start_token(tmp / MODEL, start)
        (tmp / REFERENCE_JSON).write_text(json.dumps(info, indent=1), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)  # a stale model (other key) or a broken one
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def reference_timings(folder: Path | str) -> dict[str, float]:
    """``ref-<i>`` -> training seconds, for each reference model built in game ``folder``."""
    out: dict[str, float] = {}
    for path in sorted((Path(folder) / REFERENCES_DIR).glob(f"ref-*/{REFERENCE_JSON}")):
        info = json.loads(path.read_text(encoding="utf-8"))
        out[path.parent.name] = float(info.get("train_s", 0.0))
    return out
