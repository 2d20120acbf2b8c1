"""Rendering an audit: a terminal table and a plot of the bound against the number of guesses
(matplotlib imported here only, maths in :mod:`imprint.audit.bounds`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imprint.audit.results import AuditResult

__all__ = ["plot_bound", "print_audit", "summary_line"]


def summary_line(result: AuditResult) -> str:
    """One line: the bound, its confidence, the guesses behind it and the claim beside it."""
    b = result.best
    claim = "no DP claimed"
    copies = f", each trained on {result.repetitions} times" if result.repetitions > 1 else ""
    if result.claimed:
        claim = f"DP claimed: epsilon {result.claimed['epsilon']:.3f} at delta {b.delta:g}"
    return (
        f"epsilon >= {b.epsilon:.3f} with {1 - result.beta:.0%} confidence ({result.attack}: "
        f"{b.correct}/{b.guesses} guesses correct, {b.k_pos} in + {b.k_neg} out, of "
        f"{result.canaries} canaries{copies}); {claim}"
    )


def print_audit(result: AuditResult, *, console: Any = None) -> None:
    """A rich table: per attack, its best number of guesses and bound, the claim beside it."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"privacy audit: {result.canaries} canaries, {result.members} trained")
    for col in ("attack", "guesses r", "correct", "accuracy", "epsilon >=", "claimed epsilon"):
        table.add_column(col, justify="left" if col == "attack" else "right")
    claimed = f"{result.claimed['epsilon']:.3f}" if result.claimed else "-"
    for name, curve in sorted(result.curves.items()):
        b = max(curve, key=lambda x: (x.epsilon, -x.guesses))
        mark = " *" if name == result.attack else ""
        table.add_row(
            name + mark, str(b.guesses), str(b.correct), f"{b.correct / b.guesses:.3f}",
            f"{b.epsilon:.3f}", claimed,
        )  # fmt: skip
    console.print(table)
    console.print(
        f"each bound at confidence 1 - {result.beta_each:.2g} (Bonferroni over "
        f"{len(result.curves)} attacks x {len(next(iter(result.curves.values())))} numbers of "
        f"guesses), so the best (*) holds at {1 - result.beta:.0%}"
    )
    console.print(summary_line(result))
    for note in result.notes:
        console.print(f"[bold red]warning[/]: {note}")


def plot_bound(result: AuditResult, path: Path) -> Path:
    """The epsilon lower bound of each attack against the number of guesses (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in sorted(result.curves.items()):
        ax.plot([b.guesses for b in curve], [b.epsilon for b in curve], marker="o", label=name)
    if result.claimed:
        ax.axhline(result.claimed["epsilon"], color="k", ls="--", label="DP epsilon claimed")
    ax.set_xscale("log")
    ax.set_xlabel("number of guesses r (half in, half out)")
    ax.set_ylabel(f"epsilon lower bound ({1 - result.beta:.0%}, corrected)")
    ax.set_title(f"one-run audit, {result.canaries} canaries")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
