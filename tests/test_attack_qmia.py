"""Quantile-regression MIA (Bertran et al. 2023): the pinball loss and the fitted quantile on
hand-computed values, agreement with a transcription of LeakPro's training loop on 40 WikiMIA
texts, and an end-to-end run fitted on the run's held-out non-members."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder, wikimia_subset
from scipy.stats import spearmanr

from imprint.attacks.qmia import QMIA, fit_quantile_head, pinball_loss
from imprint.errors import ConfigError

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"


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


def leakpro_qmia_transcription(features, targets, quantiles, *, epochs, lr, weight_decay, seed):
    """TRANSCRIPTION FOR COMPARISON ONLY (not part of imprint): LeakPro's ``AttackQMIA`` training
    (``leakpro/attacks/mia_attacks/qmia.py``: a linear ``regressor`` head, ``PinballLoss`` summed
    over quantiles and averaged over the batch, Adam, a DataLoader of batch 64 without shuffling)
    re-typed on given features; its ``target.long()`` cast is left out (a bug: it truncates the
    regression targets). Returns the fitted head."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    x = torch.tensor(features, dtype=torch.float32)
    y = torch.tensor(targets, dtype=torch.float32)
    regressor = torch.nn.Linear(x.shape[1], len(quantiles))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bound = 1.0 / np.sqrt(x.shape[1])
        regressor.weight.uniform_(-bound, bound, generator=gen)
        regressor.bias.uniform_(-bound, bound, generator=gen)
    qs = torch.tensor(quantiles, dtype=torch.float32)
    opt = torch.optim.Adam(regressor.parameters(), lr=lr, weight_decay=weight_decay)
    loader = DataLoader(TensorDataset(x, y), batch_size=64)
    for _ in range(epochs):
        for data, target in loader:
            opt.zero_grad(set_to_none=True)
            errors = target.unsqueeze(1) - regressor(data)
            loss = torch.mean(torch.sum(torch.max(qs * errors, (qs - 1) * errors), dim=1))
            loss.backward()
            opt.step()
    return regressor


def test_qmia_agrees_with_the_leakpro_transcription_on_40_texts(tiny_model_dir, one_torch_thread):
    import torch

    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    rows = [json.loads(x) for x in (WIKIMIA / "WikiMIA_length32.jsonl").open()]
    texts = [r["input"] for r in rows[:50]]
    client = in_memory_requests(HFLogprobBackend(str(tiny_model_dir), device="cpu"))
    ll = np.array([float(np.mean(s.logp)) for s in client.token_stats("target", texts)])
    feats = HashEmbedder().embed(texts)
    attack = QMIA()
    ours = attack.scores(feats[:10], ll[:10], feats[10:], ll[10:])
    centre, scale = ll[:10].mean(), ll[:10].std()
    head = leakpro_qmia_transcription(
        feats[:10],
        (ll[:10] - centre) / scale,
        [0.9],
        epochs=1000,
        lr=1e-2,
        weight_decay=1e-4,
        seed=0,
    )
    with torch.no_grad():
        q = head(torch.tensor(feats[10:])).squeeze(-1).double().numpy() * scale + centre
    theirs = ll[10:] - q
    gap = float(np.max(np.abs(ours - theirs)))
    rho = spearmanr(ours, theirs).statistic
    print(f"qmia vs LeakPro transcription, 40 texts: max |diff| {gap:.2e}, Spearman {rho:.4f}")
    assert gap < 1e-4 and rho == pytest.approx(1.0)


def test_qmia_fits_on_held_out_non_members_in_a_run(tiny_model_dir, tmp_path):
    from imprint.run import RunConfig, execute_run

    data = wikimia_subset(tmp_path, 5, 8)
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(data),
            attacks=("loss", "qmia"),
            params={"qmia": {"n_train": 3, "epochs": 50}},
            shot_holdout=3,
            n_bootstrap=10,
            progress=False,
            blind=False,
            out=tmp_path / "run",
        )
    )
    assert len(result.samples) == 10  # 13 - 3 held-out training non-members
    assert np.all(np.isfinite(result.scores["qmia"]))
    assert result.manifest["requests"]["embedder"]["embed"]["requests"] == 13
