"""CAMIA's p-values have their stated size (a seeded simulation, no model).

Null: the reference non-members and the tested text come from one distribution (texts drawn
without replacement from one bank of simulated loss trajectories). A valid p-value rejects at
level alpha at most alpha of the time; a conformal one with n + 1 a multiple of 1 / alpha
exactly alpha. Checked per feature (both tails, with the ties of CAMIA's discrete features) and
for the calibrated combined p-value under every ``combine=`` method, against an exact binomial
interval over a few thousand simulated texts.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from imprint.attacks.camia import (
    HIGHER,
    METHODS,
    camia_features,
    combined_p_values,
    feature_matrix,
    p_values,
)

ALPHAS = (0.05, 0.1)
N_REF = 19  # p-values in multiples of 1/20: P(p <= 0.05) and P(p <= 0.1) are exactly alpha
TRIALS = 3000


def simulated_text(rng: np.random.Generator) -> dict[str, float]:
    """CAMIA's features of one simulated text: AR(1) log-normal losses of random length, token
    ids from a small vocabulary (repeats: diversity < 1), repeated passes a little lower."""
    n = int(rng.integers(20, 90))
    z = np.empty(n)
    z[0] = rng.normal()
    for t in range(1, n):
        z[t] = 0.6 * z[t - 1] + 0.8 * rng.normal()
    losses = np.exp(0.8 + 0.7 * z)
    ids = rng.integers(0, 40, n)
    rep1 = np.concatenate([losses, losses * rng.uniform(0.2, 0.6, n)])
    rep2 = np.concatenate([rep1, losses * rng.uniform(0.1, 0.4, n)])
    return camia_features(losses, ids, rep1, rep2)


@pytest.fixture(scope="module")
def bank() -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(7)
    return feature_matrix([simulated_text(rng) for _ in range(300)])


def draws(bank_size: int, seed: int) -> np.ndarray:
    """TRIALS index rows of N_REF + 1 distinct texts: the first is the tested one."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(bank_size, N_REF + 1, replace=False) for _ in range(TRIALS)])


def assert_size(rejections: int, alpha: float, what: str) -> None:
    test = binomtest(rejections, TRIALS, alpha)
    low, high = test.proportion_ci(0.999)
    assert low <= alpha <= high, (
        f"{what}: rejected {rejections}/{TRIALS} = {rejections / TRIALS:.4f} at alpha {alpha} "
        f"(99.9 % interval [{low:.4f}, {high:.4f}])"
    )


def test_each_features_p_value_is_valid_on_both_tails(bank):
    names, values = bank
    idx = draws(len(values), seed=1)
    for k, name in enumerate(names):
        for higher in (False, True):
            col = values[:, [k]]
            p = np.array([p_values(col[i[:1]], col[i[1:]], [higher])[0, 0] for i in idx[:600]])
            for alpha in ALPHAS:
                rate = float(np.mean(p <= alpha))
                # conservative with ties (shares, counts), never above alpha beyond noise
                assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / len(p)), (
                    f"{name} ({'upper' if higher else 'lower'} tail): P(p <= {alpha}) = {rate:.3f}"
                )


def test_continuous_features_p_values_are_exactly_uniform_at_the_grid(bank):
    names, values = bank
    idx = draws(len(values), seed=2)
    k = names.index("cut_T")  # a mean loss: continuous, no ties
    col = values[:, [k]]
    for higher in (False, True):
        p = np.array([p_values(col[i[:1]], col[i[1:]], [higher])[0, 0] for i in idx])
        for alpha in ALPHAS:
            assert_size(int(np.sum(p <= alpha + 1e-12)), alpha, f"cut_T {higher=}")


@pytest.mark.parametrize("method", METHODS)
def test_the_combined_p_value_is_uniform_under_the_null(bank, method):
    names, values = bank
    tails = [n in HIGHER for n in names]
    idx = draws(len(values), seed=3)
    p = np.array([combined_p_values(values[i[:1]], values[i[1:]], tails, method)[0] for i in idx])
    assert np.all((p > 0) & (p <= 1))
    for alpha in ALPHAS:
        assert_size(int(np.sum(p <= alpha + 1e-12)), alpha, f"combined ({method})")


def test_the_combined_p_value_is_small_for_a_member_like_text(bank):
    names, values = bank
    tails = [n in HIGHER for n in names]
    ref = values[:N_REF]
    # every loss-level feature below every reference's: the most member-like text there is
    odd = ref.min(axis=0, keepdims=True) - 1.0
    for k, name in enumerate(names):
        if name in HIGHER:
            odd[0, k] = ref[:, k].max() + 1.0
    for method in METHODS:
        assert combined_p_values(odd, ref, tails, method)[0] == pytest.approx(1 / (N_REF + 1))
