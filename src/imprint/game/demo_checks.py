"""The demo's measured figures and the claims it checks on them (pure functions of the figures:
no model, no file). :mod:`imprint.game.demo` builds the games, runs the attacks and writes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the report stage is imported when a demo reaches it
    from imprint.evaluation.results import RunMetrics
    from imprint.metrics import Interval

LEAD = "loss"  # the attack the demo's claims are about


def _auc(interval: Interval | None) -> dict[str, float | None] | None:
    return None if interval is None else interval.to_dict()


def _reps(group: str) -> int | None:
    match = re.fullmatch(r"canary x(\d+)", group)
    return int(match.group(1)) if match else None


def _figures(metrics: RunMetrics) -> dict[str, Any]:
    """The demo's numbers from a run's metrics: blind, every attack, LOSS per canary group."""
    from imprint.evaluation.results import BlindClassifierMetrics, BlindSuiteMetrics, SkippedGroup

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
    blind = metrics.blind if isinstance(metrics.blind, BlindClassifierMetrics) else None
    suite = metrics.blind_suite if isinstance(metrics.blind_suite, BlindSuiteMetrics) else None
    return {
        "blind": _auc(blind.summary.auc) if blind and blind.summary else None,
        "blind_warning": blind.warning if blind else None,
        # the strongest model-less baseline (SoK forest, TF-IDF, dates, n-grams): the one the
        # report warns from, with the intervals a claim about it needs
        "blind_strongest": _auc(suite.selected.auc) if suite else None,
        "blind_strongest_name": suite.strongest if suite else None,
        # how many classifiers it was picked from and the Bonferroni level of its interval
        "blind_selection": suite.selection.to_dict() if suite else None,
        # the one reading of the blind baseline (three states) and each attack's paired
        # comparison with the text: what the report's band, caption and warning say too
        "blind_verdict": _verdict(metrics),
        "beats_text": {c: t.to_dict() for c, t in metrics.text_comparisons.items()},
        "warnings": [w.message for w in metrics.warnings],
        "warning_kinds": [w.kind for w in metrics.warnings],  # what code tests, never the text
        "attacks": attacks,
        "groups": by_group,
        "canary_reps": [r for r, _ in canaries],
        "canary_auc": {name: [row.get(name) for _, row in canaries] for name in attacks},
    }


def _verdict(metrics: RunMetrics) -> dict[str, Any] | None:
    verdict = metrics.verdict()
    return None if verdict is None else verdict.to_dict()


def _state(fig: dict[str, Any]) -> str | None:
    verdict = fig.get("blind_verdict")
    return verdict["state"] if verdict else None


def _versus_text(fig: dict[str, Any], column: str) -> str:
    """The paired attack-vs-text decision of ``column``, in words (as the report's caption)."""
    found = (fig.get("beats_text") or {}).get(column)
    if not found:
        return "vs the text: not compared"
    d = found["diff"]
    word = "beats the text" if found["beats_text"] else "not shown to beat the text"
    shown = (
        "n/a"
        if d["estimate"] is None
        else f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
    )
    return f"{word} (AUC - AUC({found['blind']}) = {shown}, paired)"


def _above_half(auc: dict[str, Any] | None) -> bool:
    return bool(auc and auc["low"] is not None and auc["low"] > 0.5)


def _fmt(auc: dict[str, Any] | None) -> str:
    if not auc or auc.get("estimate") is None:
        return "n/a"
    shown = f"{auc['estimate']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}]"
    return shown + (" (score bound: bootstrap collapsed)" if auc.get("basis") else "")


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
    verdict = fig.get("blind_verdict")
    return [
        _check(
            f"no distribution shift shown ({game}): the blind verdict (strongest of the suite, "
            f"{_picked(fig)}) is not 'shift'",
            verdict is not None and verdict["state"] != "shift",
            verdict["reason"] if verdict else "no blind baseline fitted",
        ),
        _check(
            f"LOSS finds members ({game}): AUC interval above 0.5",
            _above_half(fig["attacks"].get(LEAD)),
            f"{_fmt(fig['attacks'].get(LEAD))}; {_versus_text(fig, LEAD)}",
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


def canary_member_scores(samples: Sequence[Any], scores: Iterable[float]) -> dict[int, list]:
    """LOSS scores of the member canaries by repetitions (``samples``' meta ``group``)."""
    out: dict[int, list[float]] = {}
    for sample, score in zip(samples, scores, strict=True):
        reps = _reps(str((sample.meta or {}).get("group", "")))
        if reps is not None and sample.label == 1 and score == score:  # NaN never ranks
            out.setdefault(reps, []).append(float(score))
    return dict(sorted(out.items()))


def _separation(fig: dict[str, Any], game: str) -> list[dict[str, Any]]:
    """The trend is significant, not just ordered: the most-repeated member canaries score above
    the least-repeated ones by an exact one-sided Mann-Whitney test (Mann & Whitney 1947; a
    permutation test of the ranks, so its size is exact at any group size when scores do not tie;
    scipy's exact method makes no tie correction). Canaries are random
    tokens whose groups are drawn by a seeded permutation, so the two groups differ only in how
    often they were trained on. Comparing the two groups' detection intervals (each against its
    own non-members) is the weaker rule it replaces: it fails once the least-repeated group is
    itself detected well (its interval reaches 1.0). No claim without two canary groups."""
    reps, aucs = fig["canary_reps"], fig["canary_auc"].get(LEAD, [])
    if len(reps) < 2 or len(aucs) != len(reps):
        return []
    low, high = reps[0], reps[-1]
    members = {int(k): v for k, v in (fig.get("canary_member_scores") or {}).items()}
    claim = f"LOSS scores x{high} canaries above x{low} canaries ({game}): exact Mann-Whitney"
    few, many = members.get(low, []), members.get(high, [])
    if len(few) < 2 or len(many) < 2:
        return [_check(claim, False, "member canary scores missing")]
    from scipy.stats import mannwhitneyu

    test = mannwhitneyu(many, few, alternative="greater", method="exact")
    ranked = float(test.statistic) / (len(many) * len(few))
    value = (
        f"P(x{high} > x{low}) = {ranked:.3f}, one-sided p = {test.pvalue:.2g} "
        f"({len(many)} vs {len(few)} members); detection x{low}: {_fmt(aucs[0])}; "
        f"x{high}: {_fmt(aucs[-1])}"
    )
    return [_check(claim, test.pvalue < 0.05, value)]


def _shift_checks(fig: dict[str, Any], sfig: dict[str, Any]) -> list[dict[str, Any]]:
    before, after = fig.get("blind_strongest"), sfig.get("blind_strongest")
    base, shifted = _estimates([fig["attacks"].get(LEAD), sfig["attacks"].get(LEAD)])
    return [
        _check(
            f"shift: the blind verdict is 'shift' ({_picked(sfig)}) and the report's shift "
            "warning fires",
            _state(sfig) == "shift" and "blind_not_at_chance" in sfig.get("warning_kinds", []),
            f"{_state(fig)} -> {_state(sfig)}: {fig.get('blind_strongest_name')} {_fmt(before)} -> "
            f"{sfig.get('blind_strongest_name')} {_fmt(after)}; SoK forest "
            f"{_fmt(fig['blind'])} -> {_fmt(sfig['blind'])}",
        ),
        _check(
            "shift: LOSS AUC rises although training is unchanged",
            base is not None and shifted is not None and shifted > base,
            f"{_fmt(fig['attacks'].get(LEAD))} -> {_fmt(sfig['attacks'].get(LEAD))}",
        ),
    ]
