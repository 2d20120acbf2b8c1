"""Local black-box paths on the tiny model: the fast next-word sampler against brute force (one
full forward per prefix), seeded text sampling, PETAL, and a run of SaMIA/SimMIA/PETAL."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import HashEmbedder, wikimia_subset

from imprint.attacks.petal import PETAL, fit_line, log_similarity
from imprint.attacks.simmia import SimMIA
from imprint.backends.base import Backend, SamplingSettings, ScoreRequest
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.text import HFTextBackend, VLLMTextBackend, as_text_backend
from imprint.cli.flags import config_from_flags
from imprint.data.words import first_word, split_words
from imprint.errors import MissingDependencyError
from imprint.requests.next_word import LocalNextWordSampler, NextWordConfig
from imprint.run import execute_run

TEXT = "The council met in Seoul, to discuss the budget."
PREFIX = "Numbers like 1, 10 and 100 appear.\n\n"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


@torch.no_grad()
def brute_force(backend, prompt_ids, cfg, *, greedy):
    """The law of naive generation, exactly: every continuation of ``max_word_tokens`` tokens
    (or up to EOS) by full forwards (no cache, no tree, no early stop), decoded whole, then its
    first word. ``greedy``: after the first token, only the most likely one (greedy_topk)."""
    eos = backend.tokenizer.eos_token_id
    dist: dict[str, float] = {}

    def top(ids):
        logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        values, idx = torch.topk(logits / cfg.temperature, cfg.top_k)
        return idx.tolist(), torch.softmax(values.double(), -1).tolist()

    def walk(gen, mass, depth):
        ids, probs = top(prompt_ids + gen)
        pairs = list(zip(ids, probs, strict=True))
        if greedy and depth > 0:
            pairs = [(ids[int(np.argmax(probs))], 1.0)]
        for token, p in pairs:
            new = gen if token == eos else [*gen, token]
            if token == eos or len(new) >= cfg.max_word_tokens:
                word = first_word(decode(new), ended=True)[0]
                dist[word] = dist.get(word, 0.0) + mass * p
            else:
                walk(new, mass * p, depth + 1)

    def decode(ids):
        return backend.tokenizer.decode(ids, skip_special_tokens=True)

    walk([], 1.0, 0)
    return dist


def prompt_ids(backend, text, word, prefix):
    """The prompt P + x_<i as HFTextBackend (the remote path) sends it: one string, one
    tokenisation, so a BPE merge may cross the boundary between P and x."""
    return [
        backend.bos_id,
        *backend.encode((prefix or "") + text[: split_words(text)[word - 1].end]),
    ]


def assert_same_dists(tiny, text, prefix, cfg, dists, *, greedy):
    assert len(dists) == len(split_words(text)) - 1
    for i, dist in enumerate(dists, start=1):
        exact = brute_force(tiny, prompt_ids(tiny, text, i, prefix), cfg, greedy=greedy)
        assert dist.keys() == exact.keys()
        for word, mass in exact.items():
            assert dist[word] == pytest.approx(mass, abs=1e-5)


@pytest.mark.parametrize("prefix", [None, PREFIX])
def test_greedy_topk_mode_equals_brute_force(tiny, prefix):
    cfg = NextWordConfig(
        top_k=3, temperature=0.7, max_word_tokens=3, mode="greedy_topk", node_batch=5
    )
    sampler = LocalNextWordSampler(tiny, cfg)
    dists = sampler.distributions(TEXT, prefix=prefix, rng=np.random.default_rng(0))
    assert_same_dists(tiny, TEXT, prefix, cfg, dists, greedy=True)


# P ends in a space, so jointly "P x" tokenises " the" as one token where P alone ends in " "
JOINT_PREFIX = "Numbers like 1, 10 and 100 appear in many documents; so do "
MIXED = "the council met in Kraków, 会议在首尔举行。"


@pytest.mark.parametrize(("text", "prefix"), [(TEXT, None), (TEXT, PREFIX), (MIXED, JOINT_PREFIX)])
def test_exact_mode_is_the_exact_next_word_distribution(tiny, text, prefix):
    """min_mass=0 enumerates every branch: the law of naive generation on the remote path's
    prompts (P and x_<i tokenised together); the early word cut never stops inside a character
    whose bytes span several tokens."""
    cfg = NextWordConfig(top_k=4, temperature=0.8, max_word_tokens=4, mode="exact", min_mass=0)
    sampler = LocalNextWordSampler(tiny, cfg)
    dists = sampler.distributions(text, prefix=prefix, rng=np.random.default_rng(0))
    assert_same_dists(tiny, text, prefix, cfg, dists, greedy=False)
    assert all(sum(d.values()) == pytest.approx(1.0) for d in dists)
    assert sampler.unresolved_mass == 0.0


def test_the_joint_tokenisation_case_is_exercised(tiny):
    """The case above is real: P alone and P + x_<i tokenise differently at the boundary, and
    the random model proposes byte tokens that are only part of a character."""
    alone = tiny.encode(JOINT_PREFIX) + tiny.encode("the")
    joint = tiny.encode(JOINT_PREFIX + "the")
    assert alone != joint
    halves = [t for t in range(len(tiny.tokenizer)) if tiny.tokenizer.decode([t]) == "\ufffd"]
    assert len(halves) > 50


def test_exact_mode_drops_only_unlikely_branches(tiny):
    full = NextWordConfig(top_k=6, max_word_tokens=4, mode="exact", min_mass=0)
    cut = NextWordConfig(top_k=6, max_word_tokens=4, mode="exact", min_mass=0.02)
    a, b = (LocalNextWordSampler(tiny, c) for c in (full, cut))
    exact = a.distributions(MIXED, prefix=PREFIX, rng=np.random.default_rng(0))
    pruned = b.distributions(MIXED, prefix=PREFIX, rng=np.random.default_rng(0))
    assert b.unresolved_mass > 0 and b.forwarded_tokens < a.forwarded_tokens
    total_missing = sum(1.0 - sum(d.values()) for d in pruned)
    assert total_missing == pytest.approx(b.unresolved_mass)
    for d_exact, d_pruned in zip(exact, pruned, strict=True):
        for word, mass in d_pruned.items():  # what is kept is exact, never more
            assert mass <= d_exact[word] + 1e-9


def test_sampled_word_frequencies_follow_the_exact_distribution(tiny):
    cfg = NextWordConfig(n=20_000, top_k=3, temperature=1.0, max_word_tokens=3)
    sampler = LocalNextWordSampler(tiny, cfg)
    dists = sampler.distributions(TEXT, prefix=PREFIX, rng=np.random.default_rng(1))
    for i in (1, 4, 6):
        exact = brute_force(tiny, prompt_ids(tiny, TEXT, i, PREFIX), cfg, greedy=False)
        assert sum(dists[i - 1].values()) == cfg.n
        for word, p in exact.items():  # 5 standard errors
            assert dists[i - 1].get(word, 0) / cfg.n == pytest.approx(p, abs=5 * (p / cfg.n) ** 0.5)
    # far fewer tokens through the model than generate-per-prefix would need
    assert sampler.forwarded_tokens < 0.05 * cfg.n * (len(dists) * 3)


def test_sampling_is_seeded(tiny):
    cfg = NextWordConfig(n=30, top_k=5, max_word_tokens=3)
    run = [
        LocalNextWordSampler(tiny, cfg).distributions(
            TEXT, prefix=None, rng=np.random.default_rng(7)
        )
        for _ in range(2)
    ]
    assert run[0] == run[1]
    text = HFTextBackend(tiny)
    a = text.sample(["The quick", "In 2023 the council"], SamplingSettings(3, 5, seed=11))
    b = text.sample(["The quick", "In 2023 the council"], SamplingSettings(3, 5, seed=11))
    assert a == b and [len(x) for x in a] == [3, 3]
    assert text.usage()["samples"] == 12


def test_greedy_generation_ignores_batch_padding(tiny):
    text = HFTextBackend(tiny)
    together = text.sample(["The quick brown fox", "In"], SamplingSettings(1, 4, temperature=0))
    alone = [
        text.sample([p], SamplingSettings(1, 4, temperature=0))[0]
        for p in ["The quick brown fox", "In"]
    ]
    assert together == alone
    cut = text.sample(
        ["The quick brown fox"], SamplingSettings(1, 4, temperature=0, stop=[together[0][0][1:3]])
    )
    assert len(cut[0][0]) < len(together[0][0]) or not together[0][0][1:3]


@pytest.mark.parametrize("mode", ["exact", "greedy_topk"])
def test_simmia_local_noiseless_modes_run_and_are_deterministic(tiny, mode):
    attack = SimMIA(n_shots=1, top_k=4, max_word_tokens=3, mode=mode)
    args = (tiny, [TEXT, "In 2023 the council met.", MIXED])
    first = attack.score_with_backend(*args, prefix=PREFIX, embedder=HashEmbedder())
    second = attack.score_with_backend(*args, prefix=PREFIX, embedder=HashEmbedder())
    assert np.isfinite(first["simmia"]).all() and np.array_equal(first["simmia"], second["simmia"])


def test_a_wrapped_local_model_takes_the_fast_path(tiny):
    attack = SimMIA(n_samples=6, n_shots=1, top_k=4, max_word_tokens=3)
    kwargs = {"prefix": PREFIX, "embedder": HashEmbedder()}
    direct = attack.score_with_backend(tiny, [TEXT], **kwargs)
    wrapped_backend = HFTextBackend(tiny)
    wrapped = attack.score_with_backend(wrapped_backend, [TEXT], **kwargs)
    assert direct["simmia"] == pytest.approx(wrapped["simmia"])
    assert wrapped_backend.usage()["generate_calls"] == 0


def test_vllm_backend_names_its_extra_when_missing():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"llm-imprint\[vllm\]"):
            VLLMTextBackend("some/model")
    else:
        pytest.skip("vllm is installed")


def test_petal_local_matches_a_manual_computation(tiny, tiny_ref_dir):
    surrogate = HFLogprobBackend(str(tiny_ref_dir), device="cpu")
    emb = HashEmbedder()
    score = PETAL(surrogate=str(tiny_ref_dir)).score_with_backend(
        tiny, [TEXT], surrogate=surrogate, embedder=emb
    )["petal"][0]
    sur = surrogate.score([ScoreRequest(TEXT)])[0]
    dec = surrogate.tokenizer.decode
    sim_s = log_similarity(
        emb, [dec([t]) for t in sur.token_ids[1:]], [dec([g]) for g in sur.argmax[1:]]
    )
    slope, intercept = fit_line(sim_s, sur.logp[1:])
    tgt = tiny.score([ScoreRequest(TEXT)])[0]
    dec = tiny.tokenizer.decode
    sim_t = log_similarity(
        emb, [dec([t]) for t in tgt.token_ids[1:]], [dec([g]) for g in tgt.argmax[1:]]
    )
    assert score == pytest.approx(np.mean(slope * sim_t + intercept))


def test_petal_text_only_target_asks_for_greedy_tokens(tiny, tiny_ref_dir):
    class TextOnly(Backend):  # hides the model: only generated text comes out
        def __init__(self, inner):
            self.inner, self.capabilities, self.name = inner, inner.capabilities, "t"

        @property
        def fingerprint(self):
            return self.inner.fingerprint

        def sample(self, *args, **kwargs):
            return self.inner.sample(*args, **kwargs)

        def usage(self):
            return self.inner.usage()

    target = TextOnly(HFTextBackend(tiny))
    surrogate = HFLogprobBackend(str(tiny_ref_dir), device="cpu")
    out = PETAL(surrogate="x").score_with_backend(
        target, [TEXT], surrogate=surrogate, embedder=HashEmbedder()
    )
    assert np.isfinite(out["petal"]).all()
    assert target.usage()["prompts"] == len(surrogate.encode(TEXT)) - 1
    assert as_text_backend(target) is target


def test_run_with_blackbox_attacks_on_a_wikimia_subset(
    tiny_model_dir, tiny_ref_dir, tmp_path, monkeypatch
):
    data = wikimia_subset(tmp_path, 6, 8)
    monkeypatch.setattr("imprint.requests.embed.default_embedder", HashEmbedder)
    result = execute_run(
        config_from_flags(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / "run",
            attacks=("samia", "simmia", "petal"),
            params={
                "samia": {"n_samples": 2, "max_tokens": 6},
                "simmia": {"n_samples": 4, "n_shots": 2, "max_word_tokens": 2},
                "petal": {"surrogate": str(tiny_ref_dir)},
            },
            shot_holdout=2,  # 8 non-members: the default 10 held-out shots need 20 (issue 24)
            device="cpu",
            cache=tmp_path / "signals.sqlite",
            progress=False,
            n_bootstrap=50,
            blind=False,
        )
    )
    assert len(result.samples) == 12  # two non-member shots left the evaluation
    for column in ("samia", "samia_zlib", "simmia", "simmia_star", "petal"):
        assert np.isfinite(result.scores[column]).all(), column
    assert result.manifest["data"]["dropped"]
