"""Calibration of the paired AUC comparisons by simulation (a few hundred datasets each, seeded):
intervals cover the true AUC(A) - AUC(B) at their level and the test holds its size when two
correlated attacks have equal AUC. Tolerances are 3 binomial standard errors of the measured rate
(``Calibration.within``), derived from the number of simulations."""

from __future__ import annotations

import pytest

from imprint.metrics.paired_calibration import (
    paired_coverage,
    paired_power,
    paired_size,
    simulate_paired,
)

N_SIMS = 300
DOCS = {"n_members": 40, "n_nonmembers": 40, "seqs_per_doc": 4, "within_doc": 0.5}
ALT = {"auc_a": 0.75, "auc_b": 0.65}


@pytest.mark.parametrize("setting", [{}, DOCS], ids=["iid", "documents"])
def test_delong_interval_covers_and_test_holds_size(setting):
    cover = paired_coverage(N_SIMS, seed=1, method="delong", **ALT, **setting)
    size = paired_size(N_SIMS, seed=2, method="delong", **setting)
    assert cover.within(3), cover
    assert size.within(3, one_sided=True), size


def test_paired_bootstrap_covers_and_holds_size_resampling_documents():
    cover = paired_coverage(N_SIMS, seed=3, method="bootstrap", n_resamples=1000, **ALT, **DOCS)
    size = paired_size(N_SIMS, seed=2, method="bootstrap", n_resamples=1000, **DOCS)
    assert cover.within(3), cover
    assert size.within(3, one_sided=True), size


def test_resampling_sequences_of_documents_one_by_one_is_caught():
    # the check has teeth: ignoring the documents (the defect) fails the same tolerance
    wrong = paired_coverage(N_SIMS, seed=1, method="delong", use_groups=False, **ALT, **DOCS)
    assert wrong.measured < wrong.nominal - 3 * wrong.se, wrong


def test_resampling_two_correlated_columns_independently_is_caught():
    # the old `imprint compare`: each column resampled on its own, as if from separate samples.
    # Its interval is too wide (covers far above 95 %) and it misses differences the paired
    # test finds
    old = paired_coverage(N_SIMS, seed=5, method="independent", n_resamples=300, **ALT)
    assert old.measured > old.nominal + 3 * old.se, old
    small = {"auc_a": 0.75, "auc_b": 0.70}
    paired = paired_power(N_SIMS, seed=7, method="delong", **small)
    independent = paired_power(N_SIMS, seed=7, method="independent", n_resamples=300, **small)
    gap = paired.measured - independent.measured
    assert gap > 3 * (paired.se**2 + independent.se**2) ** 0.5, (paired, independent)


def test_simulation_has_the_stated_auc_and_correlation():
    import numpy as np

    from imprint.metrics import auc

    rng = np.random.default_rng(0)
    labels, a, b, groups = simulate_paired(rng, n_members=4000, n_nonmembers=4000,
                                           auc_a=0.8, auc_b=0.6, rho=0.5)  # fmt: skip
    assert groups is None
    assert auc(labels, a) == pytest.approx(0.8, abs=0.01)
    assert auc(labels, b) == pytest.approx(0.6, abs=0.01)
    assert np.corrcoef(a[labels == 0], b[labels == 0])[0, 1] == pytest.approx(0.5, abs=0.04)
    _, _, _, docs = simulate_paired(rng, n_members=5, n_nonmembers=5, seqs_per_doc=3)
    assert docs is not None and len(set(docs)) == 10 and docs.size == 30
