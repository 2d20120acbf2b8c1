"""The audit's epsilon lower bounds: closed forms, brute-force binomial sums, simulation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from imprint.audit.bounds import (
    clopper_pearson_upper,
    multi_run_epsilon,
    one_run_bound,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from imprint.errors import ConfigError, DataError


def brute_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Steinke et al.'s p-value from explicit binomial sums (exact fractions for the pmf)."""
    q = 1 / (1 + math.exp(-eps))
    qf = Fraction(q)

    def pmf(k: int) -> Fraction:
        return math.comb(r, k) * qf**k * (1 - qf) ** (r - k)

    tail = sum((pmf(k) for k in range(v, r + 1)), Fraction(0))
    alpha = max(
        (sum((pmf(v - j) for j in range(1, i + 1)), Fraction(0)) / i for i in range(1, v + 1)),
        default=Fraction(0),
    )
    return min(float(tail + 2 * m * Fraction(delta) * alpha), 1.0)


@pytest.mark.parametrize(
    ("m", "r", "v", "eps", "delta"),
    [
        (100, 20, 18, 1.0, 0.0),
        (500, 100, 80, 0.7, 1e-5),
        (1000, 50, 50, 3.0, 1e-3),
        (10, 4, 1, 0.2, 0.01),
    ],
)
def test_p_value_matches_brute_force(m, r, v, eps, delta):
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(
        brute_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15
    )


@pytest.mark.parametrize(("r", "beta"), [(10, 0.05), (100, 0.05), (100, 0.01), (37, 0.1)])
def test_perfect_guesses_pure_dp_closed_form(r, beta):
    """All r guesses correct, delta = 0: q^r = beta, so eps = log(q / (1 - q)), q = beta^(1/r).
    By hand for r = 100, beta = 0.05: q = 0.970487, eps = log(0.970487 / 0.029513) = 3.4930."""
    q = beta ** (1 / r)
    assert one_run_epsilon(1000, r, r, beta=beta) == pytest.approx(math.log(q / (1 - q)), abs=1e-9)
    if (r, beta) == (100, 0.05):
        assert one_run_epsilon(1000, 100, 100, beta=0.05) == pytest.approx(3.4930, abs=1e-4)


def test_third_party_one_run_audit_figures():
    """Figures from a third-party released audit, not from Steinke et al. 2023's paper: the file
    audit_results.json released with the codedp-cpt-models checkpoints on the Hugging Face hub
    (a one-run audit of DP LLM fine-tuning: 500 canaries, 100 guesses all correct, delta = 1e-5)
    reports 3.47920 at 95 % and 3.02320 at 99 % confidence; the same counts give the same bounds
    here, an independent implementation agreeing with ours."""
    assert one_run_epsilon(500, 100, 100, beta=0.05, delta=1e-5) == pytest.approx(3.47920, abs=1e-4)
    assert one_run_epsilon(500, 100, 100, beta=0.01, delta=1e-5) == pytest.approx(3.02320, abs=1e-4)


def test_bound_is_the_largest_rejected_epsilon():
    m, r, v, beta, delta = 400, 120, 95, 0.05, 1e-5
    eps = one_run_epsilon(m, r, v, beta=beta, delta=delta)
    assert eps > 0
    assert brute_p_value(m, r, v, eps, delta) < beta
    assert brute_p_value(m, r, v, eps + 1e-6, delta) >= beta


def test_no_evidence_gives_zero_and_delta_only_lowers():
    assert one_run_epsilon(200, 100, 50, beta=0.05) == 0.0  # chance accuracy
    assert one_run_epsilon(200, 10, 0, beta=0.05) == 0.0
    pure = one_run_epsilon(1000, 200, 170, beta=0.05)
    approx = one_run_epsilon(1000, 200, 170, beta=0.05, delta=1e-4)
    assert 0 < approx < pure


def test_bound_is_valid_under_randomized_response():
    """Simulated eps-DP randomized response (each guess right with prob e^eps/(1+e^eps)): the
    p-value at the true eps is <= beta in at most a beta share of runs (the bound's coverage)."""
    rng = np.random.default_rng(0)
    eps, m, r, beta = 1.0, 500, 60, 0.05
    q = 1 / (1 + math.exp(-eps))
    v = rng.binomial(r, q, size=4000)
    rejected = np.mean([one_run_p_value(m, r, int(k), eps) <= beta for k in v])
    assert rejected <= beta + 0.01
    assert rejected > 0.01  # the test has power: the binomial tail is nearly exact


def test_guesses_top_and_bottom_scores_and_abstain():
    scores = np.array([0.9, 0.1, 0.8, 0.2, 0.5, 0.4])
    included = np.array([True, False, False, False, True, True])
    # in on {0.9, 0.8}: one right; out on {0.1, 0.2}: both right
    assert one_run_guesses(scores, included, k_pos=2, k_neg=2) == (4, 3)
    bound = one_run_bound(scores, included, guesses=4, beta=0.05)
    assert (bound.guesses, bound.correct, bound.k_pos, bound.k_neg) == (4, 3, 2, 2)
    only_in = one_run_bound(scores, included, guesses=1, side="in")
    assert (only_in.correct, only_in.k_neg) == (1, 0)


def test_guess_input_errors():
    with pytest.raises(DataError, match="NaN"):
        one_run_guesses([0.1, float("nan")], [True, False], k_pos=1, k_neg=0)
    with pytest.raises(DataError, match="equal"):
        one_run_guesses([0.1, 0.2], [True], k_pos=1, k_neg=0)
    with pytest.raises(ConfigError, match="cannot guess"):
        one_run_guesses([0.1, 0.2], [True, False], k_pos=2, k_neg=1)
    with pytest.raises(ConfigError, match="correct"):
        one_run_epsilon(10, 5, 6)
    with pytest.raises(ConfigError, match="beta"):
        one_run_epsilon(10, 5, 5, beta=1.5)


def brute_cp_upper(k: int, n: int, alpha: float) -> float:
    """Largest p with P[Binomial(n, p) <= k] >= alpha, by bisection on explicit sums."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        p = (lo + hi) / 2
        cdf = sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1))
        lo, hi = (p, hi) if cdf > alpha else (lo, p)
    return lo


@pytest.mark.parametrize(
    ("k", "n", "alpha"), [(0, 20, 0.025), (3, 50, 0.025), (10, 10, 0.05), (7, 30, 0.1)]
)
def test_clopper_pearson_matches_brute_force(k, n, alpha):
    expected = 1.0 if k == n else brute_cp_upper(k, n, alpha)
    assert clopper_pearson_upper(k, n, alpha) == pytest.approx(expected, abs=1e-9)
    if k == 0:  # closed form: 1 - alpha^(1/n)
        assert clopper_pearson_upper(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n))


def test_multi_run_bound_by_hand():
    """1,000 runs each way, 0 false positives and 0 false negatives, beta = 0.05: the upper
    rates are 1 - 0.025^(1/1000) = 0.0036823 each, eps >= log((1 - 0.0036823) / 0.0036823) =
    5.6005; a coin-flip attack gives 0."""
    u = 1 - 0.025 ** (1 / 1000)
    assert multi_run_epsilon(0, 1000, 0, 1000, beta=0.05) == pytest.approx(math.log((1 - u) / u))
    assert multi_run_epsilon(0, 1000, 0, 1000, beta=0.05) == pytest.approx(5.6005, abs=1e-4)
    assert multi_run_epsilon(500, 1000, 500, 1000) == 0.0
    with_delta = multi_run_epsilon(0, 1000, 0, 1000, delta=0.1)
    assert with_delta == pytest.approx(math.log((0.9 - u) / u))
    # asymmetric: few false negatives, many false positives -> the symmetric form decides
    fpr, fnr = clopper_pearson_upper(300, 1000, 0.025), clopper_pearson_upper(5, 1000, 0.025)
    assert multi_run_epsilon(300, 1000, 5, 1000) == pytest.approx(math.log((1 - fpr) / fnr))
