"""``imprint audit``: score canaries with attacks through the normal run, report the bound.

The canaries (a one-run game's, or a user's canary folder with its mask) are written as a
labelled data file and scored by :func:`imprint.run.execute_run` like any run (cache, executor,
attacks all as usual; the run folder is ``OUT/run``). Each attack's scores then give Steinke et
al. 2023's one-run bound at every number of guesses in a grid fixed in advance. Taking the best
(attack, guesses) after seeing the results is a selection, paid for by Bonferroni: every bound is
computed at ``beta / (attacks x grid)``, so the reported maximum holds at ``1 - beta``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.audit.bounds import one_run_bound
from imprint.audit.canaries import CanarySet
from imprint.audit.report import plot_bound, print_audit
from imprint.audit.results import AuditResult
from imprint.errors import ConfigError, DataError

__all__ = ["AUDIT", "AuditResult", "audit_game", "audit_model", "bounds_for", "guess_grid"]

AUDIT = "audit.json"
PLOT = "audit_bound.png"
LABELLED = "canaries-labelled.jsonl"
#: What an audit folder holds (an interrupted audit's folder too): only these are replaced.
OWN = {AUDIT, PLOT, LABELLED, "run"}
DEFAULT_ATTACKS = ("loss", "zlib", "min_k", "min_k_pp")


def guess_grid(m: int) -> tuple[int, ...]:
    """Numbers of guesses tried, fixed before scoring: 10, 20, 50, 100, 200, 500, ... <= m."""
    out, base = [], 1
    while base * 10 <= m:
        out += [g * base for g in (10, 20, 50) if g * base <= m]
        base *= 10
    return tuple(out) or (m,)


def bounds_for(
    scores: dict[str, np.ndarray],
    included: np.ndarray,
    *,
    beta: float = 0.05,
    delta: float = 0.0,
    grid: Sequence[int] | None = None,
    side: str = "both",
    claimed: dict[str, Any] | None = None,
    repetitions: int = 1,
) -> AuditResult:
    """The audit from each attack's canary scores (higher = member; aligned with ``included``).

    ``repetitions``: copies of each included canary in training. The bound is then about the
    group of ``r`` copies (Steinke et al. 2023's unit is one example), recorded and warned of.
    """
    if not scores:
        raise ConfigError("no attack scored the canaries; pass --attack")
    m = len(included)
    grid = tuple(grid) if grid else guess_grid(m)
    if any(g < 1 or g > m for g in grid):
        raise ConfigError(f"numbers of guesses {grid} must be in 1..{m} (the canaries)")
    if claimed is not None and claimed.get("delta") != delta:
        # a pure-epsilon bound may exceed an (epsilon, delta > 0) claim without contradicting it
        raise ConfigError(
            f"the bound's delta {delta:g} must be the claim's ({claimed.get('delta')}): "
            "give the delta your training claims (imprint audit --delta D)"
        )
    beta_each = beta / (len(scores) * len(grid))
    curves = {
        name: [
            one_run_bound(s, included, guesses=g, side=side, beta=beta_each, delta=delta)
            for g in grid
        ]
        for name, s in scores.items()
    }
    attack, best = max(
        ((a, b) for a, c in curves.items() for b in c),
        key=lambda ab: (ab[1].epsilon, -ab[1].guesses),
    )
    notes = []
    if claimed and best.epsilon > float(claimed.get("epsilon", np.inf)):
        notes.append(
            f"the lower bound {best.epsilon:.3f} exceeds the claimed epsilon "
            f"{claimed['epsilon']:.3f}: the training or its accounting is not as private as claimed"
        )
    if repetitions > 1:
        notes.append(
            f"each canary was trained on {repetitions} times: this is a group-privacy bound for "
            f"{repetitions} copies, not a per-example epsilon"
        )
    return AuditResult(
        best, attack, curves, beta, beta_each, claimed, m, int(np.sum(included)), notes,
        repetitions,
    )  # fmt: skip


def _check_out(out: Path, *, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder path")
    if out.is_dir() and any(out.iterdir()):
        if not {p.name for p in out.iterdir()} <= OWN:
            raise ConfigError(f"--out {out} is not empty and holds no audit; pass a new folder")
        if not overwrite:
            raise ConfigError(f"--out {out} holds an audit; pass --overwrite to replace it")


def _score(
    model: str,
    canaries: CanarySet,
    out: Path,
    attacks: Sequence[str],
    run: dict[str, Any],
    console: Any,
) -> dict[str, np.ndarray]:
    """Each attack's score per canary (file order), from one ordinary run on the canaries."""
    from imprint.run import RunConfig, execute_run

    data = out / LABELLED
    with data.open("w", encoding="utf-8") as fh:
        for i, t, b in zip(canaries.ids, canaries.texts, canaries.included, strict=True):
            fh.write(json.dumps({"id": i, "text": t, "label": int(b)}, ensure_ascii=False) + "\n")
    shared = dict(run.pop("shared_args", {}))
    if run.get("device", "auto") != "auto":  # the command line's --device, for every model
        shared["device"] = run.pop("device")
    run.pop("device", None)
    config = RunConfig(
        model=model,
        data=str(data),
        out=out / "run",
        attacks=tuple(attacks),
        blind=False,
        dedupe=False,
        overwrite=True,
        shared_args=shared,
        **run,
    )
    from rich.console import Console

    # the run's own report stays in OUT/run; the terminal shows the audit's
    result = execute_run(config, console=Console(quiet=True))
    # a data file's rows get file:line ids; the canary's own id is kept in meta
    position = {str(s.meta.get("id", s.id)): k for k, s in enumerate(result.samples)}
    missing = [i for i in canaries.ids if i not in position]
    if missing:
        raise DataError(f"{len(missing)} canaries were not scored (e.g. {missing[0]!r})")
    order = np.array([position[i] for i in canaries.ids])
    return {name: np.asarray(s, dtype=float)[order] for name, s in result.scores.items()}


def audit_model(
    model: str,
    canaries: CanarySet,
    out: Path,
    *,
    attacks: Sequence[str] = DEFAULT_ATTACKS,
    beta: float = 0.05,
    delta: float = 0.0,
    grid: Sequence[int] | None = None,
    claimed: dict[str, Any] | None = None,
    repetitions: int = 1,
    overwrite: bool = False,
    run: dict[str, Any] | None = None,
    console: Any = None,
) -> AuditResult:
    """Score ``canaries`` on ``model`` with ``attacks``, write ``OUT/audit.json`` and the plot.

    ``claimed``: the DP guarantee to compare with (``{"epsilon": E, "delta": D}``); ``delta``
    is the delta of the bound (the claimed one). ``repetitions``: copies of each included
    canary in training (1 for ``imprint canaries make``'s). ``run``: more RunConfig fields, and
    ``device`` (given to every model as the command line's ``--device`` is).
    """
    out = Path(out)
    _check_out(out, overwrite=overwrite)
    if len(canaries.ids) < 2 or canaries.included.all() or not canaries.included.any():
        raise DataError("the canaries need both included and excluded ones (about half each)")
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    scores = _score(model, canaries, out, attacks, dict(run or {}), console)
    result = bounds_for(
        scores, canaries.included, beta=beta, delta=delta, grid=grid, claimed=claimed,
        repetitions=repetitions,
    )  # fmt: skip
    record = {
        "imprint_audit": 1,
        "model": model,
        **result.to_dict(),
        "wall_s": round(time.time() - started, 2),
    }
    (out / AUDIT).write_text(json.dumps(record, indent=2), encoding="utf-8")
    plot_bound(result, out / PLOT)
    print_audit(result, console=console)
    return result


def audit_game(folder: Path, out: Path, **options: Any) -> AuditResult:
    """Audit a game built with one-run canaries (``--canary-inclusion bernoulli``); the DP
    claim, if any, is read from ``game.json``."""
    from imprint.game.build import read_manifest

    manifest = read_manifest(Path(folder))
    if manifest is None:
        raise DataError(f"{folder} is not a complete game folder (no game.json)")
    config = manifest["config"]
    if config.get("canary_inclusion", "split") != "bernoulli":
        raise ConfigError(
            f"game {folder} split its canaries into fixed halves; the one-run bound needs each "
            "canary in by its own coin. Build it with --canary-inclusion bernoulli"
        )
    rows = [json.loads(x) for x in (Path(folder) / "data.jsonl").read_text().splitlines()]
    canaries = [r for r in rows if r["meta"]["kind"] == "canary"]
    included = np.array([r["label"] == 1 for r in canaries], dtype=bool)
    ids, texts = tuple(r["id"] for r in canaries), tuple(r["text"] for r in canaries)
    dp = manifest.get("dp")
    claimed = None
    if dp:  # the accountant's epsilon as trained, and the target asked for
        if options.get("delta", dp["delta"]) != dp["delta"]:
            raise ConfigError(
                f"game {folder} was trained at delta {dp['delta']:g} (game.json): its bound is "
                "at that delta; drop --delta"
            )
        claimed = {"epsilon": dp["epsilon"], "delta": dp["delta"], "target": dp["target_epsilon"]}
        options["delta"] = dp["delta"]
    (repetitions,) = config.get("canary_repetitions", [1])  # a one-run game has one count
    return audit_model(
        f"game:{folder}",
        CanarySet(ids, texts, included, {"game": str(folder)}),
        out,
        claimed=claimed,
        repetitions=int(repetitions),
        **options,
    )
