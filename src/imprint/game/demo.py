"""``imprint demo``: a privacy game on SmolLM2-135M, attacked, measured and reported.

The demo builds (or reuses) a small game with a generated pool, runs every gray-box attack plus
the blind baseline through the run pipeline (the base model serves as the reference model) and
reports what a sound benchmark should show, *measured*, never assumed:

- the blind verdict (:mod:`imprint.diagnostics.blind_verdict`, the report's) shows no shift:
  the split is random;
- LOSS finds the members (its AUC interval lies above 0.5);
- detection rises with the number of times a canary was seen.

``epochs=(1, 2, 4)`` trains once, snapshots after each count and plots AUC against epochs.
``shift=True`` also builds a game whose non-members come from another distribution and shows the
trap: attack AUCs and the blind baseline rise together, and the blind-baseline warning fires.

Sizing: the default game (100 texts of 24 words + 10 held-out; 8 random-token canaries of 16
words per repetition count {1, 3, 8}, as many never-trained ones; 2 epochs of full fine-tuning
at lr 2e-5) is sized so that the rank test of x8 against x1 member canaries has room (8 vs 8:
smallest p 1/12,870), and so that each group's detection interval is informative (a resampled
4 vs 4 is often perfectly ordered, its interval reaching 1.0). Its first run, GGUF conversion
and every attack included, took 2 min 36 s on the idle 2-core CPU (game format 4; see
docs/guide/games.md for format 5's figures). Neighbourhood and PAC run with 2 variants per text
instead of 50 and 10 (DEMO_PARAMS).
A stronger learning rate saturates every canary group at AUC 1.0 and hides the trend.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError
from imprint.game.build import build_games
from imprint.game.config import GENERATE, GameConfig
from imprint.game.demo_checks import (  # noqa: F401 (tests and the demo use them by name)
    LEAD,
    _chance_and_detection,
    _checks,
    _figures,
    _fmt,
    _rises,
    _separation,
    _shift_checks,
    canary_member_scores,
)

__all__ = ["DEMO_DEFAULTS", "DemoResult", "run_demo"]


#: The demo's game: small enough for a 2-core CPU (see the module docstring of imprint.game).
DEMO_DEFAULTS: dict[str, Any] = {
    "pool_size": 100,
    "words": 24,
    "canary_repetitions": (1, 3, 8),
    "canaries_per_repetition": 8,  # room for the x8-vs-x1 rank test and informative intervals
    "canary_words": 16,
    "canary_generator": "random",
    "max_canary_share": 0.7,
    "epochs": (2,),
    "lr": 2e-5,
}
#: Cheaper settings for the attacks that score many variants of each text (defaults: 50
#: neighbours, 10 augmentations), so the demo fits a CPU budget; applied when they run.
DEMO_PARAMS: dict[str, dict[str, Any]] = {"neighborhood": {"n": 2}, "pac": {"n_aug": 2}}
#: Score columns plotted against epochs (those present in the run).
PLOTTED = ("loss", "ref[base]", "zlib", "min_k", "min_k_pp")


@dataclass(frozen=True)
class DemoResult:
    """Folders and figures of a demo. ``figures[label]`` holds, per game (label ``e3`` for 3
    epochs, ``shift-e3`` for the shifted game), the blind and attack AUCs with intervals and the
    LOSS AUC per canary group; ``checks`` are the measured claims with pass/fail."""

    out: Path
    games: dict[str, Path]
    runs: dict[str, Path]
    figures: dict[str, dict[str, Any]]
    checks: list[dict[str, Any]] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)


def _attack_games(
    variants: list[tuple[str, GameConfig]],
    counts: list[int],
    out: Path,
    settings: dict[str, Any],
    *,
    force: bool,
    console: Any,
) -> tuple[dict[str, Path], dict[str, Path], dict[str, dict[str, Any]]]:
    """Build (or reuse) each game variant at each epoch count and attack it: (game folders, run
    folders, measured figures), each keyed by a label such as ``e2`` or ``shift-e2``."""
    from imprint.run import RunConfig, execute_run  # here: `imprint attacks` imports no run

    games: dict[str, Path] = {}
    runs: dict[str, Path] = {}
    figures: dict[str, dict[str, Any]] = {}
    device = settings["shared_args"].get("device", "auto")
    progress = settings["progress"]
    for prefix, cfg in variants:
        built = build_games(
            cfg, counts, force=force, device=device, console=console, progress=progress
        )
        for e, folder in built.items():
            label = f"{prefix}e{e}"
            games[label] = folder
            if console is not None:
                console.rule(f"attacking game {label} ({e} epochs{', shifted' if prefix else ''})")
            config = RunConfig(
                model=f"game:{folder}",
                data=f"game:{folder}",
                out=out / f"run-{label}",
                pools={"nonmembers": f"game-heldout:{folder}"} if cfg.heldout else {},
                overwrite=True,  # the demo's own run folder: a rerun replaces it
                **settings,
            )
            result = execute_run(config, console=console)
            runs[label] = result.out
            figures[label] = _figures(result.metrics)
            if LEAD in result.scores:  # the repetition claim ranks member canaries' LOSS
                figures[label]["canary_member_scores"] = canary_member_scores(
                    result.samples, result.scores[LEAD]
                )
            figures[label]["dataset_inference"] = _dataset_inference(result, settings["seed"])
    return games, runs, figures


def _dataset_inference(result: Any, seed: int) -> dict[str, Any]:
    """Dataset inference on the run's members against its non-members, each text one document,
    through the report's code and verdict rule (trained on / not detected / inconclusive)."""
    import numpy as np

    from imprint.documents.run_hook import DocumentOptions
    from imprint.evaluation.documents import dataset_section

    labels = np.array([s.label for s in result.samples])
    found, notes = dataset_section(
        result.scores, np.arange(len(labels)), labels, options=DocumentOptions(), seed=seed
    )
    test = found.get("members_vs_nonmembers") or {}
    check = found.get("false_positive_check") or {}
    return {
        "verdict": found.get("verdict"),
        "p_value": test.get("p_value"),
        "false_positive_p": check.get("p_value"),
        "notes": notes,
    }


def _di_line(fig: dict[str, Any]) -> str:
    """The demo's dataset-inference line: the report's verdict, its p-values and reasons."""
    di = fig.get("dataset_inference") or {}
    found = di.get("verdict")
    if not found:
        return "dataset inference (members vs non-members): not run; " + "; ".join(
            di.get("notes", [])
        )
    p, fp = di["p_value"], di["false_positive_p"]
    why = f": {'; '.join(found['reasons'])}" if found["reasons"] else ""
    return (
        f"dataset inference, members vs non-members (each text a document): {found['state']} "
        f"(p = {p:.3g}; false-positive check p = "
        f"{'not run' if fp is None else f'{fp:.3g}'}){why}"
    )


def _run_settings(
    attacks: Sequence[str], *, reference: bool, model: str, device: str, **fields: Any
) -> dict[str, Any]:
    """The run options every game of the demo is attacked with (RunConfig fields)."""
    use_ref = reference and ("all" in attacks or "ref" in attacks)
    params = {k: v for k, v in DEMO_PARAMS.items() if k in _selected(attacks, use_ref)}
    refs = (("base", model),) if use_ref else ()
    shared = {"device": device} if device != "auto" else {}
    return dict(attacks=tuple(attacks), params=params, refs=refs, breakdown="group",
                shared_args=shared, **fields)  # fmt: skip


def _demo_config(*, lr: float | None, method: str, **fields: Any) -> GameConfig:
    """The demo's game: full fine-tuning takes the demo's learning rate unless one is given."""
    default_lr = DEMO_DEFAULTS["lr"] if method == "full" else None
    return GameConfig(method=method, lr=lr if lr is not None else default_lr, **fields)


def run_demo(
    *,
    epochs: Sequence[int] = DEMO_DEFAULTS["epochs"],
    shift: bool = False,
    out: Path | str = Path("imprint-demo"),
    model: str = "smollm2-135m",
    pool: str = GENERATE,
    pool_size: int = DEMO_DEFAULTS["pool_size"],
    words: int = DEMO_DEFAULTS["words"],
    canary_repetitions: Sequence[int] = DEMO_DEFAULTS["canary_repetitions"],
    canaries_per_repetition: int = DEMO_DEFAULTS["canaries_per_repetition"],
    canary_words: int | None = DEMO_DEFAULTS["canary_words"],
    canary_generator: str = DEMO_DEFAULTS["canary_generator"],
    max_canary_share: float = DEMO_DEFAULTS["max_canary_share"],
    method: str = "full",
    lr: float | None = None,
    max_length: int = 128,
    seed: int = 0,
    attacks: str | Sequence[str] = ("all",),
    reference: bool = True,
    blind: bool = True,
    n_bootstrap: int = 1000,
    device: str = "auto",
    force: bool = False,
    console: Any = None,
    progress: bool = True,
) -> DemoResult:
    """Build or reuse the demo game(s), attack each with an ordinary run, write
    ``out/demo.md`` and ``demo.json``. ``reference=True`` adds the base model as the reference
    ``base``; ``blind=False`` skips the blind baseline (its checks then fail)."""
    out = Path(out)
    counts = sorted(set(epochs))
    if not counts:
        raise ConfigError("epochs must list at least one epoch count, e.g. 3 or 1,2,4")
    attacks = _attack_names(attacks)  # "loss,zlib" is two attacks, never letters
    config = _demo_config(
        model=model, pool=pool, pool_size=pool_size, words=words, seed=seed, method=method,
        epochs=counts[-1], lr=lr, max_length=max_length,
        canary_repetitions=tuple(canary_repetitions),
        canaries_per_repetition=canaries_per_repetition, canary_words=canary_words,
        canary_generator=canary_generator, max_canary_share=max_canary_share,
    )  # fmt: skip
    variants = [("", config)] + ([("shift-", _shift(config))] if shift else [])
    settings = _run_settings(
        attacks, reference=reference, model=model, seed=seed, n_bootstrap=n_bootstrap,
        device=device, blind=blind, progress=progress,
    )  # fmt: skip
    games, runs, figures = _attack_games(
        variants, counts, out, settings, force=force, console=console
    )
    checks = _checks(figures, counts, shift=shift)
    plots = _plots(figures, counts, out, config)
    demo = DemoResult(out, games, runs, figures, checks, plots)
    _write(demo, config, counts)
    if console is not None:
        _print(demo, console)
    return demo


def _attack_names(attacks: str | Sequence[str]) -> tuple[str, ...]:
    from imprint.coerce import Mismatch, name_list

    try:
        return name_list(attacks, "attacks")
    except Mismatch as err:
        raise ConfigError(str(err)) from None


def _selected(attacks: Sequence[str], use_ref: bool) -> set[str]:
    """Names of the attacks a run with ``attacks`` will build."""
    from imprint.attacks import RunContext, build_attacks

    if list(attacks) != ["all"]:
        return set(attacks)
    run = RunContext(refs=("base",) if use_ref else ())
    return {a.name for a in build_attacks(["all"], run)}


def _shift(config: GameConfig) -> GameConfig:
    from dataclasses import replace

    return replace(config, shift=True)


# -- output ---------------------------------------------------------------------------------------


def _plots(
    figures: dict[str, dict[str, Any]], counts: list[int], out: Path, config: GameConfig
) -> list[Path]:
    from imprint.report.plots import plot_metric_vs

    plots: list[Path] = []
    nan = float("nan")

    def triple(aucs: list[dict[str, Any] | None]) -> tuple[list[float], list[float], list[float]]:
        return tuple(  # type: ignore[return-value]
            [nan if a is None or a[k] is None else float(a[k]) for a in aucs]
            for k in ("estimate", "low", "high")
        )

    if len(counts) > 1:
        series = {}
        first = figures[f"e{counts[0]}"]["attacks"]
        for name in (n for n in PLOTTED if n in first):
            series[name] = triple([figures[f"e{e}"]["attacks"].get(name) for e in counts])
        series["blind baseline"] = triple([figures[f"e{e}"]["blind"] for e in counts])
        plots.append(
            plot_metric_vs(
                counts,
                series,
                out / "auc_vs_epochs.png",
                xlabel="epochs",
                ylabel="AUC",
                title=f"privacy game on {config.model}: AUC vs epochs",
            )
        )
    reps = figures[f"e{counts[-1]}"]["canary_reps"]
    if len(reps) > 1:
        series = {
            f"LOSS, {e} epochs": triple(figures[f"e{e}"]["canary_auc"].get(LEAD, []))
            for e in counts
        }
        plots.append(
            plot_metric_vs(
                reps,
                series,
                out / "auc_vs_repetitions.png",
                xlabel="canary repetitions",
                ylabel="AUC",
                title="canary detection vs repetitions",
                logx=max(reps) >= 20 * min(reps),
            )
        )
    return plots


def _markdown(demo: DemoResult, config: GameConfig) -> str:
    lines = [
        "# imprint demo: a randomized privacy game",
        "",
        f"Base model `{config.model}`; pool {config.pool_size} texts of {config.words} words "
        f"({config.pool}); method {config.method}, lr {config.lr}; canaries "
        f"{config.canaries_per_repetition} per repetition count {list(config.canary_repetitions)}"
        f" ({config.canary_generator}). Intervals are 95 % bootstrap (the SoK "
        "forest's over its out-of-fold scores; the strongest blind baseline's Bonferroni-adjusted "
        "for being the best of several).",
        "",
        "## Measured claims",
        "",
    ]
    for c in demo.checks:
        lines.append(f"- {'PASS' if c['passed'] else 'FAIL'}: {c['claim']}: {c['value']}")
    for label, fig in demo.figures.items():
        lines += [
            "",
            f"## Game {label} (run folder `{demo.runs[label]}`)",
            "",
            f"- blind baseline AUC: {_fmt(fig['blind'])}",
            *([f"- {fig['blind_verdict']['reason']}"] if fig.get("blind_verdict") else []),
        ]
        lines += [f"- {name}: {_fmt(auc)}" for name, auc in fig["attacks"].items()]
        lines.append(f"- {_di_line(fig)}")
        lines += ["", "LOSS AUC by group:", ""]
        lines += [f"- {g}: {_fmt(row.get(LEAD))}" for g, row in fig["groups"].items()]
        lines += [f"- warning: {w}" for w in fig["warnings"]]
    lines += ["", *[f"![{p.stem}]({p.name})" for p in demo.plots], ""]
    return "\n".join(lines)


def _write(demo: DemoResult, config: GameConfig, counts: list[int]) -> None:
    demo.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": config.to_dict(),
        "epochs": counts,
        "games": {k: str(v) for k, v in demo.games.items()},
        "runs": {k: str(v) for k, v in demo.runs.items()},
        "figures": demo.figures,
        "checks": demo.checks,
        "plots": [str(p) for p in demo.plots],
    }
    (demo.out / "demo.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    (demo.out / "demo.md").write_text(_markdown(demo, config), encoding="utf-8")


def _print(demo: DemoResult, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="imprint demo: measured, not assumed")
    reps = next(iter(demo.figures.values()))["canary_reps"]
    for h in ("game", "blind AUC", "LOSS AUC", "ref[base] AUC", *[f"LOSS x{r}" for r in reps]):
        table.add_column(escape(h))
    for label, fig in demo.figures.items():
        canary = [_fmt(a) for a in fig["canary_auc"].get(LEAD, [])]
        table.add_row(
            label,
            _fmt(fig["blind"]),
            _fmt(fig["attacks"].get(LEAD)),
            _fmt(fig["attacks"].get("ref[base]")),
            *canary,
        )
    console.print(table)
    for label, fig in demo.figures.items():
        console.print(f"{label}: {escape(_di_line(fig))}")
    for c in demo.checks:
        mark = "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]"
        console.print(f"{mark} {escape(c['claim'])}: {escape(c['value'])}")
    console.print(f"demo report: {demo.out / 'demo.md'}")
