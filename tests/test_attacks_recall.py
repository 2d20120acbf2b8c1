"""ReCaLL and CON-ReCall: prefix masking on the tiny model, shot selection and removal, refusals."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from imprint.attacks.base import RunContext
from imprint.attacks.con_recall import MEMBER_PREFIX, NONMEMBER_PREFIX, ConRecall
from imprint.attacks.recall import PREFIX, Recall
from imprint.backends.base import ScoreRequest
from imprint.backends.hf import HFLogprobBackend
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.signals.cache import SignalCache
from imprint.signals.plan import run_plan

NONMEMBERS = [Sample(f"n{i}", f"Non-member text number {i} about a storm.", 0) for i in range(6)]
MEMBERS = [Sample(f"m{i}", f"Member text number {i} about the council.", 1) for i in range(4)]
SAMPLES = NONMEMBERS + MEMBERS


#: tiny models run faster on one thread than on oversubscribed cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def backend(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def full_forward_logp(backend: HFLogprobBackend, prefix: str, text: str) -> np.ndarray:
    """log p of the text's tokens from one forward pass over BOS + prefix + text."""
    text_ids = backend.encode(text)
    ids = [backend.bos_id, *backend.encode(prefix), *text_ids]
    with torch.no_grad():
        logits = backend.model(torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    n = len(text_ids)
    return logp[-n - 1 : -1].gather(1, torch.tensor(ids[-n:])[:, None])[:, 0].numpy()


def test_prefixed_scores_equal_the_text_tokens_of_a_full_forward(backend):
    prefix = Recall(n_shots=3).prepare(SAMPLES, RunContext(seed=0)).prefixes[PREFIX]
    texts = ["The quick brown fox.", "In 2023 the council met in Seoul to discuss it."]
    got = backend.score([ScoreRequest(t, prefix) for t in texts])
    for text, s in zip(texts, got, strict=True):
        assert len(s) == len(backend.encode(text))  # prefix tokens are not scored
        np.testing.assert_allclose(s.logp, full_forward_logp(backend, prefix, text), atol=1e-4)


def test_recall_end_to_end_matches_manual_ratio(backend):
    attack = Recall(n_shots=3)
    prep = attack.prepare(SAMPLES, RunContext(seed=0))
    kept = [s for s in SAMPLES if s.id not in prep.removed_ids]
    texts = [s.text for s in kept]
    signals, _ = run_plan(
        texts, attack.needs(), {"target": backend}, SignalCache(None), prefixes=prep.prefixes
    )
    scores = attack.score(signals)["recall"]
    prefix = prep.prefixes[PREFIX]
    for text, score in zip(texts, scores, strict=True):
        ll_p = full_forward_logp(backend, prefix, text).mean()
        ll = full_forward_logp(backend, "", text).mean()
        assert score == pytest.approx(ll_p / ll, rel=1e-4)


def test_recall_removes_its_evaluation_shots_deterministically():
    prep = Recall(n_shots=3).prepare(SAMPLES, RunContext(seed=7))
    assert len(prep.removed_ids) == 3
    assert prep.removed_ids <= {s.id for s in NONMEMBERS}
    shuffled = random.Random(1).sample(SAMPLES, len(SAMPLES))
    again = Recall(n_shots=3).prepare(shuffled, RunContext(seed=7))
    assert again.removed_ids == prep.removed_ids and again.prefixes == prep.prefixes
    texts = {s.id: s.text for s in SAMPLES}
    prefix = prep.prefixes[PREFIX]
    assert all(texts[i] in prefix for i in prep.removed_ids)
    assert prefix.count("\n\n") == 3  # every shot ends with the separator
    assert "recall" in prep.reason and "evaluation non-members" in prep.reason
    # a smaller draw is a prefix of a larger one: removals nest
    smaller = Recall(n_shots=2).prepare(SAMPLES, RunContext(seed=7))
    assert smaller.removed_ids < prep.removed_ids


def test_recall_refuses_to_use_every_evaluation_nonmember():
    with pytest.raises(ConfigError, match="non-member"):
        Recall(n_shots=6).prepare(SAMPLES, RunContext())


def test_recall_pool_shots_remove_only_evaluation_copies():
    pool = tuple(Sample(f"p{i}", f"Pool text {i}.", 0) for i in range(4))
    copy = Sample("dup", " Pool text 2. ", 0)  # same text up to whitespace
    run = RunContext(pools={"nonmembers": pool})
    prep = Recall(n_shots=4).prepare([*SAMPLES, copy], run)
    assert prep.removed_ids == {"dup"}
    assert all(s.text in prep.prefixes[PREFIX] for s in pool)
    with pytest.raises(ConfigError, match="pool"):
        Recall(n_shots=5).prepare(SAMPLES, run)


def test_con_recall_refuses_member_shots_that_are_evaluated():
    leaked = (Sample("k0", "A known member text.", 1), Sample("k1", MEMBERS[0].text + " ", 1))
    with pytest.raises(ConfigError, match="evaluation"):
        ConRecall(n_shots=1).prepare(SAMPLES, RunContext(pools={"members": leaked}))


def test_con_recall_needs_a_declared_member_pool():
    with pytest.raises(ConfigError, match="members"):
        ConRecall(n_shots=2).prepare(SAMPLES, RunContext())


def test_con_recall_shares_recall_nonmember_shots():
    known = tuple(Sample(f"k{i}", f"A known member text {i}.", 1) for i in range(3))
    run = RunContext(seed=3, pools={"members": known})
    prep = ConRecall(n_shots=2).prepare(SAMPLES, run)
    recall = Recall(n_shots=2).prepare(SAMPLES, run)
    assert prep.removed_ids == recall.removed_ids
    assert prep.prefixes[NONMEMBER_PREFIX] == recall.prefixes[PREFIX]
    member_prefix = prep.prefixes[MEMBER_PREFIX]
    assert sum(s.text in member_prefix for s in known) == 2
