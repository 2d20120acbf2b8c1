"""Per-attack formulas against hand-computed values on fixed log-probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.con_recall import ConRecall, con_recall_score
from imprint.attacks.dc_pdd import (
    DcPdd,
    count_tokens,
    dc_pdd_score,
    first_occurrences,
    smoothed_frequencies,
)
from imprint.attacks.gradnorm import GradNorm, gradnorm_score
from imprint.attacks.neighborhood import Neighborhood, neighbourhood_score
from imprint.attacks.pac import Pac, pac_score, polarized_distance
from imprint.attacks.recall import Recall, recall_score
from imprint.attacks.surp import Surp, surp_score
from imprint.backends.base import TokenStats
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


def stats(logp, *, entropy=None, ids=None) -> TokenStats:
    logp = np.asarray(logp, dtype=np.float32)
    n = len(logp)
    ent = np.zeros(n) if entropy is None else np.asarray(entropy)
    return TokenStats(
        token_ids=np.arange(n, dtype=np.int32) if ids is None else np.asarray(ids, np.int32),
        logp=logp,
        mean_logp=(-ent).astype(np.float32),
        var_logp=np.ones(n, np.float32),
        rank=np.ones(n, np.int32),
        argmax=np.zeros(n, np.int32),
    )


# -- SURP ----------------------------------------------------------------------------------------
LOGP = [-0.1, -3.0, -0.5, -2.0, -4.0]
ENTROPY = [0.5, 1.0, 3.0, 2.5, 1.5]


def test_surp_keeps_low_probability_low_entropy_tokens():
    # k=0.4 of 5 tokens -> the 2 lowest: -4.0 (H 1.5) and -3.0 (H 1.0), both below 2.0
    assert surp_score(LOGP, ENTROPY, k=0.4, max_entropy=2.0) == pytest.approx(-3.5)
    # entropy threshold 1.2 keeps only -3.0
    assert surp_score(LOGP, ENTROPY, k=0.4, max_entropy=1.2) == pytest.approx(-3.0)
    # k=0.6 -> 3 lowest (-4, -3, -2); -2.0 has H 2.5: kept only under threshold 3
    assert surp_score(LOGP, ENTROPY, k=0.6, max_entropy=2.0) == pytest.approx(-3.5)
    assert surp_score(LOGP, ENTROPY, k=0.6, max_entropy=3.0) == pytest.approx(-3.0)


def test_surp_empty_set_falls_back_to_min_k_mean():
    # threshold is strict: no selected token has entropy < 1.0 -> mean of the 2 lowest
    assert surp_score(LOGP, ENTROPY, k=0.4, max_entropy=1.0) == pytest.approx(-3.5)
    assert surp_score([-1.0], [9.0], k=0.1) == pytest.approx(-1.0)  # at least one token


def test_surp_attack_reads_entropy_from_token_stats():
    signals = SignalSet(["x"], {Need(): [(stats(LOGP, entropy=ENTROPY),)]})
    out = Surp(k=0.4, max_entropy=1.2).score(signals)
    assert out["surp"] == pytest.approx([-3.0])
    with pytest.raises(ConfigError):
        Surp(k=0)
    with pytest.raises(ConfigError):
        Surp(max_entropy=0)


# -- DC-PDD --------------------------------------------------------------------------------------
def test_dc_pdd_first_occurrences_and_clipping():
    ids = np.array([5, 2, 5, 7])
    logp = np.log([0.5, 0.2, 0.9, 0.1])
    counts = np.array([3, 0, 1, 0, 0, 4, 0, 2])  # N = 10, V = 8 -> f = (c + 1) / 18
    freq = smoothed_frequencies(counts)
    assert freq[[5, 2, 7]] == pytest.approx([5 / 18, 2 / 18, 3 / 18])
    assert list(first_occurrences(ids)) == [0, 1, 3]  # the second 5 is skipped
    alphas = [0.5 * math.log(18 / 5), 0.2 * math.log(18 / 2), 0.1 * math.log(18 / 3)]
    assert dc_pdd_score(ids, logp, freq, a=1.0) == pytest.approx(np.mean(alphas))
    assert dc_pdd_score(ids, logp, freq, a=0.5) == pytest.approx(np.mean([0.5, *alphas[1:]]))
    assert dc_pdd_score(ids, logp, freq, a=0.01) == pytest.approx(0.01)


def test_dc_pdd_default_counts_the_pooled_texts_smoothed_over_the_vocabulary():
    a, b = stats(np.log([0.5, 0.25]), ids=[1, 2]), stats(np.log([0.5, 0.5]), ids=[2, 3])
    signals = SignalSet(["x", "y"], {Need(): [(a,), (b,)]})
    out = DcPdd(a=10.0, vocab_size=10).score(signals)["dc_pdd"]
    counts = count_tokens([[1, 2], [2, 3]])  # [0, 1, 2, 1]: N = 4
    assert list(counts) == [0, 1, 2, 1]
    # the paper's V is the model's vocabulary (10 here), not the largest id seen + 1 (4):
    # f = (c + 1) / (N + V) = (c + 1) / 14
    expected = [
        (0.5 * math.log(14 / 2) + 0.25 * math.log(14 / 3)) / 2,
        (0.5 * math.log(14 / 3) + 0.5 * math.log(14 / 2)) / 2,
    ]
    assert out == pytest.approx(expected)
    # a V below an id the texts use still gives that id a row (here V = 4: f = (c + 1) / 8)
    low = DcPdd(a=10.0, vocab_size=2).score(signals)["dc_pdd"]
    assert low[0] == pytest.approx((0.5 * math.log(8 / 2) + 0.25 * math.log(8 / 3)) / 2)
    with pytest.raises(ConfigError, match="vocabulary size"):
        DcPdd(a=10.0).score(signals)  # no V: refused, not guessed from the texts
    with pytest.raises(ConfigError):
        DcPdd(a=0)
    with pytest.raises(ConfigError, match="vocab_size"):
        DcPdd(vocab_size=0)


def test_dc_pdd_takes_v_from_the_run_and_the_manifest_shows_it():
    (attack,) = build_attacks(["dc_pdd"], RunContext(vocab_size=49152))
    assert vars(attack)["vocab_size"] == 49152
    (given,) = build_attacks(
        ["dc_pdd"], RunContext(vocab_size=49152), params={"dc_pdd": {"vocab_size": 7}}
    )
    assert given.vocab_size == 7  # an explicit V wins
    with pytest.raises(ConfigError, match="vocabulary size"):
        DcPdd().prepare([], RunContext())  # checked before any model pass


# -- ReCaLL / CON-ReCall -------------------------------------------------------------------------
def test_recall_ratio():
    assert recall_score([-3.0, -2.0], [-2.0, -2.5]) == pytest.approx([1.5, 0.8])
    assert np.isfinite(recall_score([-1.0], [0.0])).all()  # certain text: finite, not inf


def test_recall_attack_score():
    signals = SignalSet(
        ["x"],
        {Need(): [(stats([-2.0, -2.0]),)], Need(prefix="recall"): [(stats([-4.0, -2.0]),)]},
    )
    assert Recall().score(signals)["recall"] == pytest.approx([1.5])


def test_con_recall_formula_and_sweep():
    assert con_recall_score([-3.0], [-1.0], [-2.0], gamma=0.5) == pytest.approx([1.25])
    assert con_recall_score([-3.0], [-1.0], [-2.0], gamma=1.0) == pytest.approx([1.0])
    assert con_recall_score([-3.0], [-1.0], [-2.0], gamma=0.0) == pytest.approx([1.5])
    attack = ConRecall(sweep=(0.0, 1))
    assert attack.columns() == ("con_recall", "con_recall@0", "con_recall@1")
    signals = SignalSet(
        ["x"],
        {
            Need(): [(stats([-2.0]),)],
            Need(prefix="con_recall.nonmember"): [(stats([-3.0]),)],
            Need(prefix="con_recall.member"): [(stats([-1.0]),)],
        },
    )
    out = attack.score(signals)
    assert out["con_recall"] == pytest.approx([1.25])
    assert out["con_recall@0"] == pytest.approx([1.5])
    assert out["con_recall@1"] == pytest.approx([1.0])
    with pytest.raises(ConfigError):
        ConRecall(gamma=-1)
    with pytest.raises(ConfigError):
        Recall(n_shots=0)


# -- PAC -----------------------------------------------------------------------------------------
def test_polarized_distance():
    logp = [-0.1, -0.2, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]
    # far: max(1, floor(0.5)) = 1 highest (-0.1); near: floor(3) = 3 lowest (-8, -7, -6)
    assert polarized_distance(logp) == pytest.approx(-0.1 + 7.0)
    assert polarized_distance([-2.0]) == 0.0  # one token is both ends
    assert polarized_distance(logp, far=0.2, near=0.1) == pytest.approx(-0.15 + 8.0)


def test_pac_score_is_calibration_minus_own_distance():
    logp = [-0.1, -0.2, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]
    augmented = [np.array([-1.0, -5.0]), np.array([-2.0, -2.0])]  # distances 4 and 0
    assert pac_score(logp, augmented) == pytest.approx(2.0 - 6.9)
    with pytest.raises(ConfigError):
        Pac(n_aug=0)
    with pytest.raises(ConfigError):
        Pac(far=0)


# -- Neighbourhood -------------------------------------------------------------------------------
def test_neighbourhood_uses_the_mean_not_the_max():
    assert neighbourhood_score(2.0, [2.5, 3.5, 6.0]) == pytest.approx(4.0 - 2.0)
    assert neighbourhood_score(2.0, []) == 0.0


def test_neighbourhood_attack_uses_the_mean_of_neighbour_losses():
    attack = Neighborhood(n=3)
    nbrs = (stats([-2.5]), stats([-3.5]), stats([-6.0]))
    signals = SignalSet(["x"], {Need(): [(stats([-2.0]),)], Need(variant=attack.variant): [nbrs]})
    assert attack.score(signals)["neighborhood"] == pytest.approx([2.0])  # max would give 4


# -- GradNorm ------------------------------------------------------------------------------------
def test_gradnorm_sign_smaller_gradient_ranks_higher():
    scores = gradnorm_score(np.array([1.0, 3.0]))
    assert scores == pytest.approx([-1.0, -3.0])
    assert scores[0] > scores[1]
    with pytest.raises(ConfigError):
        GradNorm(norm="l3")


def test_all_includes_new_gray_box_attacks_but_not_white_box():
    names = {a.name for a in build_attacks(["all"])}
    assert {"surp", "dc_pdd", "recall", "pac", "neighborhood"} <= names
    assert "gradnorm" not in names
    assert "con_recall" not in names  # needs a declared pool of known members
    known = RunContext(pools={"members": (Sample("k", "A known member.", 1),)})
    assert "con_recall" in {a.name for a in build_attacks(["all"], known)}
