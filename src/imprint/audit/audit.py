"""``imprint audit``: score canaries with attacks through the normal run, report the bound.

The canaries (a one-run game's, or a user's canary folder with its mask) are written as a
labelled data file and scored by :func:`imprint.run.execute_run` like any run (cache, executor
as usual; the run folder is ``OUT/run``), except that every canary is scored: the run holds no
shots out, and attacks that take held-out texts are refused. Every option is checked before any
work, and ``OUT`` is written whole or not at all. Each attack's scores then give Steinke et
al. 2023's one-run bound at every number of guesses in a grid fixed in advance. Taking the best
(attack, guesses) after seeing the results is a selection, paid for by Bonferroni: every bound is
computed at ``beta / (attacks x grid)``, so the reported maximum holds at ``1 - beta``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
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


def check_out(out: Path, *, overwrite: bool, inputs: Sequence[tuple[str, str]] = ()) -> Path:
    """Refuse, before any work, an ``--out`` the audit cannot or must not replace whole (the
    shared rule of :func:`imprint.outdir.check_kind`: another imprint output, e.g. the canaries
    with their secret mask, never; a folder imprint did not write or an earlier audit only with
    ``overwrite``), one holding an input, or one where nothing can be made. Returns it absolute.
    """
    from imprint.outdir import check_inputs_outside, check_kind, check_writable, output_kind

    out = Path(os.path.abspath(out))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ConfigError(f"--out {out} is a file or a link; pass a folder path (a new one)")
    if out == Path.cwd() or out in Path.cwd().parents:
        raise ConfigError(f"--out {out} is the current folder or one above it; pass a new folder")
    check_kind(out, "audit", overwrite=overwrite)
    if not overwrite and output_kind(out) == "audit":
        raise ConfigError(f"--out {out} holds an earlier audit; pass a new folder, or add "
                          "--overwrite to replace it")  # fmt: skip
    check_inputs_outside(out, inputs, why="the audit replaces its --out folder whole")
    check_writable(out)
    return out


def check_attacks(names: str | Sequence[str]) -> tuple[str, ...]:
    """The ``--attack`` names (a list, or one comma-separated string), refused before any work
    when unknown or when the attack takes texts out of the evaluation (held-out shots): an
    audit's bound needs every canary scored."""
    from imprint.attacks.base import RunContext, get_attack_class
    from imprint.attacks.shots import HELDOUT_KEY
    from imprint.coerce import Mismatch, name_list

    try:
        names = name_list(names, "--attack")
    except Mismatch as err:
        raise ConfigError(str(err)) from None

    if not names:
        raise ConfigError("--attack names no attack; pass e.g. --attack loss,zlib")
    for name in names:
        if name == "all":
            continue  # expanded by the run to what it can serve: never a shot-taking attack
        try:
            cls = get_attack_class(name)
        except ConfigError as err:
            raise ConfigError(f"--attack: {err}") from None
        if cls.takes_held_out:
            raise ConfigError(
                f"--attack {name}: it takes held-out non-members (its shots or fitting texts) "
                "out of the evaluation, and an audit scores every canary (the bound counts "
                f"them all). Pass attacks that need only the model, e.g. --attack "
                f"{','.join(DEFAULT_ATTACKS)}"
            )
        try:  # the run's own set-up, in an audit's context: no reference models, no pools
            cls.for_run(RunContext(pools={HELDOUT_KEY: ()}))
        except ConfigError as err:
            raise ConfigError(
                f"--attack {name}: {err}; imprint audit takes no --ref or --references, so pass "
                f"attacks that need only the model, e.g. --attack {','.join(DEFAULT_ATTACKS)}"
            ) from None
    return tuple(dict.fromkeys(names))


def check_grid(grid: Sequence[int] | None, m: int) -> tuple[int, ...] | None:
    """``--guesses``: distinct numbers in 1..m (a number listed twice would be paid for twice in
    the Bonferroni correction), checked before any work."""
    if grid is None:
        return None
    if len(set(grid)) != len(grid):
        raise ConfigError(f"--guesses {','.join(map(str, grid))} lists a number twice; list "
                          "each number of guesses once")  # fmt: skip
    if not grid or any(g < 1 or g > m for g in grid):
        raise ConfigError(f"--guesses {','.join(map(str, grid))}: each must be in 1..{m} (the "
                          "canaries), e.g. --guesses 10,20")  # fmt: skip
    return tuple(grid)


def check_delta(delta: float, claimed: dict[str, Any] | None) -> None:
    """``--delta`` in [0, 1) and the claim's own delta (before any work)."""
    if not (math.isfinite(delta) and 0 <= delta < 1):
        raise ConfigError(f"--delta {delta}: use a number in [0, 1), e.g. --delta 1e-5")
    if claimed is not None and claimed.get("delta") != delta:
        raise ConfigError(
            f"the bound's delta {delta:g} must be the claim's ({claimed.get('delta')}): "
            "give the delta your training claims (imprint audit --delta D)"
        )


def _score(
    model: str,
    canaries: CanarySet,
    folder: Path,
    attacks: Sequence[str],
    run: dict[str, Any],
) -> dict[str, np.ndarray]:
    """Each attack's score per canary (file order), from one ordinary run on the canaries in
    ``folder`` (the audit's staging folder)."""
    from imprint.run import RunConfig, execute_run

    data = folder / LABELLED
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
        out=folder / "run",
        attacks=tuple(attacks),
        blind=False,
        dedupe=False,
        overwrite=True,
        shared_args=shared,
        shot_holdout=0,  # every canary is scored: no attack here takes shots (check_attacks)
        **run,
    )
    from rich.console import Console

    # the run's own report stays in OUT/run; the terminal shows the audit's
    result = execute_run(config, console=Console(quiet=True))
    # a data file's rows get file:line ids; the canary's own id is kept in meta
    position = {str(s.meta.get("id", s.id)): k for k, s in enumerate(result.samples)}
    missing = [i for i in canaries.ids if i not in position]
    if missing:  # a guard: nothing in an audit's run leaves a canary out
        raise DataError(f"{len(missing)} canaries were not scored (e.g. {missing[0]!r})")
    order = np.array([position[i] for i in canaries.ids])
    return {name: np.asarray(s, dtype=float)[order] for name, s in result.scores.items()}


def _publish(staged: Path, out: Path, *, overwrite: bool) -> None:
    """Move the finished audit into place: an empty ``out``, or (checked again now) a folder
    ``overwrite`` may replace, is moved aside and removed once the audit is there."""
    from imprint.outdir import discard

    check_out(out, overwrite=overwrite)
    if out.exists():
        aside = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(out, aside)
        os.rename(staged, out)
        discard(aside)
    else:
        os.rename(staged, out)


def audit_model(
    model: str,
    canaries: CanarySet,
    out: Path,
    *,
    attacks: str | Sequence[str] = DEFAULT_ATTACKS,
    beta: float = 0.05,
    delta: float = 0.0,
    grid: Sequence[int] | None = None,
    claimed: dict[str, Any] | None = None,
    repetitions: int = 1,
    overwrite: bool = False,
    run: dict[str, Any] | None = None,
    console: Any = None,
    inputs: Sequence[tuple[str, str]] = (),
) -> AuditResult:
    """Score ``canaries`` on ``model`` with ``attacks``, write ``OUT/audit.json`` and the plot.

    ``claimed``: the DP guarantee to compare with (``{"epsilon": E, "delta": D}``); ``delta``
    is the delta of the bound (the claimed one). ``repetitions``: copies of each included
    canary in training (1 for ``imprint canaries make``'s). ``run``: more RunConfig fields, and
    ``device`` (given to every model as the command line's ``--device`` is). ``inputs``: more
    ``(flag, path)`` the audit reads (the canaries, a game), never inside ``out``. Everything is
    checked before any work, and ``out`` is written whole or not at all.
    """
    from imprint.backends.models import default_cache_path
    from imprint.outdir import discard, mark_output, staging_dir
    from imprint.requests.store import check_store_path

    # every check before any work: a failed audit leaves nothing, so its rerun is not refused
    out = check_out(Path(out), overwrite=overwrite, inputs=[("--model", model), *inputs])
    if len(canaries.ids) < 2 or canaries.included.all() or not canaries.included.any():
        raise DataError("the canaries need both included and excluded ones (about half each)")
    attacks, grid = check_attacks(attacks), check_grid(grid, len(canaries.ids))
    check_delta(delta, claimed)
    if not 0 < beta < 1:
        raise ConfigError(f"--confidence {1 - beta}: use a number in (0, 1), e.g. 0.95")
    check_store_path(Path((run or {}).get("cache") or default_cache_path()))
    started = time.time()
    staged = staging_dir(out)  # written whole or not at all (imprint.outdir)
    try:
        scores = _score(model, canaries, staged, attacks, dict(run or {}))
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
        text = json.dumps(record, indent=2, allow_nan=False)  # strict JSON, never NaN
        (staged / AUDIT).write_text(text, encoding="utf-8")
        plot_bound(result, staged / PLOT)
        mark_output(staged, "audit")
        _publish(staged, out, overwrite=overwrite)
    except BaseException:
        discard(staged)
        raise
    print_audit(result, console=console)
    return result


def audit_game(folder: Path, out: Path, **options: Any) -> AuditResult:
    """Audit a game built with one-run canaries (``--canary-inclusion bernoulli``); the DP
    claim, if any, is read from ``game.json``."""
    from imprint.game.build import manifest_problem, read_manifest

    folder = Path(folder)
    if not folder.is_dir() or (problem := manifest_problem(folder)) is not None:
        why = "it is not a folder" if not folder.is_dir() else problem
        raise DataError(f"--game {folder} is not a complete game folder ({why}); build one with "
                        "imprint game build --canary-inclusion bernoulli --out DIR")  # fmt: skip
    manifest = read_manifest(folder)
    assert manifest is not None  # manifest_problem said it is complete
    config = manifest["config"]
    if config.get("canary_inclusion", "split") != "bernoulli":
        raise ConfigError(
            f"game {folder} split its canaries into fixed halves; the one-run bound needs each "
            "canary in by its own coin. Build it with --canary-inclusion bernoulli"
        )
    ids, texts, included = _game_canaries(folder)
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
        inputs=[("--game", str(folder))],
        **options,
    )


def _game_canaries(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """The game's canaries (ids, texts, trained-on mask) from its data.jsonl, which must be the
    data the game was built with (game.json's data_fingerprint: an edited label would move a
    canary between in and out, and the bound would be about labels, not training)."""
    from imprint.data import Sample
    from imprint.data.loaders import json_objects
    from imprint.game.build import DATA
    from imprint.game.schemes import check_game_data

    rows = [row for _, row in json_objects(folder / DATA)]
    try:
        samples = [Sample(r["id"], r["text"], r["label"]) for r in rows]
        canaries = [r for r in rows if r["meta"]["kind"] == "canary"]
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(
            f"--game {folder}: {folder / DATA} is not a game's data ({err!r} missing or "
            "malformed); rebuild the game with --force"
        ) from None
    check_game_data(folder, samples, f"--game {folder}")
    included = np.array([r["label"] == 1 for r in canaries], dtype=bool)
    return tuple(r["id"] for r in canaries), tuple(r["text"] for r in canaries), included
