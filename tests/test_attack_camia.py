"""CAMIA (Chang et al. 2024): its primitive signals and combiner on hand-computed values, agreement
with a transcription of LeakPro's CAMIA branch on a tiny random Llama's losses of 40 WikiMIA texts
(against 20 reference texts), and an end-to-end run whose reference non-members leave the
evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attack_fixtures import (
    LeakProCAMIATranscription,
    client_for,
    run_fitted_on_held_out,
    wikimia_texts,
)
from scipy.stats import spearmanr

from imprint.attacks.camia import (
    CAMIA,
    REPEAT,
    approximate_entropy,
    camia_features,
    camia_scores,
    combine,
    count_below_prev_mean,
    lz_complexity,
    p_values,
    slope,
)
from imprint.errors import ConfigError

# -- formulas on hand-computed values ----------------------------------------------------------


def test_slope_is_the_least_squares_slope_of_the_cyclically_extended_losses():
    assert slope(np.array([3.0, 2.0, 1.0]), 3) == pytest.approx(-1.0)
    # [1, 2] extended to [1, 2, 1, 2]: cov 0.25 / var 1.25
    assert slope(np.array([1.0, 2.0]), 4) == pytest.approx(0.2)
    assert slope(np.array([5.0, 1.0, 9.0]), 2) == pytest.approx(-4.0)  # first 2 values only


def test_lempel_ziv_counts_phrases_of_the_binned_losses():
    # 3 bins over [0, 1]: symbols B C B C -> phrases B | C | BC, starting from one: 4
    assert lz_complexity(np.array([0.0, 1.0, 0.0, 1.0]), 3) == 4.0
    assert lz_complexity(np.array([2.0, 2.0, 2.0]), 16) == 1.0  # constant
    assert lz_complexity(np.array([]), 16) == 0.0


def test_count_below_previous_mean_and_approximate_entropy():
    # t=2: 3 <= 1 no; t=3: 1 <= (1+3)/2 yes
    assert count_below_prev_mean(np.array([1.0, 3.0, 1.0])) == pytest.approx(0.5)
    assert count_below_prev_mean(np.array([1.0])) == 0.0
    assert approximate_entropy(np.ones(20), 20) == pytest.approx(0.0, abs=1e-9)
    assert approximate_entropy(np.ones(5), 5) == 0.0  # fewer than m + 2 values
    # alternating 0/1, m = 1, r = 0.5: each of the 10 windows matches 5, phi(1) = log(1/2); at
    # m = 2 five windows [0, 1] match 5 of 9 and four [1, 0] match 4 of 9
    alt = np.array([0.0, 1.0] * 5)
    phi2 = (5 * math.log(5 / 9) + 4 * math.log(4 / 9)) / 9
    assert approximate_entropy(alt, 10, m=1, r=0.5) == pytest.approx(math.log(0.5) - phi2)


def test_p_values_on_both_tails_and_their_clip():
    ref = np.array([[1.0], [2.0], [3.0]])
    # conformal: (1 + #{ref <= x}) / 4 below, (1 + #{ref >= x}) / 4 above (a tie counts against)
    low = p_values(np.array([[2.0], [0.0], [np.nan]]), ref, [False])
    assert low[:, 0][:2] == pytest.approx([3 / 4, 1 / 4]) and np.isnan(low[2, 0])
    high = p_values(np.array([[2.0], [4.0]]), ref, [True])
    assert high[:, 0] == pytest.approx([3 / 4, 1 / 4])
    # LeakPro's rule: #{ref <= x} / 4 below (0, clipped, under every reference), (3 - #{ref <= x}
    # + 1) / 4 above
    low = p_values(np.array([[2.0], [0.0]]), ref, [False], rule="leakpro")
    assert low[:, 0] == pytest.approx([2 / 4, 1e-5])
    high = p_values(np.array([[2.0], [4.0]]), ref, [True], rule="leakpro")
    assert high[:, 0] == pytest.approx([2 / 4, 1 / 4])
    with pytest.raises(ConfigError, match="p_rule must be one of"):
        CAMIA(p_rule="exact")


def test_combination_methods_are_higher_for_smaller_p_values():
    p = np.array([[0.5, 0.25], [0.9, 0.8]])
    assert combine(p, "fisher")[0] == pytest.approx(2 * math.log(8))
    for method in ("fisher", "edgington", "pearson", "george"):
        s = combine(p, method)
        assert s[0] > s[1], method
    assert combine(p, "edgington") == pytest.approx([-0.75, -1.7])
    with pytest.raises(ConfigError, match="camia.combine must be one of"):
        combine(p, "stouffer")


def test_features_of_a_hand_made_text():
    losses = np.array([4.0, 2.0, 1.0, 1.0])
    ids = np.array([7, 8, 7, 9])  # 3 distinct of 4
    rep1 = np.array([4.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5])  # last copy: four 0.5
    rep2 = np.concatenate([rep1, [0.25] * 4])  # last copy: four 0.25
    f = camia_features(losses, ids, rep1, rep2)
    assert f["cut_T"] == pytest.approx(2.0) and f["cut_200"] == f["cut_T"]
    assert f["cut_T_rep1_diff"] == pytest.approx(2.0 - 0.5)
    assert f["cal_T"] == pytest.approx(2.0 / 0.75)
    assert f["ppl_T_rep2_diff"] == pytest.approx(math.exp(2.0) - math.exp(0.25))
    assert f["cb_const2.5"] == pytest.approx(0.25)  # one loss of four above 2.5
    assert f["cb_const2.5_rep1_diff"] == pytest.approx(0.25 - 0.0)  # none of the copy's
    assert f["cbm_T"] == pytest.approx(0.25)  # above the mean 2.0: only 4.0
    assert f["cbpm_T"] == pytest.approx(1 - 1.0)  # every later loss <= the mean before it
    assert f["slope_256"] > 0  # minus a falling slope
    assert len(f) == 66
    # LeakPro's sequences: the whole repeated text, its first 200 losses for the counts
    g = camia_features(losses, ids, rep1, rep2, repeats="leakpro")
    assert g["cut_T_rep1_diff"] == pytest.approx(2.0 - 1.25)
    assert g["ppl_T_rep2_diff"] == pytest.approx(math.exp(2.0) - math.exp(rep2.mean()))
    assert g["cb_const2.5_rep1_diff"] == pytest.approx(0.25 - 1 / 8)
    with pytest.raises(ConfigError, match="repeats must be one of"):
        CAMIA(repeats="whole")


def test_repeat_deltas_of_a_long_text_compare_the_copy_not_the_texts_own_losses():
    rng = np.random.default_rng(0)
    losses = rng.uniform(0.5, 5.0, 250)  # longer than the 200-loss window of counts and LZ
    ids = np.arange(250)
    copy = losses * 0.3  # the model copies from context: lower losses in the second copy
    rep1 = np.concatenate([losses, copy])
    rep2 = np.concatenate([losses, copy, copy * 0.5])
    f = camia_features(losses, ids, rep1, rep2)
    g = camia_features(losses, ids, rep1, rep2, repeats="leakpro")
    for name in ("cb_const3.0_rep1_diff", "lz_bins16_rep2_diff"):
        assert g[name] == 0.0  # LeakPro: the first 200 losses of the repeat ARE the text's
    share = float(np.mean(losses[:200] > 3.0))
    assert f["cb_const3.0_rep1_diff"] == pytest.approx(share - float(np.mean(copy[:200] > 3.0)))
    assert f["cb_const3.0_rep2_diff"] == pytest.approx(
        share - float(np.mean(copy[:200] * 0.5 > 3.0))
    )


# -- agreement with LeakPro's CAMIA branch -------------------------------------------------------


def test_camia_agrees_with_the_leakpro_transcription_on_40_texts(tiny_model_dir, one_torch_thread):
    texts = wikimia_texts(60)
    client = client_for(str(tiny_model_dir))
    base = client.token_stats("target", texts)
    reps = client.token_stats("target", [t for x in texts for t in REPEAT.apply(x)])
    mine = [
        camia_features(
            -b.logp.astype(float),
            b.token_ids,
            -reps[2 * i].logp,
            -reps[2 * i + 1].logp,
            repeats="leakpro",
        )
        for i, b in enumerate(base)
    ]
    leak = LeakProCAMIATranscription()
    theirs = [
        leak.features(
            (-b.logp.astype(float)).tolist(),
            b.token_ids.tolist(),
            (-reps[2 * i].logp.astype(float)).tolist(),
            (-reps[2 * i + 1].logp.astype(float)).tolist(),
        )
        for i, b in enumerate(base)
    ]
    feature_gap = max(abs(m[k] - t[k]) for m, t in zip(mine, theirs, strict=True) for k in m)
    assert set(mine[0]) == set(theirs[0]) and feature_gap < 1e-9
    # LeakPro's settings: its p-value rule, every feature on the lower tail
    ours = camia_scores(mine[:40], mine[40:], rule="leakpro", higher=frozenset())
    directions: dict[str, str] = {}
    for dtype in (np.float64, np.float32):
        ref = np.array(leak.score(theirs[:40], theirs[40:], directions, dtype=dtype))
        gap = float(np.max(np.abs(ours - ref)))
        rho = spearmanr(ours, ref).statistic
        print(
            f"camia vs LeakPro ({np.dtype(dtype).name} reference), 40 texts: "
            f"max |diff| {gap:.2e}, Spearman {rho:.4f}"
        )
        if dtype is np.float64:
            assert gap < 1e-9 and rho == pytest.approx(1.0)
        else:  # LeakPro's float32 reference splits ties of discrete features (shares, counts)
            assert rho > 0.95


# -- a run ----------------------------------------------------------------------------------------


def test_reference_non_members_leave_the_evaluation_and_the_run_scores(tiny_model_dir, tmp_path):
    result = run_fitted_on_held_out(tiny_model_dir, tmp_path, "camia", {"n_reference": 3}, 3)
    assert len(result.samples) == 10  # 13 - 3 held-out reference non-members
    scores = result.scores["camia"]
    assert scores.shape == (10,) and np.all(np.isfinite(scores)) and np.all(scores >= 0)
    assert sum(result.manifest["data"]["dropped"].values()) >= 3


def test_all_includes_camia_only_when_the_run_holds_out_enough_non_members():
    from imprint.attacks import RunContext, build_attacks
    from imprint.attacks.shots import HELDOUT_KEY
    from imprint.data.sample import Sample

    held = tuple(Sample(f"p{i}", f"text {i}", 0) for i in range(10))
    few = RunContext(pools={HELDOUT_KEY: held[:4]})
    assert "camia" not in {a.name for a in build_attacks(["all"], few)}
    assert "camia" in {
        a.name for a in build_attacks(["all"], RunContext(pools={HELDOUT_KEY: held}))
    }
    with pytest.raises(ConfigError, match="n_reference must be >= 2"):
        CAMIA(n_reference=1)
