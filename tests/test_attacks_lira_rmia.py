"""LiRA and RMIA formulas on hand-made per-model log-likelihoods, computed by hand here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.lira import fit_gaussians, lira_offline, lira_online
from imprint.attacks.rmia import log_marginal, pairwise_fraction, rmia_scores
from imprint.backends.base import TokenStats
from imprint.data import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import ReferenceModel, ReferenceSet

# Four reference models, two examples. Models 0 and 2 trained on x0, models 1 and 3 on x1 (the
# paired halves a game builds). Signals: mean token log-likelihoods.
REF = np.array(
    [
        [-1.0, -3.0],  # model 0: x0 IN, x1 OUT
        [-2.0, -2.0],  # model 1: x0 OUT, x1 IN
        [-1.4, -3.2],  # model 2: x0 IN, x1 OUT
        [-2.6, -2.2],  # model 3: x0 OUT, x1 IN
    ]
)
MEMBER = np.array([[1, 0], [0, 1], [1, 0], [0, 1]])
TARGET = np.array([-1.5, -2.9])


def log_normal(s: float, mu: float, sd: float) -> float:
    return -0.5 * ((s - mu) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)


def test_lira_per_example_variance_by_hand():
    fit = fit_gaussians(REF, MEMBER, variance="per_example")
    # x0: IN {-1.0, -1.4}: mean -1.2, sd (ddof 1) sqrt(0.08); OUT {-2.0, -2.6}: -2.3, sqrt(0.18)
    assert fit.mu_in[0] == pytest.approx(-1.2) and fit.mu_out[0] == pytest.approx(-2.3)
    assert fit.sd_in[0] == pytest.approx(math.sqrt(0.08))
    assert fit.sd_out[0] == pytest.approx(math.sqrt(0.18))
    online = lira_online(TARGET, fit)
    expected = log_normal(-1.5, -1.2, math.sqrt(0.08)) - log_normal(-1.5, -2.3, math.sqrt(0.18))
    assert online[0] == pytest.approx(expected)
    # x1: IN {-2.0, -2.2}: -2.1, sqrt(0.02); OUT {-3.0, -3.2}: -3.1, sqrt(0.02)
    assert lira_offline(TARGET, fit)[1] == pytest.approx((-2.9 + 3.1) / math.sqrt(0.02))


def test_lira_global_variance_by_hand_and_by_least_squares():
    fit = fit_gaussians(REF, MEMBER, variance="global")
    # shift b = mean over examples of (mean IN - mean OUT) here (balanced): (1.1 + 1.0) / 2
    assert fit.shift == pytest.approx(1.05)
    # residuals of s = a(x) + b * IN: x0 .225 .275 -.175 -.325, x1 .125 .075 -.075 -.125;
    # sum of squares 0.305 over 8 values - 2 example effects - 1 shift = 5 dof
    assert fit.sd_global == pytest.approx(math.sqrt(0.305 / 5))
    # the same from a brute-force least-squares fit with one-hot example effects
    rows, ys = [], []
    for r in range(4):
        for x in range(2):
            rows.append([1.0 * (x == 0), 1.0 * (x == 1), float(MEMBER[r, x])])
            ys.append(REF[r, x])
    coef, rss, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    assert fit.shift == pytest.approx(coef[2])
    assert fit.sd_global == pytest.approx(math.sqrt(rss[0] / (8 - 3)))
    sd = math.sqrt(0.061)
    # online with one sd: ((s - mu_out)^2 - (s - mu_in)^2) / (2 sd^2) = (0.64 - 0.09) / 0.122
    assert lira_online(TARGET, fit)[0] == pytest.approx(0.55 / 0.122)
    assert lira_offline(TARGET, fit)[0] == pytest.approx(0.8 / sd)
    assert fit_gaussians(REF, MEMBER).sd_in[0] == pytest.approx(sd)  # auto: K < 64 -> global


def test_lira_missing_class_uses_the_pooled_shift_and_unknowns_are_left_out():
    member = MEMBER.copy()
    member[1, 0] = member[3, 0] = -1  # x0's OUT models unknown: x0 has IN values only
    fit = fit_gaussians(REF, member, variance="global")
    # shift from x1 alone (the only example with both classes): -2.1 - (-3.1) = 1.0
    assert fit.shift == pytest.approx(1.0)
    assert fit.mu_in[0] == pytest.approx(-1.2)
    assert fit.mu_out[0] == pytest.approx(-1.2 - 1.0)
    ref = REF.copy()
    ref[0, 1] = np.nan  # a non-finite signal is left out like an unknown membership
    assert fit_gaussians(ref, MEMBER, variance="per_example").mu_out[1] == pytest.approx(-3.2)


def test_lira_needs_two_values_for_a_variance():
    with pytest.raises(ConfigError, match="K >= 2"):
        fit_gaussians(REF[:1], MEMBER[:1], variance="global")
    with pytest.raises(ConfigError, match="variance"):
        fit_gaussians(REF, MEMBER, variance="pooled")


# RMIA: K = 2, model 0 trained on x0, model 1 on x1; values are log-probabilities.
L = np.log
T_X = L(np.array([0.5, 0.2]))
R_X = L(np.array([[0.4, 0.1], [0.2, 0.3]]))
M_X = np.array([[1, 0], [0, 1]])
T_Z = L(np.array([0.3, 0.1, 0.25]))
R_Z = L(np.array([[0.3, 0.2, 0.1], [0.1, 0.2, 0.3]]))
M_Z = np.zeros((2, 3), dtype=int)


def test_rmia_online_by_hand():
    # Pr(x0) = (0.4 + 0.2) / 2 = 0.3, LR 0.5 / 0.3; Pr(x1) = 0.2, LR 1.0
    assert np.exp(log_marginal(R_X, M_X, offline=False, a=0.3)) == pytest.approx([0.3, 0.2])
    # Pr(z) = 0.2 each: LR(z) = 1.5, 0.5, 1.25
    scores = rmia_scores(T_X, R_X, M_X, T_Z, R_Z, M_Z, offline=False, gamma=1.0)
    assert scores == pytest.approx([3 / 3, 1 / 3])  # x1: only 1.0 / 0.5 > 1
    scores = rmia_scores(T_X, R_X, M_X, T_Z, R_Z, M_Z, offline=False, gamma=1.2)
    assert scores == pytest.approx([2 / 3, 1 / 3])  # x0: 1.667/1.5 = 1.11 is not > 1.2


def test_rmia_offline_by_hand():
    # a = 0.5: x0's OUT model is 1: Pr = (1.5 * 0.2 + 0.5) / 2 = 0.4, LR 1.25;
    # x1's OUT model is 0: Pr = (1.5 * 0.1 + 0.5) / 2 = 0.325, LR 0.6154
    assert np.exp(log_marginal(R_X, M_X, offline=True, a=0.5)) == pytest.approx([0.4, 0.325])
    # z: Pr = (1.5 * 0.2 + 0.5) / 2 = 0.4 each: LR(z) = 0.75, 0.25, 0.625
    scores = rmia_scores(T_X, R_X, M_X, T_Z, R_Z, M_Z, offline=True, a=0.5)
    assert scores == pytest.approx([1.0, 1 / 3])
    # a = 1: Pr(x) = Pr_OUT(x) exactly; a = 0: Pr(x) = (Pr_OUT + 1) / 2
    assert np.exp(log_marginal(R_X, M_X, offline=True, a=1.0)) == pytest.approx([0.2, 0.1])
    assert np.exp(log_marginal(R_X, M_X, offline=True, a=0.0)) == pytest.approx([0.6, 0.55])


def test_rmia_no_out_model_is_nan_and_pairwise_ties_are_strict():
    member = np.array([[1, 0], [1, 1]])  # x0 IN for both models, x1 OUT for model 0
    lm = log_marginal(R_X, member, offline=True, a=0.3)
    assert math.isnan(lm[0]) and np.exp(lm[1]) == pytest.approx((1.3 * 0.1 + 0.7) / 2)
    assert np.isfinite(log_marginal(R_X, member, offline=False, a=0.3)).all()
    # strict >: LR(x) equal to LR(z) with gamma 1 does not count
    assert pairwise_fraction(np.array([0.0, np.nan]), np.array([0.0, -1.0, np.nan]), 1.0)[
        0
    ] == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="population"):
        pairwise_fraction(np.array([0.0]), np.array([np.nan]), 1.0)


def _stats(logp: list[float]) -> TokenStats:
    n = len(logp)
    arr = np.array(logp, dtype=np.float32)
    return TokenStats(
        token_ids=np.arange(n, dtype=np.int32),
        logp=arr,
        mean_logp=np.full(n, -2.0, dtype=np.float32),
        var_logp=np.ones(n, dtype=np.float32),
        rank=np.ones(n, dtype=np.int32),
        argmax=np.zeros(n, dtype=np.int32),
    )


def test_attacks_score_from_signals_by_sample_id():
    """The registered attacks map per-token log-probs to the formulas above; membership comes
    from the reference set by sample id, whatever the text's script."""
    samples = [Sample("a", "中文 文本 一", 1), Sample("b", "نص عربي 🙂", 0)]
    models = tuple(
        ReferenceModel(f"r{i}", f"spec{i}", frozenset({"a" if i % 2 == 0 else "b"}))
        for i in range(4)
    )
    run = RunContext(references=ReferenceSet(models))
    params = {"lira": {"variance": "global"}, "rmia": {"a": 0.3}}  # a fixed: no tuning here
    lira, rmia = build_attacks(["lira", "rmia"], run, params=params)
    lira = lira.prepare(samples, run).attack
    rmia = rmia.prepare(samples, run).attack
    texts = [s.text for s in samples]
    # per-token log-probs whose means are TARGET and REF
    data = {Need(): [(_stats([t - 0.5, t + 0.5]),) for t in TARGET]}
    for r in range(4):
        data[Need(model=f"r{r}")] = [(_stats([v, v]),) for v in REF[r]]
    signals = SignalSet(texts, data)
    scores = lira.score(signals)
    assert scores["lira"][0] == pytest.approx(0.55 / 0.122, rel=1e-5)
    assert scores["lira_offline"][0] == pytest.approx(0.8 / math.sqrt(0.061), rel=1e-5)
    out = rmia.score(signals)  # no population texts: the candidates are the z
    assert set(out) == {"rmia", "rmia_offline"} and np.isfinite(out["rmia"]).all()


def test_attack_parameters_and_availability():
    assert "lira" not in [a.name for a in build_attacks(["all"], RunContext())]
    with pytest.raises(ConfigError, match="--references"):
        build_attacks(["lira"], RunContext())
    run = RunContext(references=ReferenceSet((ReferenceModel("r0", "s", frozenset()),)))
    for params, match in [
        ({"lira": {"signal": "zlib"}}, "signal"),
        ({"lira": {"modes": ("online", "online")}}, "modes"),
        ({"rmia": {"a": 1.5}}, "rmia.a"),
        ({"rmia": {"gamma": 0.0}}, "gamma"),
        ({"rmia": {"population": "heldout"}}, "population"),
    ]:
        with pytest.raises(ConfigError, match=match):
            build_attacks(list(params), run, params=params)
    # online mode with no IN entry at all teaches the offline switch
    (lira,) = build_attacks(["lira"], run)
    with pytest.raises(ConfigError, match="modes=offline"):
        lira.prepare([Sample("x", "t", 1), Sample("y", "u", 0)], run)
    (lira,) = build_attacks(["lira"], run, params={"lira": {"modes": ("offline",)}})
    assert lira.columns() == ("lira_offline",)
