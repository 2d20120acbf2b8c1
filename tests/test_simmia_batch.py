"""The batched next-word tree (requests/next_word_batch.py) against the per-text sampler it
replaces: same counts from the same seeded generators, on the tiny model (every mode, several
texts of different lengths in one batch, small forward budgets) and on smollm2-135m (SimMIA's
scores through the request layer, old path vs new, within 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.backends.hf import HFLogprobBackend
from imprint.requests.next_word import LocalNextWordSampler, NextWordConfig
from imprint.requests.next_word_batch import BatchedNextWordSampler

TEXTS = [
    "The council met in Seoul, to discuss the budget.",
    "A quiet river runs past the old mill at dawn",
    "東京 は 大きい",
    "Short one.",
    "x",  # one word: no positions
]
PREFIX = "Numbers like 1, 10 and 100 appear.\n\n"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def per_text(backend, cfg, texts, prefix, seed):
    sampler = LocalNextWordSampler(backend, cfg)
    return [
        sampler.distributions(t, prefix=prefix, rng=np.random.default_rng([seed, i]))
        for i, t in enumerate(texts)
    ]


def batched(backend, cfg, texts, prefix, seed, *, round_local=True):
    sampler = BatchedNextWordSampler(backend, cfg)
    sampler.round_local = round_local
    rngs = [np.random.default_rng([seed, i]) for i in range(len(texts))]
    return sampler.batch(texts, prefix=prefix, rngs=rngs), sampler


def assert_close(a, b, tol):
    assert len(a) == len(b)
    for da, db in zip(a, b, strict=True):
        assert len(da) == len(db)
        for x, y in zip(da, db, strict=True):
            assert x.keys() == y.keys()
            for w in x:
                assert x[w] == pytest.approx(y[w], abs=tol)


@pytest.mark.parametrize("prefix", [None, PREFIX])
@pytest.mark.parametrize(
    ("mode", "node_batch", "round_local"),
    [
        ("sample", 7, True),
        ("sample", 7, False),
        ("sample", 512, True),
        ("exact", 16, True),
        ("exact", 16, False),
        ("greedy_topk", 3, True),
    ],
)
def test_batched_tree_equals_per_text_sampler(tiny, prefix, mode, node_batch, round_local):
    """Same counts (sample) or probabilities within float noise (exact, greedy_topk), whether
    a round's forwards share the round-start cache or the cache grows forward by forward."""
    cfg = NextWordConfig(
        n=40, top_k=5, temperature=0.8, max_word_tokens=3, mode=mode, node_batch=node_batch
    )
    old = per_text(tiny, cfg, TEXTS, prefix, seed=3)
    new, sampler = batched(tiny, cfg, TEXTS, prefix, seed=3, round_local=round_local)
    assert_close(new, old, 0.0 if mode == "sample" else 1e-6)  # float noise
    assert new[-1] == []  # a one-word text has no position
    assert sampler.counters.nodes > 0 and sampler.counters.forwards > 0


def test_text_tokens_need_no_tree_node(tiny):
    """A sampled token that continues the text reads its law from the pass: with top_k=1 at a
    low temperature the model's greedy path is sampled, and where it follows the text no node
    is made; the counts still equal the per-text sampler's."""
    cfg = NextWordConfig(n=10, top_k=50, temperature=1.0, max_word_tokens=4)
    texts = TEXTS[:2]
    old = per_text(tiny, cfg, texts, None, seed=0)
    new, sampler = batched(tiny, cfg, texts, None, seed=0)
    assert_close(new, old, 0.0)
    reference = LocalNextWordSampler(tiny, cfg)
    for i, t in enumerate(texts):
        reference.distributions(t, prefix=None, rng=np.random.default_rng([0, i]))
    # every on-text continuation is a node the per-text tree forwards and the batch does not
    assert sampler.counters.nodes + sampler.counters.on_text >= sampler.counters.on_text > 0
    assert sampler.counters.nodes < reference.forwarded_tokens


def test_smollm2_scores_equal_the_per_text_path():
    """On smollm2-135m with MiniLM (2 held-out WikiMIA-style texts, N = 100, 2 shots), the
    attack's scores (one embed request for the run) equal those of the per-text path it
    replaced (one sampler per text and context, one embed request per text
    and context, the same seeded generators) within 1e-6: only float noise may differ."""
    from imprint.attacks.simmia import SimMIA, relative_score, word_scores
    from imprint.data.words import split_words
    from imprint.requests.client import in_memory_requests
    from imprint.requests.embed import MiniLMEmbedder
    from imprint.requests.kinds import NextWordRequest

    backend = HFLogprobBackend("smollm2-135m", device="cpu", dtype="float32")
    texts = [
        "The 2014 Winter Olympics were held in Sochi, Russia, in February.",
        "Her second album was recorded in a barn outside Nashville.",
    ]
    prefix = "A storm closed the harbour for two days.\n\nThe committee met again in May.\n\n"
    attack = SimMIA(n_samples=100, n_shots=2)
    new = attack.score_with_requests(
        in_memory_requests(backend, embedder=MiniLMEmbedder()), texts, prefix=prefix
    )
    cfg = attack.sampling_config()
    old_requests = in_memory_requests(backend, embedder=MiniLMEmbedder())
    for t, text in enumerate(texts):
        words = [w.text for w in split_words(text)]
        per_context = []
        for ctx in (None, prefix):
            rng = NextWordRequest(text, ctx, 100, 50, 1.0, 8, "sample", 0).rng()
            dists = LocalNextWordSampler(backend, cfg).distributions(text, prefix=ctx, rng=rng)
            per_context.append(word_scores(words, dists, old_requests, n=100, exact_numbers=False))
        plain, prefixed = per_context
        assert new["simmia"][t] == pytest.approx(relative_score(prefixed[0], plain[0]), abs=1e-6)
        assert new["simmia_star"][t] == pytest.approx(
            relative_score(prefixed[1], plain[1]), abs=1e-6
        )


def test_next_word_requests_split_into_trees_give_the_same_answers(tiny, monkeypatch):
    """The batched tree answers a batch of next-word requests (kept for the benchmark; the run
    answers through the per-text sampler); texts beyond TREE_WORDS word positions go to further
    trees, and each answer is still the per-text sampler's under the request's own seed (plain
    and prefixed requests in one batch)."""
    from imprint.requests import next_word_batch
    from imprint.requests.kinds import NextWordRequest

    texts = TEXTS[:3]
    batch = [
        NextWordRequest(t, p, 20, 5, 1.0, 3, "sample", 7) for p in (None, PREFIX) for t in texts
    ]
    whole = next_word_batch.next_words_batch(tiny, batch)
    monkeypatch.setattr(next_word_batch, "TREE_WORDS", 4)
    split = next_word_batch.next_words_batch(tiny, batch)
    assert NextWordRequest.execute(tiny, batch) == whole
    cfg = NextWordConfig(n=20, top_k=5, temperature=1.0, max_word_tokens=3)
    expected = [
        LocalNextWordSampler(tiny, cfg).distributions(r.text, prefix=r.prefix, rng=r.rng())
        for r in batch
    ]
    assert whole == expected
    assert split == expected
