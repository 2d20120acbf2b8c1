"""``game:DIR`` as a model spec (the fine-tuned ``DIR/model``) and a data spec (``DIR/data.jsonl``);
``game-heldout:DIR`` as the data spec of the game's held-out non-members (a shot pool).

The data scheme lifts the nested ``meta`` object of each line into ``Sample.meta``, so metrics
can be broken down by ``group``, ``kind``, ``repetitions`` or ``split``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from imprint.data import LoadedData, Sample, fingerprint_samples, load_file
from imprint.errors import ConfigError, DataError
from imprint.game.build import DATA, HELDOUT, MODEL, manifest_problem, read_manifest

__all__ = ["check_game_data", "game_dir", "game_model_spec", "load_game_data", "load_game_heldout"]


def game_dir(arg: str, *, error: type[Exception] = ConfigError) -> Path:
    """The folder of a complete game named by ``arg``, else ``error`` saying what is wrong."""
    folder = Path(arg).expanduser()
    if not arg or not folder.is_dir():
        raise error(
            f"game:{arg}: {folder} is not a folder; pass game:DIR with DIR a folder made by "
            "`imprint game build --out DIR`"
        )
    if (problem := manifest_problem(folder)) is not None:
        raise error(
            f"game:{arg}: {folder} is not an imprint game ({problem}); build one with "
            f"`imprint game build --out {folder}` (with --force to replace a broken one)"
        )
    for part in (MODEL, DATA):
        if not (folder / part).exists():
            raise error(f"game:{arg}: {folder / part} is missing; rebuild the game with --force")
    return folder


def game_model_spec(arg: str) -> str:
    """``game:DIR`` -> the spec of the game's fine-tuned model folder."""
    return str(game_dir(arg, error=ConfigError).resolve() / MODEL)


def load_game_data(arg: str, **field_kwargs: Any) -> LoadedData:
    """``game:DIR`` -> the game's candidates, labelled, with the game's meta fields flattened."""
    folder = game_dir(arg, error=DataError)
    field_kwargs = {k: v for k, v in field_kwargs.items() if v is not None}
    field_kwargs.setdefault("id_field", "id")
    loaded = load_file(folder / DATA, **field_kwargs)
    samples = []
    for s in loaded.samples:
        meta = dict(s.meta)
        nested = meta.pop("meta", None)
        if isinstance(nested, dict):
            meta.update(nested)
        samples.append(replace(s, meta=meta))
    check_game_data(folder, samples, f"game:{arg}")
    return replace(loaded, samples=tuple(samples), source=f"game:{arg}")


def check_game_data(folder: Path, samples: Sequence[Sample], where: str) -> None:
    """Refuse a game whose ``data.jsonl`` (``samples``, in file order) is not what it was built
    with: game.json's ``data_fingerprint`` (ids, texts, labels) differs, e.g. a label edited."""
    manifest = read_manifest(folder)
    recorded = manifest.get("data_fingerprint") if manifest else None
    if recorded is not None and fingerprint_samples(samples) != recorded:
        raise DataError(
            f"{where}: {folder / DATA} is not the data this game was built with (its ids, texts "
            f"and labels do not give game.json's data_fingerprint: edited?); restore it, or "
            f"rebuild the game with `imprint game build --force --out {folder}`"
        )


def load_game_heldout(arg: str, **field_kwargs: Any) -> LoadedData:
    """``game-heldout:DIR`` -> the game's held-out non-members (label 0, never trained, not
    candidates), e.g. as the ``nonmembers`` pool of few-shot attacks."""
    folder = game_dir(arg, error=DataError)
    path = folder / HELDOUT
    if not path.exists() or not path.read_text(encoding="utf-8").strip():
        raise DataError(
            f"game-heldout:{arg}: the game has no held-out non-members; build it with heldout > 0"
        )
    field_kwargs = {k: v for k, v in field_kwargs.items() if v is not None}
    field_kwargs.setdefault("id_field", "id")
    field_kwargs["require_both_classes"] = False
    loaded = load_file(path, **field_kwargs)
    return replace(loaded, source=f"game-heldout:{arg}")
