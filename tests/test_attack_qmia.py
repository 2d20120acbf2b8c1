"""Quantile-regression MIA (Bertran et al. 2023): the pinball loss and the fitted quantile on
hand-computed values, agreement with a transcription of LeakPro's training loop on 40 WikiMIA
texts, and an end-to-end run fitted on the run's held-out non-members."""

from __future__ import annotations

import numpy as np
import pytest
from attack_fixtures import (
    client_for,
    leakpro_qmia_scores_transcription,
    run_fitted_on_held_out,
    wikimia_texts,
)
from conftest import HashEmbedder
from scipy.stats import spearmanr

from imprint.attacks.qmia import QMIA, fit_quantile_head, pinball_loss, principal_components
from imprint.errors import ConfigError


def test_pinball_loss_on_hand_computed_values():
    # y - q = [1, -2]: tau 0.9 -> (0.9 * 1 + 0.1 * 2) / 2
    assert pinball_loss(np.array([1.0, 0.0]), np.array([0.0, 2.0]), 0.9) == pytest.approx(0.55)
    assert pinball_loss(np.array([3.0]), np.array([3.0]), 0.5) == 0.0


def test_a_head_on_constant_features_learns_the_empirical_quantile():
    y = np.arange(1.0, 11.0)  # the 0.9-quantile minimisers of the pinball loss: [9, 10]
    predict = fit_quantile_head(np.zeros((10, 1)), y, 0.9, epochs=2000, lr=1e-2, weight_decay=0)
    assert 8.9 <= predict(np.zeros((1, 1)))[0] <= 10.1
    low = fit_quantile_head(np.zeros((10, 1)), y, 0.1, epochs=2000, lr=1e-2, weight_decay=0)
    assert 0.9 <= low(np.zeros((1, 1)))[0] <= 2.1


def test_the_score_is_ll_minus_the_fitted_quantile():
    attack = QMIA(alpha=0.5, epochs=2000)
    train_x, x = np.zeros((5, 1)), np.zeros((2, 1))
    s = attack.scores(train_x, np.array([-5.0, -4.0, -3.0, -2.0, -1.0]), x, np.array([0.0, -3.0]))
    assert s == pytest.approx([3.0, 0.0], abs=0.05)  # the median of the non-members is -3
    with pytest.raises(ConfigError, match="alpha"):
        QMIA(alpha=1.0)


def test_principal_components_keep_k_directions_and_none_below_one():
    x = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.1]])
    one = principal_components(x, 1)(x)
    assert one.shape == (3, 1) and abs(one[2, 0] - one[0, 0]) == pytest.approx(4.0, abs=0.01)
    assert np.all(principal_components(x, 0)(x) == 0.0)  # a constant head


def test_the_fitted_quantile_covers_fresh_non_members_at_about_alpha():
    """Coverage: a linear LL law on 384-d embeddings; the head's 0.9-quantile, fitted on n
    non-members, is exceeded by ~10 % of 2,000 fresh ones with 100 texts (averaged over seeds);
    with 10 texts the head is a constant that stops at the 9th of 10 values, exceeded by 2/11
    in expectation (the interpolating 385-parameter head: 33-67 %)."""
    d = 384
    direction = np.random.default_rng(99).normal(size=d)
    for n, low, high in ((10, 0.1, 0.28), (100, 0.06, 0.16)):
        rates = []
        for seed in range(6):
            rng = np.random.default_rng(seed)
            e = rng.normal(size=(n + 2000, d)) / np.sqrt(d)
            ll = -3.0 + 2.0 * e @ direction / np.linalg.norm(direction) * np.sqrt(d) * 0.1
            ll = ll + rng.normal(scale=0.3, size=len(ll))
            s = QMIA(epochs=300).scores(e[:n], ll[:n], e[n:], ll[n:])
            rates.append(float(np.mean(s > 0)))
        assert low <= np.mean(rates) <= high, (n, rates)


def test_qmia_agrees_with_the_leakpro_transcription_on_40_texts(tiny_model_dir, one_torch_thread):
    texts = wikimia_texts(50)
    client = client_for(str(tiny_model_dir))
    ll = np.array([float(np.mean(s.logp)) for s in client.token_stats("target", texts)])
    feats = HashEmbedder().embed(texts)
    ours = QMIA().scores(feats[:10], ll[:10], feats[10:], ll[10:])
    project = principal_components(feats[:10], 10 // 10 - 1)  # imprint's stated low-dim input
    theirs = leakpro_qmia_scores_transcription(
        project(feats[:10]), ll[:10], project(feats[10:]), ll[10:]
    )
    gap = float(np.max(np.abs(ours - theirs)))
    rho = spearmanr(ours, theirs).statistic
    print(f"qmia vs LeakPro transcription, 40 texts: max |diff| {gap:.2e}, Spearman {rho:.4f}")
    assert gap < 1e-4 and rho == pytest.approx(1.0)


def test_qmia_fits_on_held_out_non_members_in_a_run(tiny_model_dir, tmp_path):
    params = {"n_train": 4, "texts_per_parameter": 2, "epochs": 50}  # k = 1: the least
    result = run_fitted_on_held_out(tiny_model_dir, tmp_path, "qmia", params, 4)
    assert len(result.samples) == 9  # 13 - 4 held-out training non-members
    assert np.all(np.isfinite(result.scores["qmia"]))
    assert result.manifest["requests"]["embedder"]["embed"]["requests"] == 13


@pytest.mark.parametrize(
    ("params", "least"), [({"n_train": 10}, 20), ({"n_train": 5, "texts_per_parameter": 3}, 6)]
)
def test_a_training_set_that_fits_only_a_constant_head_is_refused(params, least):
    """Issue 37 item 8: at 10 training texts (10 per parameter) the head was a constant, so
    qmia equalled loss (same AUC, same interval, paired difference +0.000 [0, 0]) unsaid."""
    with pytest.raises(ConfigError) as refused:
        QMIA(**params)
    message = str(refused.value)
    assert "rank every text exactly as loss" in message and "\n" not in message
    assert f"--param qmia.n_train={least}" in message and f"--shot-holdout {least}" in message
    assert QMIA(**{**params, "n_train": least}).n_train == least  # the least it fits is taken


def test_the_run_refuses_a_constant_qmia_before_any_model_loads(tmp_path):
    from typer.testing import CliRunner

    from imprint.cli import app

    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"text": "t {i}", "label": {i % 2}}}\n' for i in range(8)))
    args = ["run", "--model", str(tmp_path / "no-model"), "--data", str(data), "--attacks",
            "loss,qmia", "--param", "qmia.n_train=10", "--out", str(tmp_path / "r")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--param qmia.n_train=20" in result.output, result.output
