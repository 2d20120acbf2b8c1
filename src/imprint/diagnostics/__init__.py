"""Benchmark validity checks: is the member/non-member split itself trustworthy?"""

from imprint.diagnostics.blind import BLIND_WARN_DELTA, BlindResult, blind_baseline, blind_warning
from imprint.diagnostics.blind_suite import (
    BlindSuiteResult,
    blind_suite_warning,
    run_blind_suite,
    strongest_blind,
)
from imprint.diagnostics.decontam import PRESETS, filter_by_overlap, write_filtered
from imprint.diagnostics.overlap import (
    NgramIndex,
    OverlapScores,
    build_index,
    extend_index,
    merge_indexes,
    overlap_scores,
)
from imprint.diagnostics.perturb import paraphrase, perturbed_rows, random_word_edits
from imprint.diagnostics.runs import auc_difference, compare_runs, perturbation_table, read_run

__all__ = [
    "BLIND_WARN_DELTA",
    "PRESETS",
    "BlindResult",
    "BlindSuiteResult",
    "NgramIndex",
    "OverlapScores",
    "auc_difference",
    "blind_baseline",
    "blind_suite_warning",
    "blind_warning",
    "build_index",
    "compare_runs",
    "extend_index",
    "filter_by_overlap",
    "merge_indexes",
    "overlap_scores",
    "paraphrase",
    "perturbation_table",
    "perturbed_rows",
    "random_word_edits",
    "read_run",
    "run_blind_suite",
    "strongest_blind",
    "write_filtered",
]
