"""Privacy-audit commands: ``imprint canaries make`` and ``imprint audit``. The work is done by
:mod:`imprint.audit`; nothing heavy is imported until a command runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import console, handle_errors, parse_list, say

__all__ = ["audit", "canaries_app"]

canaries_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Canaries for a one-run privacy audit of your own training run.",
)


@canaries_app.callback()
def _group() -> None:
    """Canaries for a one-run privacy audit of your own training run."""


@canaries_app.command("make")
@handle_errors
def make(
    n: Annotated[int, typer.Option("--n", help="number of canaries m (about half are to insert)")],
    out: Annotated[Path, typer.Option(help="new folder: canaries.jsonl, insert.jsonl, mask.json")],
    model: Annotated[str, typer.Option(help="model whose tokenizer (or sampler) makes them")] = (
        "smollm2-135m"
    ),
    design: Annotated[str, typer.Option(help="random, sampled or high-perplexity")] = "random",
    words: Annotated[int, typer.Option(help="words per canary")] = 12,
    temperature: Annotated[
        float, typer.Option(help="sampling temperature (sampled designs)")
    ] = 1.5,
    seed: Annotated[
        int | None,
        typer.Option(
            help="seed of the secret inclusion coins (the texts' seed derives from it): makes "
            "texts and mask reproducible, so keep it as secret as mask.json. Default: a fresh "
            "secret seed, written to mask.json only"
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")] = "auto",
) -> None:
    """Write m canaries, the ones to add to your training data (each once), and apart the secret
    mask saying which were added. Train, then: imprint audit --model M --canaries DIR."""
    from imprint.audit.canaries import DESIGNS, canary_seeds, make_canary_texts, write_canaries
    from imprint.backends.models import load_causal_lm
    from imprint.errors import ConfigError
    from imprint.outdir import check_writable

    if n < 2:
        raise ConfigError(f"--n {n}: a one-run audit needs at least 2 canaries (hundreds help)")
    if design not in DESIGNS:
        raise ConfigError(f"--design {design!r}: use one of {', '.join(DESIGNS)}")
    if words < 1:
        raise ConfigError(f"--words {words}: a canary needs at least 1 word, e.g. --words 12")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ConfigError(f"--temperature {temperature}: use a positive number, e.g. 1.5")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty folder; pass a new folder")
    check_writable(out)  # before the model loads: a place where no folder can be made
    loaded, tokenizer = load_causal_lm(model, dtype="float32", device=device)
    text_seed, coin_seed = canary_seeds(seed)
    texts = make_canary_texts(
        loaded, tokenizer, n, design=design, words=words, seed=text_seed, temperature=temperature
    )
    info = {"design": design, "words": words, "model": model, "text_seed": text_seed}
    if design != "random":
        info["temperature"] = temperature
    made = write_canaries(out, texts, seed=coin_seed, info=info)
    say(
        f"canaries: {n} in {out}/canaries.jsonl; insert the {int(made.included.sum())} in "
        f"{out}/insert.jsonl into your training data once each; keep {out}/mask.json secret "
        "from training"
    )
    say(f"then: imprint audit --model YOUR_MODEL --canaries {out}")


@handle_errors
def audit(
    model: Annotated[
        str | None, typer.Option(help="the trained model (alias, folder, gguf:PATH, hub id)")
    ] = None,
    canaries: Annotated[
        Path | None, typer.Option(help="folder from imprint canaries make (with its mask)")
    ] = None,
    mask: Annotated[
        Path | None, typer.Option(help="mask file (default: CANARIES/mask.json)")
    ] = None,
    game: Annotated[
        Path | None, typer.Option(help="a game built with --canary-inclusion bernoulli")
    ] = None,
    attack: Annotated[
        str, typer.Option(help="attacks, comma-separated")
    ] = "loss,zlib,min_k,min_k_pp",
    out: Annotated[Path, typer.Option(help="folder: audit.json, audit_bound.png, run/")] = Path(
        "imprint-audit"
    ),
    confidence: Annotated[float, typer.Option(help="confidence 1 - beta of the bound")] = 0.95,
    delta: Annotated[
        float | None,
        typer.Option(help="delta your training claims (with --dp-epsilon); the bound's delta"),
    ] = None,
    dp_epsilon: Annotated[
        float | None,
        typer.Option(help="the epsilon your training claims, at --delta (shown beside)"),
    ] = None,
    guesses: Annotated[
        str, typer.Option(help="numbers of guesses tried, e.g. 10,50,100 (default: 10,20,50...)")
    ] = "",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")] = "auto",
    overwrite: Annotated[
        bool,
        typer.Option(help="replace an earlier audit in --out (or a folder imprint did not write)"),
    ] = False,
) -> None:
    """Empirical epsilon lower bound (Steinke et al. 2023, one run) from membership guesses on
    canaries: on a game (--game DIR) or on your own model (--model M --canaries DIR)."""
    from imprint.audit.audit import audit_game, audit_model
    from imprint.audit.canaries import load_canaries
    from imprint.errors import ConfigError

    if not 0 < confidence < 1:
        raise ConfigError(f"--confidence {confidence}: use a number in (0, 1), e.g. 0.95")
    if delta is not None and not (math.isfinite(delta) and 0 <= delta < 1):
        raise ConfigError(f"--delta {delta}: use a number in [0, 1), e.g. --delta 1e-5")
    if dp_epsilon is not None and not (math.isfinite(dp_epsilon) and dp_epsilon >= 0):
        raise ConfigError(
            f"--dp-epsilon {dp_epsilon}: the epsilon your training claims is a finite number "
            ">= 0, e.g. --dp-epsilon 8 (an unbounded claim claims nothing: drop --dp-epsilon)"
        )
    options: dict[str, Any] = {
        "attacks": tuple(parse_list(attack, option="--attack", example="loss,zlib")),
        "beta": 1 - confidence,
        "grid": tuple(parse_list(guesses, option="--guesses", convert=int)) if guesses else None,
        "overwrite": overwrite,
        "run": {"device": device},
        "console": console,
    }
    if game is not None:
        if model is not None or canaries is not None:
            raise ConfigError(
                "--game audits the game's own model and canaries: drop --model/--canaries"
            )
        if dp_epsilon is not None:
            raise ConfigError(
                "--game reads the DP claim (epsilon, delta) from game.json: drop --dp-epsilon"
            )
        if delta is not None:
            options["delta"] = delta
        audit_game(game, out, **options)
    else:
        if model is None or canaries is None:
            raise ConfigError(
                "pass --game DIR, or --model M with --canaries DIR (imprint canaries make)"
            )
        claimed = None
        if dp_epsilon is not None:
            if delta is None:
                raise ConfigError(
                    f"--dp-epsilon {dp_epsilon} needs the delta of that claim: pass --delta D "
                    "(e.g. --delta 1e-5); the bound is computed at that delta"
                )
            claimed = {"epsilon": dp_epsilon, "delta": delta}
        found = load_canaries(canaries, mask=mask)
        read = [("--canaries", str(canaries))] + ([("--mask", str(mask))] if mask else [])
        audit_model(model, found, out, delta=delta or 0.0, claimed=claimed, inputs=read, **options)
    say(f"audit: {out}/audit.json, plot {out}/audit_bound.png, the run in {out}/run")
