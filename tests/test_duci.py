"""DUCI: the debiasing and the threshold on hand-computed values, the document bootstrap's
coverage by simulation, and a seeded miniature game of tiny models trained on 0/25/50/100 % of
a document set."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.documents.duci import debias, duci, per_document, youden_threshold
from imprint.errors import DataError


def test_youden_threshold_by_hand():
    # scores 0.9 (member), 0.8 (non), 0.7 (member), 0.1 (non)
    # tau = 0.9: TPR 1/2, FPR 0 -> 0.5; tau = 0.8: 1/2, 1/2 -> 0; tau = 0.7: 1, 1/2 -> 0.5;
    # tau = 0.1: 1, 1 -> 0. Ties in TPR - FPR: the highest tau (0.9), as sklearn's order
    thr, tpr, fpr = youden_threshold(np.array([0.9, 0.8, 0.7, 0.1]), np.array([1, 0, 1, 0]))
    assert (thr[0], tpr[0], fpr[0]) == (0.9, 0.5, 0.0)
    # tied scores count together: 0.5 twice (one member, one not)
    thr, tpr, fpr = youden_threshold(np.array([0.5, 0.5, 0.2]), np.array([1, 0, 0]))
    assert (thr[0], tpr[0], fpr[0]) == (0.5, 1.0, 0.5)
    # weights: the first document counted twice, the second not at all
    thr, tpr, fpr = youden_threshold(
        np.array([0.9, 0.8, 0.7, 0.1]), np.array([1, 0, 1, 0]), np.array([[2.0, 0, 1, 1]])
    )
    assert (thr[0], tpr[0], fpr[0]) == (0.7, 1.0, 0.0)


def test_debiased_estimate_by_hand():
    # references: members 0.9, 0.8, 0.6, 0.2, non-members 0.85, 0.3, 0.1, 0.0
    # TPR - FPR: tau 0.9: 0.25, 0.85: 0, 0.8: 0.25, 0.6: 0.75 - 0.25 = 0.5, 0.3: 0.25,
    # 0.2: 1 - 0.5 = 0.5 (tie: the higher tau, 0.6, wins) -> TPR 3/4, FPR 1/4
    refs = np.array([[0.9, 0.8, 0.6, 0.2], [0.85, 0.3, 0.1, 0.0]])  # 2 models, 4 documents
    member = np.array([[1, 1, 1, 1], [0, 0, 0, 0]])
    # target: 2 of 4 documents >= tau -> p_i = (1 - 1/4) / (1/2) = 1.5 or (0 - 1/4) / (1/2)
    p_i, thr, tpr, fpr = debias(np.array([0.95, 0.6, 0.1, 0.4]), refs, member)
    assert (thr, tpr, fpr) == (0.6, 0.75, 0.25)
    assert p_i == pytest.approx([1.5, 1.5, -0.5, -0.5])  # 0.6 >= tau counts, as in TPR
    r = duci(np.array([0.95, 0.6, 0.1, 0.4]), refs, member, n_bootstrap=50)
    assert r.estimate == pytest.approx(0.5) and r.naive == pytest.approx(0.5)


def test_per_document_means():
    ids, values = per_document(np.array([[1.0, 3.0, 5.0], [0.0, 2.0, 4.0]]), ["a", "b", "a"])
    assert ids == ["a", "b"]
    assert np.allclose(values, [[3.0, 3.0], [2.0, 2.0]])


def test_a_useless_mia_is_refused():
    with pytest.raises(DataError, match="does not separate"):
        debias(np.zeros(4), np.zeros((2, 4)), np.array([[1, 1, 0, 0], [0, 0, 1, 1]]))


def _simulate(rng, n, k, p_pop, shift=1.5):
    """Per-document MIA scores: a document's difficulty shared by all models, a shift when the
    model trained on it, noise. The target trains on each document with probability p_pop."""
    base = rng.normal(size=n)
    member = np.zeros((k, n), dtype=int)
    for j in range(0, k, 2):  # paired halves, as a game builds
        half = rng.permutation(n)[: n // 2]
        member[j, half] = 1
        member[j + 1] = 1 - member[j]
    target_in = rng.random(n) < p_pop
    noise = lambda: rng.normal(size=n)  # noqa: E731
    target = base + shift * target_in + noise()
    refs = np.stack([base + shift * member[j] + noise() for j in range(k)])
    return target, refs, member, target_in.mean()


@pytest.mark.parametrize("p_pop", [0.0, 0.5, 1.0])
def test_bootstrap_over_documents_covers_by_simulation(p_pop):
    rng = np.random.default_rng(7)
    hits_set, hits_pop, estimates = 0, 0, []
    sims = 120
    for i in range(sims):
        target, refs, member, p_set = _simulate(rng, 80, 4, p_pop)
        r = duci(target, refs, member, n_bootstrap=200, seed=i)
        lo, hi = r.interval
        hits_set += lo <= p_set <= hi
        hits_pop += lo <= p_pop <= hi
        estimates.append(r.estimate - p_set)
    # measured (150 simulations, 300 resamples): bias +0.030, +0.006, -0.013, -0.054 at
    # p = 0, 0.25, 0.5, 1 (the Youden threshold's TPR - FPR is optimistic on the references it
    # was chosen on, which pulls estimates toward the middle), sd ~0.10; coverage of the set's
    # fraction 0.97, 0.99, 0.98, 0.96 and of the population rate 0.97, 0.98, 0.99, 0.96: the
    # interval is conservative, never short
    assert abs(np.mean(estimates)) < 0.08
    assert hits_pop / sims >= 0.92
    assert hits_set / sims >= 0.92


def test_miniature_game_estimates_the_fraction(tiny_model_dir, one_torch_thread):
    """Seeded, tiny: 24 documents, 4 reference models on paired halves, targets on 0, 50 and
    100 % of the documents (benchmarks/bench_duci.py runs the full version)."""
    from imprint.game.duci_game import fraction_game

    rows = fraction_game(
        str(tiny_model_dir), n_documents=24, fractions=(0.0, 0.5, 1.0), k=4, epochs=12,
        lr=3e-3, seed=0, n_bootstrap=200,
    )  # fmt: skip
    assert [r["truth"] for r in rows] == [0.0, 0.5, 1.0]
    # measured: -0.23 [-0.53, -0.07], 0.53 [0.27, 0.81], 1.07 [0.70, 1.25] (a weak MIA on a
    # random 2-layer model: the estimate is noisy, but ordered and near the truth)
    for r in rows:
        lo, hi = r["interval"]
        assert lo <= r["estimate"] <= hi
        assert abs(r["estimate"] - r["truth"]) < 0.4, r
        assert 0 < r["fpr"] < r["tpr"] <= 1
    est = [r["estimate"] for r in rows]
    assert est[0] < est[1] < est[2]
    assert rows[1]["interval"][0] <= 0.5 <= rows[1]["interval"][1]
