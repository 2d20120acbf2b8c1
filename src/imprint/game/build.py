"""Build a privacy game: split a pool, add canaries, fine-tune on the members, write the folder.

A game folder holds::

    model/         the fine-tuned model (save_pretrained: safetensors + tokenizer)
    data.jsonl     one candidate per line: id, text, label, meta {kind, repetitions, group, split}
    heldout.jsonl  held-out non-members (never trained, not candidates): few-shot prefixes
    game.json      the manifest: config, hash, per-epoch loss, versions, member ids, fingerprints

Folders are written to a temporary sibling and renamed into place, so a folder with a
``game.json`` is complete. A complete game with the same config hash is reused (``force=True``
rebuilds it); a folder holding something else is never overwritten.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from imprint.backends.models import cache_dir, fingerprint_source, load_causal_lm, resolve_model
from imprint.backends.start_token import StartToken, write_trained_start_token
from imprint.data import MEMBER, NON_MEMBER, Sample
from imprint.errors import ConfigError, DataError
from imprint.game.config import GAME_FORMAT, GENERATE, BuildPlan, GameConfig, config_hash
from imprint.game.documents import document_records, load_document_pool
from imprint.game.records import make_records
from imprint.game.start import end_token_id, training_start_token
from imprint.game.texts import load_pool, pool_fingerprint
from imprint.game.train import check_trainable, encode_sequences, prepare_model, save_model, train
from imprint.outdir import check_writable

__all__ = [
    "MANIFEST",
    "build_game",
    "build_games",
    "check_games",
    "default_game_dir",
    "manifest_problem",
    "read_manifest",
]

MANIFEST = "game.json"
DATA = "data.jsonl"
HELDOUT = "heldout.jsonl"
MODEL = "model"


def default_game_dir(key: str) -> Path:
    return cache_dir() / "games" / key


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a complete game folder, else None."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("complete") else None


def manifest_problem(folder: Path) -> str | None:
    """Why ``folder`` holds no complete game (no manifest, an unreadable or truncated one, an
    interrupted build's), said so that the error names the real cause; None when it does."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return f"it has no {MANIFEST}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        return f"its {MANIFEST} cannot be read ({err.strerror or err})"
    except ValueError as err:  # a UnicodeDecodeError too
        return f"its {MANIFEST} is not valid JSON (truncated or edited? {err})"
    if not isinstance(data, dict) or not data.get("complete"):
        return f"its {MANIFEST} is not a complete game's manifest"
    return None


def _plan(config: GameConfig) -> BuildPlan:
    model_fp = fingerprint_source(resolve_model(config.model))
    pool: list[Sample] | None = None
    info: dict[str, Any] = {"source": config.pool}
    if config.pool == GENERATE:
        pool_fp = GENERATE
    else:
        if config.doc_sequences:  # a pool of documents, each cut into sequences
            texts, loaded, dropped = load_document_pool(config)
        else:
            texts, loaded, dropped = load_pool(config.pool, words=config.words)
        if len(texts) < config.pool_size + config.heldout:
            note = f" after removing {dropped}" if dropped else ""
            raise_pool_small(config, len(texts), note)
        pool, pool_fp = texts, pool_fingerprint(texts)
        info.update(
            available=len(texts),
            dropped=dropped,
            file_fingerprint=loaded.fingerprint if loaded else None,
        )
    info["fingerprint"] = pool_fp
    key = config_hash(config, model_fingerprint=model_fp, pool_fingerprint=pool_fp)
    return BuildPlan(config, model_fp, pool, info, key)


def raise_pool_small(config: GameConfig, n: int, note: str) -> None:
    held = f" + heldout={config.heldout}" if config.heldout else ""
    raise DataError(
        f"pool {config.pool!r} has {n} usable texts{note}, but pool_size={config.pool_size}"
        f"{held} were asked for. Fix: lower pool_size (or heldout) or add texts (a pool is never "
        "silently shrunk)."
    )


def _targets(plan: BuildPlan, epochs: Sequence[int], out: Path | None) -> dict[int, Path]:
    if out is None:
        return {e: default_game_dir(_key_for(plan, e)) for e in epochs}
    if len(epochs) == 1:
        return {epochs[0]: Path(out)}
    return {e: Path(out) / f"epochs-{e}" for e in epochs}


def _key_for(plan: BuildPlan, epochs: int) -> str:
    return config_hash(
        plan.config.with_epochs(epochs),
        model_fingerprint=plan.model_fingerprint,
        pool_fingerprint=plan.pool_info["fingerprint"],
    )


def _needs_build(folder: Path, key: str, *, force: bool) -> bool:
    """False when ``folder`` holds this game already; raises when it holds something else."""
    if not folder.exists():
        return True
    if folder.is_file():
        raise ConfigError(f"game output {folder} is a file; pass a folder path")
    manifest = read_manifest(folder)
    if manifest is None:
        if any(folder.iterdir()):
            raise ConfigError(
                f"output folder {folder} is not empty and holds no complete game ({MANIFEST}); "
                "refusing to overwrite it. Pass an empty or new folder."
            )
        return True
    if force:
        return True
    if manifest.get("config_hash") != key:
        raise ConfigError(
            f"{folder} holds a different game (config hash {manifest.get('config_hash')}, "
            f"asked {key}); pass force=True (--force) to replace it, or another folder"
        )
    return False


def build_game(
    config: GameConfig,
    *,
    out: Path | str | None = None,
    force: bool = False,
    device: str = "auto",
    console: Any = None,
    progress: bool = True,
) -> Path:
    """Build (or reuse) the game ``config`` describes; return its folder.

    ``out`` defaults to ``cache_dir()/games/<config hash>``. A complete game already there with
    the same hash is reused unless ``force``. Bad input (pool too small, texts over
    ``max_length``, untrainable model, ...) raises ConfigError/DataError before training.
    """
    return build_games(
        config,
        (config.epochs,),
        out=out,
        force=force,
        device=device,
        console=console,
        progress=progress,
    )[config.epochs]


def build_games(
    config: GameConfig,
    epochs: Sequence[int],
    *,
    out: Path | str | None = None,
    force: bool = False,
    device: str = "auto",
    console: Any = None,
    progress: bool = True,
) -> dict[int, Path]:
    """One game per epoch count, from a single training run snapshotted after each count.

    ``config.epochs`` is ignored; game ``e`` is ``config`` with ``epochs=e`` and is identical to
    what :func:`build_game` makes for it (see :mod:`imprint.game.train`). With ``out`` and
    several counts, game ``e`` goes to ``out/epochs-e``.
    """
    counts, plan = check_games(config, epochs)
    targets = _targets(plan, counts, Path(out) if out is not None else None)
    todo = [e for e in counts if _needs_build(targets[e], _key_for(plan, e), force=force)]
    for e in todo:  # before training, not when the trained game is written
        where = "--out" if out is not None else "IMPRINT_CACHE_DIR (games go to <cache>/games)"
        check_writable(targets[e], where)
    if todo:
        _build(
            plan, {e: targets[e] for e in todo}, device=device, console=console, progress=progress
        )
    return targets


def check_games(config: GameConfig, epochs: Sequence[int]) -> tuple[list[int], BuildPlan]:
    """What :func:`build_games` checks before any model work (every count's config, DP's
    single count, the pool's size): the sorted counts and the build plan. ``imprint experiment
    --plan`` calls it too, so a plan refuses the games its run refuses."""
    counts = sorted(set(epochs))
    if not counts:
        raise ConfigError("epochs must list at least one epoch count")
    config = config.with_epochs(counts[-1])  # validates every count's config at once
    for e in counts:
        config.with_epochs(e)
    if config.dp_epsilon is not None:
        from imprint.game.dp import check_dp_available

        check_dp_available()
        if len(counts) > 1:
            raise ConfigError(
                f"a DP game is built for one epoch count, not {counts}: the noise is calibrated "
                "to the whole run, so an earlier snapshot has another epsilon. Build each count "
                "on its own"
            )
    return counts, _plan(config)


# -- the build ------------------------------------------------------------------------------------


def _say(console: Any, message: str) -> None:
    """A line about the work (--quiet: none; jsonl: an ``info`` event)."""
    from imprint.report.terminal import status

    status(console, message, stage="game")


def _written(console: Any, epoch: int, folder: Path) -> None:
    """A game written: its folder (a result: printed with --quiet too; jsonl: a ``result``)."""
    from imprint.report.terminal import event, print_wrapped

    event("result", kind="game", path=str(folder), epochs=epoch)
    if console is not None:
        print_wrapped(console, f"game: {epoch} epoch(s) written to {folder}")


def _check_base_model(model: Any, tokenizer: Any, config: Any) -> StartToken:
    """Refuse a base model the game cannot train; the token every training sequence starts with
    (the one ``--start-token auto`` scores after, see :mod:`imprint.game.start`)."""
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    if context and config.max_length > context:
        raise ConfigError(
            f"max_length={config.max_length} exceeds the context of {config.model!r} "
            f"({context} tokens); lower max_length"
        )
    check_trainable(model, config, config.model)
    try:
        return training_start_token(tokenizer)
    except ConfigError as err:
        raise ConfigError(f"model {config.model!r}: {err}") from err


def _build(
    plan: BuildPlan, targets: dict[int, Path], *, device: str, console: Any, progress: bool
) -> None:
    config = plan.config
    timings: dict[str, float] = {}
    started = time.time()
    _say(console, f"game: loading base model {config.model} ...")
    model, tokenizer = load_causal_lm(config.model, dtype="float32", device=device)
    timings["load_s"] = round(time.time() - started, 2)
    start = _check_base_model(model, tokenizer, config)
    end = end_token_id(tokenizer, start)
    t0 = time.time()
    # a document game's rows are its documents' sequences
    build_records = document_records if config.doc_sequences else make_records
    records, heldout = build_records(plan, model, tokenizer, console=console, progress=progress)
    timings["texts_s"] = round(time.time() - t0, 2)
    encoded = encode_sequences(
        tokenizer,
        {r["id"]: r["text"] for r in records + heldout},
        max_length=config.max_length,
        start_id=start.ids[0],
        end_id=end,
    )
    sequences = [encoded[r["id"]] for r in records for _ in range(r["meta"]["repetitions"])]
    model = prepare_model(model, config, config.model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start.ids[0]
    t0 = time.time()

    all_losses: list[float] = []
    privacy: dict[str, Any] = {}

    def hook(epoch: int, loss: float, trained: Any) -> None:
        all_losses.append(loss)
        if epoch in targets:
            _write_game(
                plan,
                targets[epoch],
                epoch,
                trained,
                tokenizer,
                records,
                heldout,
                list(all_losses),
                {**timings, "train_s": round(time.time() - t0, 2)},
                len(sequences),
                tokens=(start, end),
                dp=privacy or None,
            )
            _written(console, epoch, targets[epoch])

    if config.dp_epsilon is not None:  # one epoch count (build_games checked): written at the end
        from imprint.game.dp import train_dp

        losses, record = train_dp(
            model, sequences, config, pad_id=pad, console=console, progress=progress
        )
        privacy.update(record)
        all_losses.extend(losses[:-1])
        hook(config.epochs, losses[-1], model)
        return
    train(
        model,
        sequences,
        config,
        pad_id=pad,
        epochs=max(targets),
        on_epoch_end=hook,
        console=console,
        progress=progress,
    )


# -- writing --------------------------------------------------------------------------------------


def _versions(method: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    names = ["llm-imprint", "torch", "transformers", "numpy", "safetensors"]
    if method == "lora":
        names += ["peft", "opacus"]
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _write_game(
    plan: BuildPlan,
    folder: Path,
    epochs: int,
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    heldout: list[dict[str, Any]],
    losses: list[float],
    timings: dict[str, float],
    n_sequences: int,
    *,
    tokens: tuple[StartToken, int],
    dp: dict[str, Any] | None = None,
) -> None:
    config = plan.config.with_epochs(epochs)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.tmp-"))
    try:
        start, end = tokens
        save_model(model, tokenizer, tmp / MODEL, lora=config.method == "lora")
        write_trained_start_token(tmp / MODEL, start)
        rows = sorted(records, key=lambda r: r["id"])
        _write_jsonl(tmp / DATA, rows)
        _write_jsonl(tmp / HELDOUT, sorted(heldout, key=lambda r: r["id"]))
        manifest = _manifest(plan, config, rows, losses, timings, n_sequences)
        manifest["heldout"] = sorted(r["id"] for r in heldout)
        # format 5: the tokens every training text was put between
        manifest["start_token"] = start.describe()
        manifest["end_token"] = {"token": tokenizer.convert_ids_to_tokens(end), "id": end}
        if dp is not None:  # DP-SGD's guarantee as trained: target and achieved epsilon
            manifest["dp"] = dp
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)  # only reached for an empty folder or a game being replaced
        try:
            os.replace(tmp, folder)
        except OSError:
            if read_manifest(folder) is None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process wrote the game meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def _manifest(
    plan: BuildPlan,
    config: GameConfig,
    rows: list[dict[str, Any]],
    losses: list[float],
    timings: dict[str, float],
    n_sequences: int,
) -> dict[str, Any]:
    from imprint.data import fingerprint_samples

    groups: dict[str, dict[str, int]] = {}
    for r in rows:
        g = groups.setdefault(r["meta"]["group"], {"member": 0, "nonmember": 0})
        g[r["meta"]["split"]] += 1
    samples = [Sample(r["id"], r["text"], r["label"]) for r in rows]
    return {
        "imprint_game": 1,
        "format": GAME_FORMAT,
        "complete": True,
        "config_hash": config_hash(
            config,
            model_fingerprint=plan.model_fingerprint,
            pool_fingerprint=plan.pool_info["fingerprint"],
        ),
        "seed": config.seed,
        "config": config.to_dict(),
        "base_model": {"spec": config.model, "fingerprint": plan.model_fingerprint},
        "pool": plan.pool_info,
        "data_fingerprint": fingerprint_samples(samples),
        "train_loss": losses,
        "training_sequences": n_sequences,
        "groups": groups,
        "members": [r["id"] for r in rows if r["label"] == MEMBER],
        "nonmembers": [r["id"] for r in rows if r["label"] == NON_MEMBER],
        "versions": _versions(config.method),
        "timings": timings,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
