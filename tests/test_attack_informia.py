"""Token-level InfoRMIA: the formula on hand-computed values, the vocabulary reduction against a
brute-force sum, its log p against the log-prob pass, and a real run on the tiny models."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from conftest import quiet_run

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.informia import InfoRMIA, informia_tokens, sequence_score
from imprint.errors import ConfigError
from imprint.requests.pair_tokens import pair_token_stats


def test_token_formula_by_hand():
    # token 1: log p = log 0.5, log q = log 0.25, KL = 0.1 nats
    #   (ln 0.5 - ln 0.25 + 0.1) / ln 2 = (0.693147 + 0.1) / 0.693147 = 1.144270 bits
    # token 2: target and reference agree (log p = log q, KL = 0): 0 bits
    s = informia_tokens([math.log(0.5), -1.0], [math.log(0.25), -1.0], [0.1, 0.0])
    assert s == pytest.approx([1 + 0.1 / math.log(2), 0.0], abs=1e-12)
    assert sequence_score(s) == pytest.approx((1 + 0.1 / math.log(2)) / 2)
    assert sequence_score(s, "max") == pytest.approx(1 + 0.1 / math.log(2))
    assert math.isnan(sequence_score(np.array([])))


def test_vocabulary_reduction_by_hand_and_brute_force():
    import torch

    # one position, vocabulary of 2: p = (0.8, 0.2), references q1 = (0.5, 0.5), q2 = (0.1, 0.9)
    # mixture q = (0.3, 0.7); token 0: log p = ln 0.8, log q = ln 0.3
    # KL(q || p) = 0.3 ln(0.3/0.8) + 0.7 ln(0.7/0.2) = -0.294249 + 0.876934 = 0.582685
    logits_p = torch.log(torch.tensor([[0.8, 0.2]]))
    q = [torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.1, 0.9]]))]
    out = pair_token_stats(logits_p, q, torch.tensor([0]))
    assert out["target_logp"][0] == pytest.approx(math.log(0.8))
    assert out["mix_logp"][0] == pytest.approx(math.log(0.3))
    assert out["kl"][0] == pytest.approx(0.582685, abs=1e-6)
    # random logits, temperature 2, against a plain numpy sum over the vocabulary
    rng = np.random.default_rng(0)
    lp, lq = rng.normal(size=(5, 7)), rng.normal(size=(3, 5, 7))
    ids = rng.integers(0, 7, size=5)
    got = pair_token_stats(
        torch.tensor(lp), [torch.tensor(x) for x in lq], torch.tensor(ids), temperature=2.0
    )

    def softmax(x):
        e = np.exp(x / 2.0 - (x / 2.0).max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    p, qm = softmax(lp), softmax(lq).mean(0)
    kl = (qm * np.log(qm / p)).sum(-1)
    assert got["kl"] == pytest.approx(kl, abs=1e-10)
    assert got["target_logp"] == pytest.approx(np.log(p[np.arange(5), ids]), abs=1e-10)
    assert got["mix_logp"] == pytest.approx(np.log(qm[np.arange(5), ids]), abs=1e-10)


def test_parameters_are_checked():
    with pytest.raises(ConfigError, match="--references"):
        InfoRMIA()
    with pytest.raises(ConfigError, match="temperature"):
        InfoRMIA(models=("r",), temperature=0)
    with pytest.raises(ConfigError, match="aggregate"):
        InfoRMIA(models=("r",), aggregate="median")
    assert InfoRMIA.unavailable_reason(RunContext()) is not None
    (attack,) = build_attacks(["informia"], RunContext(refs=("base",)))
    assert attack.models == ("base",)


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "In 2023 the council met in Seoul to discuss the budget.",
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii.",
    "Membership inference asks whether a text was in the training data.",
    "北京是中华人民共和国的首都。",
    "Zürich",
]


def test_end_to_end_with_a_reference_and_per_token_scores(tiny_model_dir, tiny_ref_dir, tmp_path):
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    data = tmp_path / "d.jsonl"
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = quiet_run(
            tiny_model_dir,
            data,
            tmp_path / "run",
            refs=(("base", str(tiny_ref_dir)),),
            attacks=("informia", "loss"),
            n_bootstrap=20,
        )
    scores = result.scores["informia"]
    assert scores.shape == (len(TEXTS),) and np.isfinite(scores).all()
    assert result.manifest["requests"]["target+references"]["pair_tokens"]["executed"] == len(TEXTS)
    # the per-token scores: a row per (sample, token), their mean the sample's score
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "run" / "token_scores.parquet").to_pandas()
    assert set(table["column"]) == {"informia"}
    means = table.groupby("id", sort=False)["score"].mean()
    ids = [s.id for s in result.samples]
    assert means.loc[ids].to_numpy() == pytest.approx(scores, abs=1e-9)
    assert (table["position"] >= 0).all()
    # the tokens join into each text (a multi-byte character at the token that completes it)
    joined = table.sort_values(["id", "position"]).groupby("id")["token"].apply("".join)
    assert {s.id: s.text for s in result.samples} == joined.to_dict()
    # the same model as its own reference: every token scores 0 bits
    target = HFLogprobBackend(str(tiny_model_dir))
    requests = in_memory_requests(target, roles={"self": target})
    same = InfoRMIA(models=("self",)).token_scores(requests, TEXTS[:2])
    assert all(np.abs(t["scores"]).max() < 1e-9 for t in same)
    # the group's log p of each token is the log-prob pass's, token for token
    ref = HFLogprobBackend(str(tiny_ref_dir))
    requests = in_memory_requests(target, roles={"base": ref})
    attack = InfoRMIA(models=("base",))
    results = attack.token_results(requests, TEXTS)
    from imprint.backends.base import ScoreRequest

    passes = target.score([ScoreRequest(t) for t in TEXTS])
    for r, stats in zip(results, passes, strict=True):
        assert r["ids"] == stats.token_ids.tolist()
        assert np.allclose(r["target_logp"], stats.logp, atol=2e-4)
        assert "".join(r["pieces"]).strip() != ""
    tokens = attack.token_scores(requests, TEXTS)
    assert scores == pytest.approx([t["scores"].mean() for t in tokens], abs=1e-9)
