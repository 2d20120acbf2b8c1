"""Command line: ``imprint game build`` (the ``game_app`` sub-app) and ``imprint demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from imprint.errors import ImprintError
from imprint.game.config import DEFAULT_LR, GENERATE, GameConfig
from imprint.game.demo import DEMO_DEFAULTS

__all__ = ["demo", "game_app"]

game_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Randomized privacy games: ground truth for membership inference.",
)
console = Console()
_DEMO_EPOCHS = ",".join(map(str, DEMO_DEFAULTS["epochs"]))
_DEMO_REPS = ",".join(map(str, DEMO_DEFAULTS["canary_repetitions"]))


def _ints(text: str, what: str) -> tuple[int, ...]:
    """'1,10,100' -> (1, 10, 100); an empty string -> ()."""
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{what}: {text!r} is not a comma-separated list of integers"
        ) from None


def _fail(err: Exception) -> None:
    console.print(f"[bold red]error:[/] {err}")
    raise typer.Exit(2)


@game_app.command("build")
def build(
    model: Annotated[str, typer.Option(help="base model: alias, folder, gguf:PATH, hub id")] = (
        "smollm2-135m"
    ),
    pool: Annotated[
        str,
        typer.Option(
            help="text pool: a data file/spec (labels ignored; .txt = one text per line) or "
            f"'{GENERATE}' (sampled from the base model)"
        ),
    ] = GENERATE,
    pool_size: Annotated[int, typer.Option(help="texts taken from the pool (half members)")] = 200,
    words: Annotated[int, typer.Option(help="words per text (0: keep file texts whole)")] = 48,
    seed: Annotated[int, typer.Option(help="seed of split, texts, shuffling, init")] = 0,
    method: Annotated[str, typer.Option(help="full, lora or top (top layers only)")] = "full",
    epochs: Annotated[int, typer.Option()] = 3,
    lr: Annotated[
        float | None, typer.Option(help=f"learning rate (default per method: {DEFAULT_LR})")
    ] = None,
    batch_size: Annotated[int, typer.Option()] = 8,
    max_length: Annotated[int, typer.Option(help="longest training sequence in tokens")] = 128,
    top_layers: Annotated[int, typer.Option(help="blocks trained by --method top")] = 2,
    lora_rank: Annotated[int, typer.Option()] = 8,
    lora_targets: Annotated[str, typer.Option(help="comma-separated module names")] = (
        "q_proj,k_proj,v_proj,o_proj"
    ),
    repetitions: Annotated[
        str, typer.Option(help="canary repetition counts, comma-separated ('' for no canaries)")
    ] = "1,10",
    canaries: Annotated[int, typer.Option(help="canaries per repetition count")] = 4,
    canary_generator: Annotated[str, typer.Option(help="sampled or random")] = "sampled",
    canary_temperature: Annotated[float, typer.Option()] = 1.5,
    canary_words: Annotated[int | None, typer.Option(help="default: --words")] = None,
    max_canary_share: Annotated[
        float, typer.Option(help="largest fraction of training sequences that may be canaries")
    ] = 0.5,
    heldout: Annotated[
        int, typer.Option(help="extra held-out non-members (few-shot prefixes, not candidates)")
    ] = 10,
    shift: Annotated[
        bool,
        typer.Option(
            help="non-members from a different distribution (the distribution-shift trap)"
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="game folder (default: <cache>/games/<config hash>)")
    ] = None,
    force: Annotated[bool, typer.Option(help="rebuild even if the game exists")] = False,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")] = "auto",
) -> None:
    """Build (or reuse) a privacy game: split, canaries, fine-tune, write model/ data.jsonl
    game.json. Use it as --model game:DIR --data game:DIR --breakdown group."""
    from imprint.game.build import build_game

    try:
        config = GameConfig(
            model=model,
            pool=pool,
            pool_size=pool_size,
            words=words or None,
            seed=seed,
            method=method,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            max_length=max_length,
            top_layers=top_layers,
            lora_rank=lora_rank,
            lora_alpha=2 * lora_rank,
            lora_targets=tuple(t.strip() for t in lora_targets.split(",") if t.strip()),
            canary_repetitions=_ints(repetitions, "--repetitions"),
            canaries_per_repetition=canaries,
            canary_generator=canary_generator,
            canary_temperature=canary_temperature,
            canary_words=canary_words,
            max_canary_share=max_canary_share,
            heldout=heldout,
            shift=shift,
        )
        folder = build_game(config, out=out, force=force, device=device, console=console)
    except (ImprintError, ValueError) as err:
        _fail(err)
        return
    console.print(f"game: {folder}")
    console.print(f"use: imprint run --model game:{folder} --data game:{folder} --breakdown group")


@game_app.callback()
def _group() -> None:
    """Randomized privacy games: ground truth for membership inference."""


@game_app.command("show")
def show(folder: Annotated[Path, typer.Argument(help="a game folder")]) -> None:
    """Summarise a game folder: config, groups, per-epoch training loss."""
    from imprint.game.build import read_manifest
    from imprint.game.schemes import game_dir

    try:
        manifest = read_manifest(game_dir(str(folder)))
    except (ImprintError, ValueError) as err:
        _fail(err)
        return
    assert manifest is not None
    config = manifest["config"]
    console.print(f"game {folder} (hash {manifest['config_hash']}, seed {manifest['seed']})")
    console.print(
        f"base model {config['model']}, method {config['method']}, "
        f"{config['epochs']} epochs, lr {config['lr']}"
    )
    for group, counts in manifest["groups"].items():
        console.print(f"  {group}: {counts['member']} members, {counts['nonmember']} non-members")
    losses = ", ".join(f"{x:.3f}" for x in manifest["train_loss"])
    console.print(f"training loss per epoch: {losses}")


def demo(
    epochs: Annotated[
        str,
        typer.Option(
            help="epoch count(s), e.g. 3 or 1,2,4 (one training run, snapshots, AUC-vs-epochs plot)"
        ),
    ] = _DEMO_EPOCHS,
    shift: Annotated[
        bool,
        typer.Option(
            help="also build a game with shifted non-members: watch AUCs and the blind baseline "
            "rise together"
        ),
    ] = False,
    out: Annotated[Path, typer.Option(help="folder for the runs and demo.md")] = Path(
        "imprint-demo"
    ),
    model: Annotated[str, typer.Option(help="base model")] = "smollm2-135m",
    pool_size: Annotated[int, typer.Option()] = DEMO_DEFAULTS["pool_size"],
    words: Annotated[int, typer.Option()] = DEMO_DEFAULTS["words"],
    repetitions: Annotated[str, typer.Option(help="canary repetition counts")] = _DEMO_REPS,
    canaries: Annotated[int, typer.Option(help="canaries per repetition count")] = (
        DEMO_DEFAULTS["canaries_per_repetition"]
    ),
    method: Annotated[str, typer.Option(help="full, lora or top")] = "full",
    lr: Annotated[
        float | None, typer.Option(help="learning rate (default: 2e-5 for full, else per method)")
    ] = None,
    attacks: Annotated[str, typer.Option(help="comma-separated attacks, or 'all'")] = "all",
    seed: Annotated[int, typer.Option()] = 0,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples")] = 1000,
    device: Annotated[str, typer.Option()] = "auto",
    force: Annotated[bool, typer.Option(help="rebuild the game(s)")] = False,
) -> None:
    """Build or reuse a small privacy game on SmolLM2-135M, run every gray-box attack and the
    blind baseline, and report what was measured."""
    from imprint.game.demo import run_demo

    try:
        run_demo(
            epochs=_ints(epochs, "--epochs"),
            shift=shift,
            out=out,
            model=model,
            pool_size=pool_size,
            words=words,
            canary_repetitions=_ints(repetitions, "--repetitions"),
            canaries_per_repetition=canaries,
            method=method,
            lr=lr,
            attacks=tuple(a.strip() for a in attacks.split(",") if a.strip()),
            seed=seed,
            n_bootstrap=bootstrap,
            device=device,
            force=force,
            console=console,
        )
    except (ImprintError, ValueError) as err:
        _fail(err)
