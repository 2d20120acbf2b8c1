"""The calibration suite: every interval, p-value and verdict imprint reports, checked on
simulated data whose truth is known (``benchmarks/bench_calibration.py`` prints the table).

Each entry of :data:`SUITE` is a small function ``(n_sims, seed) -> list[Row]``; the tests
call them with a few hundred simulations, the benchmark with more (``full``) or the
``quick`` counts. A row passes when its measured coverage, size or mean is within the
tolerance its number of simulations allows (:mod:`imprint.calibration.core`); rows that run an
old behaviour (``expect_pass=False``) show a defect reproduced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from imprint.calibration import baselines, blind_verdicts, documents, duci, edges, hooks, sequences
from imprint.calibration.core import Row

__all__ = ["SUITE", "Entry", "Row", "run_suite"]


@dataclass(frozen=True)
class Entry:
    """A suite entry: its rows' function and the simulations a quick and a full run use."""

    name: str
    rows: Callable[[int, int], list[Row]]
    quick: int
    full: int


SUITE: tuple[Entry, ...] = (
    Entry("sequence_iid", sequences.rows_iid, 200, 1000),
    Entry("resolution", sequences.rows_resolution, 50, 200),
    Entry("tpr_edge", edges.rows_tpr_edge, 200, 1000),
    Entry("tpr_edge_headline", edges.rows_tpr_edge_headline, 20, 1000),
    Entry("document_tpr_edge", edges.rows_doc_tpr_edge, 200, 1000),
    Entry("grouped_tpr_edge", edges.rows_grouped_tpr_edge, 200, 1000),
    Entry("degenerate", edges.rows_degenerate, 200, 1000),
    Entry("sequence_clustered", sequences.rows_clustered, 200, 1000),
    Entry("document_mean", documents.rows_mean, 500, 1000),
    Entry("document_shi", documents.rows_shi, 200, 1000),
    Entry("document_meeus", documents.rows_meeus, 30, 200),
    Entry("blind", baselines.rows_blind, 100, 400),
    Entry("blind_verdict", blind_verdicts.rows_blind_verdict, 40, 400),
    Entry("duci", duci.rows_duci, 60, 300),
    Entry("transfer", baselines.rows_transfer, 200, 1000),
    Entry("reference_attacks", baselines.rows_reference_attacks, 200, 1000),
    # rows from the modules that own the figures (empty where a module is missing)
    Entry("dataset_inference", hooks.rows_dataset_inference, 200, 1000),
    Entry("paired", hooks.rows_paired, 200, 1000),
    Entry("paired_documents", hooks.rows_paired_documents, 200, 1000),
)


def run_suite(*, quick: bool = True, seed: int = 0, only: Sequence[str] | None = None) -> list[Row]:
    """Every row of the entries named in ``only`` (default: all), quick or full counts."""
    names = [e.name for e in SUITE]
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        from imprint.errors import ConfigError

        raise ConfigError(f"unknown calibration entries {unknown}; choose from {names}")
    rows: list[Row] = []
    for k, entry in enumerate(SUITE):
        if only and entry.name not in only:
            continue
        rows += entry.rows(entry.quick if quick else entry.full, seed + 1000 * k)
    return rows
