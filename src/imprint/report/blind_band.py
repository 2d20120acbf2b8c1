"""How the report states the blind verdict: the forest plot's band and markers, its caption,
the report's paragraph and the terminal's lines, all read from the one verdict the evaluation
recorded (``RunMetrics.verdict()``: three states, :mod:`imprint.diagnostics.blind_verdict`)
and its paired attack-vs-text comparisons (``RunMetrics.text_comparisons``). Nothing here
decides: an attack's mark inside or outside the band is never read as a verdict."""

from __future__ import annotations

from typing import Any

from imprint.evaluation.results import BlindVerdict, RunMetrics

__all__ = ["beats_text", "forest_caption", "said_after_verdict", "text_line", "verdict_lines"]


def beats_text(metrics: RunMetrics) -> dict[str, bool]:
    """Score column -> whether the paired comparison shows it beating the text."""
    return {c: t.beats_text for c, t in metrics.text_comparisons.items()}


def text_line(metrics: RunMetrics) -> str | None:
    """Which columns beat the text, by the paired test, in one sentence (None without it)."""
    found = metrics.text_comparisons
    if not found:
        return None
    first = next(iter(found.values()))
    beat = [c for c, t in found.items() if t.beats_text]
    rest = [c for c, t in found.items() if not t.beats_text]
    level = f"{100 * first.confidence:.2f}".rstrip("0").rstrip(".")
    return (
        f"Attacks that beat the text (AUC above {first.blind}'s on the same {first.n_texts} "
        f"texts by DeLong's paired test, {level} % interval, Bonferroni over {len(found)}): "
        f"{', '.join(beat) or 'none'}; not shown to: {', '.join(rest) or 'none'}."
    )


def verdict_lines(metrics: RunMetrics) -> list[str]:
    """The terminal's lines: the verdict's state with its interval, and the attacks that beat
    the text (the shift warning, when the state is ``shift``, follows the first as a warning
    without the words of that line: :func:`said_after_verdict`)."""
    verdict = metrics.verdict()
    if verdict is None:
        return []
    line = text_line(metrics)
    return [verdict.summary] + ([line] if line else [])


def said_after_verdict(verdict: BlindVerdict | None, message: str) -> str | None:
    """What a warning adds once the verdict's line (:attr:`BlindVerdict.summary`) is printed:
    the shift warning starts with that line's words (:attr:`BlindVerdict.reason`, then its TPR
    and features) and keeps them in metrics.json and the report, where it stands alone; printed
    under the verdict line it says the rest only. None for a warning that does not start so."""
    if verdict is None or not message.startswith(verdict.summary):
        return None
    return message[len(verdict.summary) :].lstrip("; ")


def forest_caption(metrics: RunMetrics) -> str:
    """The forest plot's caption: what the band is, the verdict it carries, and which
    markers beat the text."""
    text = "AUC per column, highest on top, with its interval."
    verdict = metrics.verdict()
    if verdict is None:
        return text + " No blind baseline was fitted, so no band is drawn."
    text += f" The shaded band is the {verdict.interval_text}: {verdict.headline}."
    line = text_line(metrics)
    if line:
        text += (
            " Filled markers beat the text by a paired test on the same texts, hollow ones are "
            "not shown to (a marker's place against the band decides nothing). " + line
        )
    return text


def forest_inputs(metrics: RunMetrics) -> dict[str, Any]:
    """The forest plot's blind inputs: the band (name, interval), the verdict and the markers."""
    verdict = metrics.verdict()
    if verdict is None:
        return {"blind": None, "verdict": None, "beats": None}
    return {
        "blind": (f"{verdict.classifier} (selection-adjusted)", verdict.interval),
        "verdict": verdict,
        "beats": beats_text(metrics) or None,
    }
