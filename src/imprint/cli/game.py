"""Privacy-game commands: ``game build``, ``game show`` and ``demo``. The work is done by
:mod:`imprint.game`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import console, handle_errors, on_interrupt, parse_list, say
from imprint.game.config import DEFAULT_LR, GENERATE
from imprint.game.demo import DEMO_DEFAULTS

__all__ = ["demo", "game_app"]

game_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Randomized privacy games: ground truth for membership inference.",
)

BaseModel = Annotated[str, typer.Option(help="base model: alias, folder, gguf:PATH, hub id")]
Pool = Annotated[
    str,
    typer.Option(
        help="text pool: a data file/spec (labels ignored; .txt = one text per line) or "
        f"'{GENERATE}' (sampled from the base model)"
    ),
]
PoolSize = Annotated[int, typer.Option(help="texts taken from the pool (half members)")]
Words = Annotated[int, typer.Option(help="words per text (0: keep file texts whole)")]
Seed = Annotated[int, typer.Option(help="seed of split, texts, shuffling, init")]
Method = Annotated[str, typer.Option(help="full, lora or top (top layers only)")]
Lr = Annotated[float | None, typer.Option(help=f"learning rate (default per method: {DEFAULT_LR})")]
MaxLength = Annotated[int, typer.Option(help="longest training sequence in tokens")]
TopLayers = Annotated[int, typer.Option(help="blocks trained by --method top")]
LoraTargets = Annotated[str, typer.Option(help="comma-separated module names")]
Repetitions = Annotated[
    str, typer.Option(help="canary repetition counts, comma-separated ('' for no canaries)")
]
Canaries = Annotated[int, typer.Option(help="canaries per repetition count")]
CanaryGenerator = Annotated[str, typer.Option(help="sampled, random or high-perplexity")]
CanaryInclusion = Annotated[
    str,
    typer.Option(help="split (half in per count) or bernoulli (a coin each: imprint audit --game)"),
]
DpEpsilon = Annotated[float | None, typer.Option(help="DP-SGD target epsilon (Opacus; LoRA)")]
CanaryWords = Annotated[int | None, typer.Option(help="default: --words")]
MaxCanaryShare = Annotated[
    float, typer.Option(help="largest fraction of training sequences that may be canaries")
]
Heldout = Annotated[
    int, typer.Option(help="extra held-out non-members (few-shot prefixes, not candidates)")
]
Shift = Annotated[
    bool,
    typer.Option(help="non-members from a different distribution (the distribution-shift trap)"),
]
GameOut = Annotated[
    Path | None, typer.Option(help="game folder (default: <cache>/games/<config hash>)")
]
Force = Annotated[bool, typer.Option(help="rebuild even if the game exists")]
GameUnit = Annotated[
    str,
    typer.Option(
        help="sequence (a pool text is a candidate) or document (a pool text is a document of "
        "--doc-sequences sequences of --words words; membership per document)"
    ),
]
DocSequences = Annotated[
    int | None,
    typer.Option(help="with --unit document: sequences per document (default 10)"),
]
ReferenceModels = Annotated[
    int,
    typer.Option(
        help="also train K reference models like the target, each on a random half of the "
        "candidates (LiRA, RMIA: imprint run --references DIR); built ones are reused"
    ),
]
Device = Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")]
Int = Annotated[int, typer.Option()]
Float = Annotated[float, typer.Option()]


def _ints(text: str, option: str) -> tuple[int, ...]:
    return parse_list(text, option=option, convert=int, example="1,10,100")


@game_app.callback()
def _group() -> None:
    """Randomized privacy games: ground truth for membership inference."""


#: a game build keeps each finished game and reference model; the one in training is lost
BUILD_KEPT = (
    "interrupted: finished games and reference models are kept, the one in training is not; "
    "rerun the same command to resume"
)


@game_app.command("build")
@handle_errors
@on_interrupt(BUILD_KEPT)
def build(
    model: BaseModel = "smollm2-135m",
    pool: Pool = GENERATE,
    pool_size: PoolSize = 200,
    words: Words = 48,
    seed: Seed = 0,
    method: Method = "full",
    epochs: Int = 3,
    lr: Lr = None,
    batch_size: Int = 8,
    max_length: MaxLength = 128,
    top_layers: TopLayers = 2,
    lora_rank: Int = 8,
    lora_targets: LoraTargets = "q_proj,k_proj,v_proj,o_proj",
    repetitions: Repetitions = "1,10",
    canaries: Canaries = 4,
    canary_generator: CanaryGenerator = "sampled",
    canary_temperature: Float = 1.5,
    canary_words: CanaryWords = None,
    max_canary_share: MaxCanaryShare = 0.5,
    canary_inclusion: CanaryInclusion = "split",
    dp_epsilon: DpEpsilon = None,
    dp_delta: Annotated[float, typer.Option(help="DP delta (with --dp-epsilon)")] = 1e-5,
    max_grad_norm: Annotated[float, typer.Option(help="DP per-sample clipping norm")] = 1.0,
    heldout: Heldout = 10,
    shift: Shift = False,
    unit: GameUnit = "sequence",
    doc_sequences: DocSequences = None,
    out: GameOut = None,
    force: Force = False,
    device: Device = "auto",
    reference_models: ReferenceModels = 0,
) -> None:
    """Build (or reuse) a privacy game: split, canaries, fine-tune, write model/ data.jsonl
    game.json. Use it as --model game:DIR --data game:DIR --breakdown group."""
    options = dict(locals())  # first statement: exactly the options, nothing else
    from imprint.game.build import build_game

    out, force, device = options.pop("out"), options.pop("force"), options.pop("device")
    k = options.pop("reference_models")
    if not 0 <= k <= 256:  # checked before the game trains, not after
        raise typer.BadParameter(f"{k}: use 0 (none) to 256", param_hint="--reference-models")
    if dp_epsilon is not None and not 0 < dp_epsilon < float("inf"):
        raise typer.BadParameter(
            f"{dp_epsilon}: DP-SGD's target epsilon is a positive finite number, e.g. 8 (drop "
            "--dp-epsilon to train without DP)",
            param_hint="--dp-epsilon",
        )
    folder = build_game(_game_config(options), out=out, force=force, device=device, console=console)
    say(f"game: {folder}")
    refs = ""
    if k:
        from imprint.game.reference import build_references

        say(f"reference models: {build_references(folder, k, device=device, console=console)}")
        refs = f" --references {folder} --attacks lira,rmia"
    how = "--unit document --doc-field doc" if unit == "document" else "--breakdown group"
    say(f"use: imprint run --model game:{folder} --data game:{folder} {how}{refs}")


def _game_config(options: dict[str, Any]) -> Any:
    """``GameConfig`` from the ``game build`` options: renamed or parsed ones first, the rest
    pass through under their own name (an option GameConfig lacks fails loudly)."""
    from imprint.game.config import GameConfig

    lora_rank = options["lora_rank"]
    renamed = {
        "words": options.pop("words") or None,
        "lora_alpha": 2 * lora_rank,
        "lora_targets": parse_list(options.pop("lora_targets"), option="--lora-targets"),
        "canary_repetitions": _ints(options.pop("repetitions"), "--repetitions"),
        "canaries_per_repetition": options.pop("canaries"),
        "doc_sequences": _doc_sequences(options.pop("unit"), options.pop("doc_sequences")),
    }
    return GameConfig(**options, **renamed)


def _doc_sequences(unit: str, k: int | None) -> int:
    """GameConfig.doc_sequences for ``--unit``: 0 for a game of single texts (so ``--unit
    document`` needs k >= 1: 0 would silently build a game of single texts); ``--doc-sequences``
    given with ``--unit sequence`` is refused, not ignored (None: not given, 10 documents)."""
    if unit not in ("sequence", "document"):
        raise typer.BadParameter(f"{unit!r}: use sequence or document", param_hint="--unit")
    if unit == "sequence" and k is not None:
        raise typer.BadParameter(
            f"{k}: --doc-sequences applies to documents but --unit is sequence; add --unit "
            "document, or drop --doc-sequences",
            param_hint="--doc-sequences",
        )
    k = 10 if k is None else k
    if unit == "document" and k < 1:
        raise typer.BadParameter(
            f"{k}: a document has at least 1 sequence (e.g. 10)", param_hint="--doc-sequences"
        )
    return k if unit == "document" else 0


@game_app.command("show")
@handle_errors
def show(folder: Annotated[Path, typer.Argument(help="a game folder")]) -> None:
    """Summarise a game folder: config, groups, per-epoch training loss, DP record."""
    from imprint.game.build import read_manifest
    from imprint.game.schemes import game_dir

    manifest = read_manifest(game_dir(str(folder)))
    assert manifest is not None  # game_dir refuses a folder without a manifest
    config = manifest["config"]
    say(f"game {folder} (hash {manifest['config_hash']}, seed {manifest['seed']})")
    say(
        f"base model {config['model']}, method {config['method']}, "
        f"{config['epochs']} epochs, lr {config['lr']}"
    )
    for group, counts in manifest["groups"].items():
        say(f"  {group}: {counts['member']} members, {counts['nonmember']} non-members")
    losses = ", ".join(f"{x:.3f}" for x in manifest["train_loss"])
    say(f"training loss per epoch: {losses}")
    if dp := manifest.get("dp"):  # what an auditor compares the empirical bound with
        say(
            f"DP-SGD: epsilon {dp['epsilon']:.3f} (target {dp['target_epsilon']:g}) at delta "
            f"{dp['delta']:g}, {dp['accountant']} accountant; noise multiplier "
            f"{dp['noise_multiplier']:.3f}, sample rate {dp['sample_rate']:.3g}, {dp['steps']} "
            f"steps, clipping norm {dp['max_grad_norm']:g}"
        )


DemoEpochs = Annotated[
    str,
    typer.Option(
        help="epoch count(s), e.g. 3 or 1,2,4 (one training run, snapshots, AUC-vs-epochs plot)"
    ),
]
DemoShift = Annotated[
    bool,
    typer.Option(
        help="also build a game with shifted non-members: watch AUCs and the blind baseline "
        "rise together"
    ),
]
DemoOut = Annotated[Path, typer.Option(help="folder for the runs and demo.md")]
DemoLr = Annotated[
    float | None, typer.Option(help="learning rate (default: 2e-5 for full, else per method)")
]
Attacks = Annotated[str, typer.Option(help="comma-separated attacks, or 'all'")]


@handle_errors
def demo(
    epochs: DemoEpochs = ",".join(map(str, DEMO_DEFAULTS["epochs"])),
    shift: DemoShift = False,
    out: DemoOut = Path("imprint-demo"),
    model: Annotated[str, typer.Option(help="base model")] = "smollm2-135m",
    pool_size: Int = DEMO_DEFAULTS["pool_size"],
    words: Int = DEMO_DEFAULTS["words"],
    repetitions: Annotated[str, typer.Option(help="canary repetition counts")] = ",".join(
        map(str, DEMO_DEFAULTS["canary_repetitions"])
    ),
    canaries: Canaries = DEMO_DEFAULTS["canaries_per_repetition"],
    method: Annotated[str, typer.Option(help="full, lora or top")] = "full",
    lr: DemoLr = None,
    attacks: Attacks = "all",
    seed: Int = 0,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples")] = 1000,
    device: Annotated[str, typer.Option()] = "auto",
    force: Annotated[bool, typer.Option(help="rebuild the game(s)")] = False,
) -> None:
    """Build or reuse a small privacy game on SmolLM2-135M, run every gray-box attack and the
    blind baseline, and report what was measured."""
    from imprint.cli.common import check_out_folder
    from imprint.errors import ConfigError
    from imprint.outdir import KINDS, output_kind

    # before any model work: a file, an unwritable place, or another command's output
    check_out_folder(out, writes=(), option="--out")
    found = output_kind(out) if out.is_dir() else None
    if found is not None:  # a demo folder holds games and runs below it, never at its top
        raise ConfigError(f"--out {out} is {KINDS[found]}; the demo writes its own folder of "
                          "games, runs and demo.md. Pass a new folder")  # fmt: skip
    from imprint.game.demo import run_demo

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
        attacks=parse_list(attacks, option="--attacks", example="loss,zlib"),
        seed=seed,
        n_bootstrap=bootstrap,
        device=device,
        force=force,
        console=console,
    )
