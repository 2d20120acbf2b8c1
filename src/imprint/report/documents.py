"""The report's document section (``--unit document``): renders the
:class:`~imprint.evaluation.document_results.DocumentMetrics` that
:func:`imprint.evaluation.documents.evaluate_documents` computed."""

from __future__ import annotations

from typing import Any

from imprint.evaluation.document_results import DocumentMetrics
from imprint.report.cells import TprColumns, fmt

__all__ = ["document_blocks", "document_rich_table", "document_rows"]


def document_rows(metrics: DocumentMetrics) -> tuple[list[str], list[list[str]]]:
    """The document table: one row per document score, the sequence-level AUC beside it; TPR
    columns that no row can measure are left out (:func:`document_columns` says why)."""
    columns = document_columns(metrics)
    header = [
        "score",
        "document AUC [95% CI]",
        *columns.headers(),
        "sequence AUC [95% CI]",
        "gain [95% CI]",
    ]
    rows = []
    for name, row in metrics.rows.items():
        tprs = columns.cells(row.metrics)
        seq = fmt(row.sequence_auc) if row.sequence_auc else "-"
        gain = fmt(row.gain) if row.gain else "-"
        rows.append([name, fmt(row.metrics.auc), *tprs, seq, gain])
    return header, rows


def document_columns(metrics: DocumentMetrics) -> TprColumns:
    """The document table's TPR@FPR columns, by the rule of every run table."""
    return TprColumns([row.metrics for row in metrics.rows.values()])


def _column_notes(metrics: DocumentMetrics) -> list[str]:
    columns = document_columns(metrics)
    rows = [row.metrics for row in metrics.rows.values()]
    return ([columns.note] if columns.note else []) + columns.row_notes(rows)


def _dataset_lines(dataset: dict[str, Any]) -> list[str]:
    lines = []
    for key, what in (
        ("members_vs_nonmembers", "member documents (suspect) vs non-member documents"),
        ("false_positive_check", "false-positive check, two disjoint halves of the non-members"),
    ):
        test = dataset.get(key)
        if test:
            below = "below" if test["flagged"] else "not below"
            lines.append(
                f"Dataset inference, {what} ({test['n_suspect_docs']} vs "
                f"{test['n_validation_docs']} documents): p = {test['p_value']:.3g}, {below} "
                f"alpha = {test['alpha']:g} (one-sided Welch t-test on per-document means "
                f"of a linear combination of {len(dataset['features'])} attack scores, "
                f"outliers clipped by the authors' rule at a {test.get('clip', 0):.1%} share)."
            )
    found = dataset.get("verdict")
    if found:
        why = f": {'; '.join(found['reasons'])}" if found["reasons"] else ""
        lines.append(f"Verdict: {found['state']}{why}.")
        lines += _power_lines(found, dataset.get("members_vs_nonmembers") or {})
    needed = dataset.get("documents_needed", "absent")
    if needed != "absent":
        lines.append(
            "Median p of the power table below alpha from this many documents per set on "
            "(a lower bar than the verdict's power): "
            + (str(needed) if needed is not None else "not reached with these documents")
            + "."
        )
    return lines


def _power_lines(found: dict[str, Any], test: dict[str, Any]) -> list[str]:
    """The power against the stated effect at this size and the size that power needs (a
    metrics.json written before these fields has neither: no line)."""
    at, needed = found.get("power_at_effect"), found.get("documents_needed_at_effect")
    if at is None or not test:
        return []
    n = min(test["n_suspect_docs"], test["n_validation_docs"])
    size = f"at least {needed}" if needed is not None else "more than 10 million"
    return [
        f"Power: with {n} documents per set the test flags a real shift of document AUC "
        f"{found['effect_auc']:g} in at most {at:.0%} of runs; {found['power']:.0%} power needs "
        f"{size} documents per set (noncentral t on the test halves, a bound: the run learns "
        "its combination on the other half and needs more, about a third more with 3 attack "
        "scores in simulation, and a 'trained on' verdict also needs the power table to flag "
        "that share of halvings; measured sizes: docs/recipes/dataset-inference.md)."
    ]


def document_blocks(metrics: DocumentMetrics) -> list[tuple[str, Any]]:
    """The report's document section (blocks as in :mod:`imprint.report.render`)."""
    blocks: list[tuple[str, Any]] = [
        ("h2", "Documents"),
        (
            "p",
            f"{metrics.n_documents} documents ({metrics.n_members} members, "
            f"{metrics.n_nonmembers} non-members), {metrics.n_sequences} sequences. Intervals "
            "resample documents; the sequence AUC beside each row is the same attack on the "
            "same resampled documents, the gain their difference. 'mean': a document's mean "
            "sequence score; 'shi': the fraction of its sequences above a threshold tuned on "
            "other documents (Shi et al.), AUC and TPR computed within each fold and averaged "
            "(pooling the folds' scores biases the null AUC upward); meeus: a random forest over "
            "frequency-normalised "
            "token probabilities, cross-validated over documents (Meeus et al.; settings and "
            "differences from the authors' code in the manifest, config.documents).",
        ),
        ("table", document_rows(metrics)),
        *(("p", note) for note in _column_notes(metrics)),
    ]
    blocks += [("p", line) for line in _dataset_lines(metrics.dataset)]
    curve = metrics.dataset.get("curve")
    if curve:
        rows = [
            [str(p["n_docs"]), f"{p['median_p']:.3g}", f"{p['flagged_rate']:.2f}"] for p in curve
        ]
        blocks.append(("table", (["documents per set", "median p", "share flagged"], rows)))
    return blocks + [("p", note) for note in metrics.notes]


def document_rich_table(metrics: DocumentMetrics) -> Any:
    """The terminal's document table."""
    from rich.markup import escape
    from rich.table import Table

    header, rows = document_rows(metrics)
    lines = _column_notes(metrics) + _dataset_lines(metrics.dataset)
    table = Table(
        title=f"documents ({metrics.n_documents}; intervals resample documents)",
        caption=escape("\n".join(lines)) if lines else None,
        caption_justify="left",
    )
    for h in header:
        table.add_column(escape(h), overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table
