"""``imprint demo``: a privacy game on SmolLM2-135M, attacked, measured and reported.

The demo builds (or reuses) a small game with a generated pool, runs every gray-box attack plus
the blind baseline through the run pipeline (the base model serves as the reference model) and
reports what a sound benchmark should show, *measured*, never assumed:

- the blind baseline is at chance (its interval contains 0.5): the split is random;
- LOSS finds the members (its AUC interval lies above 0.5);
- detection rises with the number of times a canary was seen.

``epochs=(1, 2, 4)`` trains once, snapshots after each count and plots AUC against epochs.
``shift=True`` also builds a game whose non-members come from another distribution and shows the
trap: attack AUCs and the blind baseline rise together, and the blind-baseline warning fires.

Sizing (measured on an otherwise idle 2-core CPU): the default game (100 texts of 24 words + 10
held-out, canaries 4 x {1, 3, 8} of 16 words, 2 epochs of full fine-tuning at lr 2e-5) takes about
6 minutes the first time, GGUF conversion and every attack included, and under a minute (48 s)
once the game and the signals are cached. Neighbourhood and PAC run with 2 variants per text
instead of 50 and 10 (DEMO_PARAMS).
A stronger learning rate saturates every canary group at AUC 1.0 and hides the trend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imprint.errors import ConfigError
from imprint.game.build import build_games
from imprint.game.config import GENERATE, GameConfig

if TYPE_CHECKING:  # the report stage is imported when a demo reaches it
    from imprint.metrics import Interval
    from imprint.report.results import RunMetrics

__all__ = ["DEMO_DEFAULTS", "DemoResult", "run_demo"]


#: The demo's game: small enough for a 2-core CPU (see the module docstring of imprint.game).
DEMO_DEFAULTS: dict[str, Any] = {
    "pool_size": 100,
    "words": 24,
    "canary_repetitions": (1, 3, 8),
    "canaries_per_repetition": 8,  # x1 and x8 intervals apart (4 per group cannot be)
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
LEAD = "loss"


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


def run_demo(
    *,
    run_attacks: Callable[..., Any],
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
    attacks: Sequence[str] = ("all",),
    reference: bool = True,
    blind: bool = True,
    n_bootstrap: int = 1000,
    device: str = "auto",
    force: bool = False,
    console: Any = None,
    progress: bool = True,
) -> DemoResult:
    """Build or reuse the demo game(s), attack them with ``run_attacks``, write ``out/demo.md``
    and ``demo.json``. ``run_attacks(console=..., **RunConfig fields)`` returns a result with
    ``out`` and ``metrics``: the CLI passes ``imprint.cli.common.run_attacks`` (the game package
    never imports the orchestrator).

    ``reference=True`` adds the base model as the reference ``base`` when the ``ref`` attack runs
    (the ideal reference: the target without the members). ``blind=False`` skips the blind
    baseline (its checks then fail: nothing was measured). Returns folders and measured figures.
    """
    out = Path(out)
    counts = sorted(set(epochs))
    if not counts:
        raise ConfigError("epochs must list at least one epoch count, e.g. 3 or 1,2,4")
    config = GameConfig(
        model=model,
        pool=pool,
        pool_size=pool_size,
        words=words,
        seed=seed,
        method=method,
        epochs=counts[-1],
        lr=lr if lr is not None or method != "full" else DEMO_DEFAULTS["lr"],
        max_length=max_length,
        canary_repetitions=tuple(canary_repetitions),
        canaries_per_repetition=canaries_per_repetition,
        canary_words=canary_words,
        canary_generator=canary_generator,
        max_canary_share=max_canary_share,
    )
    use_ref = reference and ("all" in attacks or "ref" in attacks)
    params = {k: v for k, v in DEMO_PARAMS.items() if k in _selected(attacks, use_ref)}
    variants = [("", config)] + ([("shift-", _shift(config))] if shift else [])
    games: dict[str, Path] = {}
    runs: dict[str, Path] = {}
    figures: dict[str, dict[str, Any]] = {}
    for prefix, cfg in variants:
        built = build_games(
            cfg, counts, force=force, device=device, console=console, progress=progress
        )
        for e, folder in built.items():
            label = f"{prefix}e{e}"
            games[label] = folder
            if console is not None:
                console.rule(f"attacking game {label} ({e} epochs{', shifted' if prefix else ''})")
            result = run_attacks(
                console=console,
                model=f"game:{folder}",
                data=f"game:{folder}",
                out=out / f"run-{label}",
                attacks=tuple(attacks),
                params=params,
                pools={"nonmembers": f"game-heldout:{folder}"} if cfg.heldout else {},
                refs=(("base", model),) if use_ref else (),
                breakdown="group",
                seed=seed,
                n_bootstrap=n_bootstrap,
                device=device,
                blind=blind,
                progress=progress,
            )
            runs[label] = result.out
            figures[label] = _figures(result.metrics)
    checks = _checks(figures, counts, shift=shift)
    plots = _plots(figures, counts, out, config)
    demo = DemoResult(out, games, runs, figures, checks, plots)
    _write(demo, config, counts)
    if console is not None:
        _print(demo, console)
    return demo


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


# -- figures and checks ---------------------------------------------------------------------------


def _auc(interval: Interval | None) -> dict[str, float | None] | None:
    return None if interval is None else interval.to_dict()


def _reps(group: str) -> int | None:
    match = re.fullmatch(r"canary x(\d+)", group)
    return int(match.group(1)) if match else None


def _figures(metrics: RunMetrics) -> dict[str, Any]:
    """The demo's numbers from a run's metrics: blind, every attack, LOSS per canary group."""
    from imprint.report.results import BlindMetrics, BlindSuiteMetrics, SkippedGroup

    attacks = {name: _auc(row.auc) for name, row in metrics.attacks.items()}
    groups = metrics.breakdown.groups if metrics.breakdown else {}
    by_group = {
        g: {name: _auc(row[name].auc) if name in row else None for name in attacks}
        for g, row in groups.items()
        if not isinstance(row, SkippedGroup)
    }
    canaries = sorted(
        ((r, by_group[g]) for g in by_group if (r := _reps(g)) is not None), key=lambda t: t[0]
    )
    blind = metrics.blind if isinstance(metrics.blind, BlindMetrics) else None
    suite = metrics.blind_suite if isinstance(metrics.blind_suite, BlindSuiteMetrics) else None
    return {
        "blind": _auc(blind.summary.auc) if blind else None,
        "blind_warning": blind.warning if blind else None,
        # the strongest model-less baseline (SoK forest, TF-IDF, dates, n-grams): the one the
        # report warns from, with the intervals a claim about it needs
        "blind_strongest": _auc(suite.selected.auc) if suite else None,
        "blind_strongest_name": suite.strongest if suite else None,
        # how many classifiers it was picked from and the Bonferroni level of its interval
        "blind_selection": suite.selection.to_dict() if suite else None,
        "warnings": [w.message for w in metrics.warnings],
        "warning_kinds": [w.kind for w in metrics.warnings],  # what code tests, never the text
        "attacks": attacks,
        "groups": by_group,
        "canary_reps": [r for r, _ in canaries],
        "canary_auc": {name: [row.get(name) for _, row in canaries] for name in attacks},
    }


def _contains_half(auc: dict[str, Any] | None) -> bool:
    return bool(auc and auc["low"] is not None and auc["low"] <= 0.5 <= auc["high"])


def _above_half(auc: dict[str, Any] | None) -> bool:
    return bool(auc and auc["low"] is not None and auc["low"] > 0.5)


def _fmt(auc: dict[str, Any] | None) -> str:
    if not auc or auc.get("estimate") is None:
        return "n/a"
    return f"{auc['estimate']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}]"


def _estimates(aucs: Sequence[dict[str, Any] | None]) -> list[float | None]:
    return [a["estimate"] if a else None for a in aucs]


def _rises(values: Sequence[float | None], *, allow_saturated: bool = False) -> bool:
    """Known, never falling, and the last above the first (or all at 1 when allowed)."""
    if len(values) < 2 or any(v is None for v in values):
        return False
    known = [float(v) for v in values if v is not None]
    never_falls = all(b >= a for a, b in zip(known, known[1:], strict=False))
    saturated = allow_saturated and min(known) >= 1.0
    return never_falls and (known[-1] > known[0] or saturated)


def _check(claim: str, passed: bool, value: str) -> dict[str, Any]:
    return {"claim": claim, "passed": bool(passed), "value": value}


def _checks(figures: dict[str, dict[str, Any]], counts: list[int], *, shift: bool) -> list:
    """The measured claims: chance and detection on the last game, trends over every game, and
    with ``shift`` the trap the shifted game shows."""
    last = f"e{counts[-1]}"
    checks = _chance_and_detection(figures[last], last)
    checks += _trends(figures, [f"e{c}" for c in counts])
    checks += _separation(figures[last], last)
    if shift:
        checks += _shift_checks(figures[last], figures[f"shift-{last}"])
    return checks


def _picked(fig: dict[str, Any]) -> str:
    """How the strongest blind baseline's interval accounts for being the best of several."""
    selection = fig.get("blind_selection")
    if not selection:
        return "unadjusted interval"
    return (
        f"best of {selection['n_classifiers']}, Bonferroni {selection['confidence']:.2%} interval"
    )


def _chance_and_detection(fig: dict[str, Any], game: str) -> list[dict[str, Any]]:
    strongest = fig.get("blind_strongest")
    return [
        _check(
            f"blind baselines at chance ({game}): SoK forest (out-of-fold bootstrap interval)"
            + (f" and the strongest of the suite ({_picked(fig)})" if strongest else "")
            + " contain 0.5",
            _contains_half(fig["blind"]) and (not strongest or _contains_half(strongest)),
            _fmt(fig["blind"])
            + (f"; {fig['blind_strongest_name']}: {_fmt(strongest)}" if strongest else ""),
        ),
        _check(
            f"LOSS finds members ({game}): AUC interval above 0.5",
            _above_half(fig["attacks"].get(LEAD)),
            _fmt(fig["attacks"].get(LEAD)),
        ),
    ]


def _trends(figures: dict[str, dict[str, Any]], games: list[str]) -> list[dict[str, Any]]:
    """Canary repetitions in every game (a game with every group at AUC 1 is saturated: it must
    not fall but need not rise) and, with several epoch counts, LOSS against epochs."""
    per_game = {g: figures[g]["canary_auc"].get(LEAD, []) for g in games}
    trends = [_estimates(aucs) for aucs in per_game.values()]
    checks = [
        _check(
            f"LOSS detection rises with canary repetitions ({', '.join(games)}): never falls, "
            "rises unless saturated at 1",
            all(_rises(t, allow_saturated=True) for t in trends) and any(map(_rises, trends)),
            "; ".join(
                f"{g}: "
                + ", ".join(
                    f"x{r}: {_fmt(a)}" for r, a in zip(figures[g]["canary_reps"], aucs, strict=True)
                )
                for g, aucs in per_game.items()
            ),
        )
    ]
    if len(games) >= 2:
        losses = [figures[g]["attacks"].get(LEAD) for g in games]
        checks.append(
            _check(
                f"LOSS AUC rises with epochs ({', '.join(games)})",
                _rises(_estimates(losses)),
                ", ".join(f"{g}: {_fmt(a)}" for g, a in zip(games, losses, strict=True)),
            )
        )
    return checks


def _separation(fig: dict[str, Any], game: str) -> list[dict[str, Any]]:
    """The trend is significant, not just ordered: the most-repeated canaries' LOSS AUC interval
    lies wholly above the least-repeated ones' (no claim without two canary groups)."""
    reps, aucs = fig["canary_reps"], fig["canary_auc"].get(LEAD, [])
    if len(reps) < 2 or len(aucs) != len(reps):
        return []
    low, high = aucs[0], aucs[-1]
    known = bool(low and high and low["high"] is not None and high["low"] is not None)
    claim = f"LOSS tells x{reps[-1]} from x{reps[0]} canaries ({game}): intervals apart"
    value = f"x{reps[0]}: {_fmt(low)}; x{reps[-1]}: {_fmt(high)}"
    return [_check(claim, known and high["low"] > low["high"], value)]


def _shift_checks(fig: dict[str, Any], sfig: dict[str, Any]) -> list[dict[str, Any]]:
    before, after = fig.get("blind_strongest"), sfig.get("blind_strongest")
    base, shifted = _estimates([fig["attacks"].get(LEAD), sfig["attacks"].get(LEAD)])
    return [
        _check(
            f"shift: the strongest blind baseline rises above chance ({_picked(sfig)}) and the "
            "report's shift warning fires",
            _above_half(after) and "blind_not_at_chance" in sfig.get("warning_kinds", []),
            f"{fig.get('blind_strongest_name')} {_fmt(before)} -> "
            f"{sfig.get('blind_strongest_name')} {_fmt(after)}; SoK forest "
            f"{_fmt(fig['blind'])} -> {_fmt(sfig['blind'])}",
        ),
        _check(
            "shift: LOSS AUC rises although training is unchanged",
            base is not None and shifted is not None and shifted > base,
            f"{_fmt(fig['attacks'].get(LEAD))} -> {_fmt(sfig['attacks'].get(LEAD))}",
        ),
    ]


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
        ]
        lines += [f"- {name}: {_fmt(auc)}" for name, auc in fig["attacks"].items()]
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
    for c in demo.checks:
        mark = "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]"
        console.print(f"{mark} {escape(c['claim'])}: {escape(c['value'])}")
    console.print(f"demo report: {demo.out / 'demo.md'}")
