"""SimMIA's token and log-prob progressive disclosure: formulas on hand-computed values, the
next-token laws against one full forward per prefix, refusals, and runs answered from the cache."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import HashEmbedder, wikimia_subset

from imprint.attacks.simmia import SimMIA, relative_score
from imprint.attacks.simmia_disclosure import prob_ratio_scores, token_scores
from imprint.backends.base import SAMPLING, Backend, ScoreRequest, TokenStats
from imprint.backends.hf import HFLogprobBackend
from imprint.cli.flags import config_from_flags
from imprint.cli.run import parse_params
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import in_memory_requests
from imprint.run import execute_run

PREFIX = "Numbers like 1, 10 and 100 appear.\n\n"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def _stats(p) -> TokenStats:
    return _logp_stats(np.log(np.asarray(p, np.float64)))


def _logp_stats(logp) -> TokenStats:
    n = len(logp)
    zeros = np.zeros(n, np.float32)
    return TokenStats(
        np.arange(n, dtype=np.int32),
        np.asarray(logp, np.float32),
        zeros,
        zeros,
        np.ones(n, np.int32),
        np.zeros(n, np.int32),
    )


# -- formulas ---------------------------------------------------------------------------------
def test_prob_ratio_formula_on_hand_computed_values_from_the_second_token():
    # with a start token both passes score x_1; Eq. 4 starts at x_2: ratios 1, 2 (x_1's 0.5 out)
    simmia, star = prob_ratio_scores(_stats([0.5, 0.1, 0.2]), _stats([0.25, 0.1, 0.4]))
    assert simmia == pytest.approx(-(1 + 2) / 2, rel=1e-6)
    assert star == pytest.approx(-(0 + math.log(2)) / 2, abs=1e-6)


def test_prob_ratio_alignment_and_underflow():
    # no start token: the plain pass cannot score x_1; the prefixed one can (aligned on the tail)
    simmia, star = prob_ratio_scores(_stats([0.5, 0.2]), _stats([0.9, 0.25, 0.4]))
    assert simmia == pytest.approx(-(0.5 + 2) / 2, rel=1e-6)
    assert star == pytest.approx(-(math.log(0.5) + math.log(2)) / 2, abs=1e-6)
    # log p far below float underflow: the ratio is exp of a difference, never 0 / 0
    simmia, star = prob_ratio_scores(
        _logp_stats([-900.0]), _logp_stats([-1.0, -900.0 + math.log(0.5)])
    )
    assert simmia == pytest.approx(-0.5, rel=1e-4) and star == pytest.approx(
        -math.log(0.5), rel=1e-4
    )
    assert all(math.isnan(v) for v in prob_ratio_scores(_stats([]), _stats([])))
    assert all(math.isnan(v) for v in prob_ratio_scores(_stats([0.5]), _stats([0.5])))


def test_prob_ratio_direction_higher_is_member():
    # the non-member prefix pulls a member's memorised tokens down (ratio < 1), not a non-member's
    plain = _stats([0.9, 0.8, 0.9])
    member = prob_ratio_scores(plain, _stats([0.45, 0.4, 0.45]))
    nonmember = prob_ratio_scores(plain, _stats([0.9, 0.8, 0.9]))
    assert member[0] > nonmember[0] and member[1] > nonmember[1]


def _law(mode: str):
    # ids 5 " cat" (sampled 3x), 9 " dog" (1x); position 2: the true token 7 and the sampled
    # token 8 are two different byte pieces of one Chinese character (both decode to U+FFFD)
    dists = (
        [{"5": 3.0, "9": 1.0}, {"8": 4.0}]
        if mode == "sample"
        else [{"5": 0.7, "9": 0.3}, {"8": 0.95, "7": 0.05}]
    )
    return {
        "ids": [5, 7],
        "q": [0.7, 0.05],
        "dists": dists,
        # the model's own p of the disclosed tokens: " cat" 0.2, " dog" 0.6, piece 8 0.5
        "logp": [{"5": math.log(0.2), "9": math.log(0.6)}, {"8": math.log(0.5)}]
        if mode == "sample"
        else [{"5": math.log(0.2), "9": math.log(0.6)}, {"8": math.log(0.5), "7": -3.0}],
        "dropped": [0.0, 0.0],
        "strings": {"5": " cat", "9": " dog", "7": "\ufffd", "8": "\ufffd"},
    }


def test_logprob_weighting_on_hand_computed_values():
    """Paper, Progressive Disclosure: sim weighted by p(v) / sum_u p(u) over the unique
    disclosed tokens u (draw counts play no part)."""
    vectors = {"cat": np.array([1.0, 0.0]), "dog": np.array([0.0, 1.0])}
    emb, exact = token_scores(
        _law("sample"), vectors, n=4, mode="sample", exact_numbers=False, weighting="logprob"
    )
    # weights 0.2 / 0.8 = 0.25 (" cat" = the true token, sim 1) and 0.75 (" dog", sim 0.5)
    assert emb[0] == pytest.approx(0.25 * 1 + 0.75 * 0.5)
    assert exact[0] == pytest.approx((4 * 0.25 + 1) / 6)
    # the true piece 7 was not disclosed: weight 0; no text to embed: its exact-match rate
    np.testing.assert_allclose([emb[1], exact[1]], [1 / 6, 1 / 6])
    emb, exact = token_scores(
        _law("exact"), vectors, n=10, mode="exact", exact_numbers=False, weighting="logprob"
    )
    w7 = math.exp(-3.0) / (0.5 + math.exp(-3.0))
    np.testing.assert_allclose(exact, [(10 * 0.25 + 1) / 12, (10 * w7 + 1) / 12])


def test_token_formula_sample_mode():
    vectors = {"cat": np.array([1.0, 0.0]), "dog": np.array([0.0, 1.0])}
    emb, exact = token_scores(_law("sample"), vectors, n=4, mode="sample", exact_numbers=False)
    # exact match: (count + 1) / (N + 2)
    np.testing.assert_allclose(exact, [(3 + 1) / 6, (0 + 1) / 6])
    # embedding: (3 * 1 + 1 * (cos 0 + 1) / 2) / 4; the U+FFFD piece falls back to its exact
    # rate (string equality would call the other piece a perfect match)
    np.testing.assert_allclose(emb, [(3 + 0.5) / 4, 1 / 6])


def test_token_formula_exact_mode_is_the_expected_laplace_rate():
    vectors = {"cat": np.array([1.0, 0.0]), "dog": np.array([0.0, 1.0])}
    emb, exact = token_scores(_law("exact"), vectors, n=100, mode="exact", exact_numbers=False)
    np.testing.assert_allclose(exact, [(100 * 0.7 + 1) / 102, (100 * 0.05 + 1) / 102])
    np.testing.assert_allclose(emb, [0.7 * 1 + 0.3 * 0.5, (100 * 0.05 + 1) / 102])


def test_token_direction_higher_is_member():
    def law(q):
        return {
            "ids": [5, 5],
            "q": [q, q],
            "dists": [{"5": q, "9": 1 - q}] * 2,
            "dropped": [0.0, 0.0],
            "strings": {"5": " cat", "9": " dog"},
        }

    vectors = {"cat": np.array([1.0, 0.0]), "dog": np.array([0.0, 1.0])}

    def score(plain_q, prefixed_q):
        plain, prefixed = (
            token_scores(law(q), vectors, n=10, mode="exact", exact_numbers=False)
            for q in (plain_q, prefixed_q)
        )
        return [relative_score(prefixed[j], plain[j]) for j in (0, 1)]

    member, nonmember = score(0.9, 0.3), score(0.3, 0.3)
    assert member[0] > nonmember[0] and member[1] > nonmember[1]
    assert nonmember == [-1.0, -1.0]


# -- next-token laws against brute force ----------------------------------------------------
@torch.no_grad()
def _brute_q(backend, text, prefix, top_k, temperature):
    """q_t by one full forward per prefix [start +] [P +] x_<t (no cache, no batching)."""
    context = [*backend.start_ids, *(backend.encode(prefix) if prefix else [])]
    ids = backend.encode(text)
    out = []
    logps = []
    for t in range(1, len(ids)):  # from the second token, as Eq. 4 from the second word
        raw = backend.model(input_ids=torch.tensor([[*context, *ids[:t]]])).logits[0, -1]
        logps.append(torch.log_softmax(raw.double(), -1))
        logits = raw.double() / temperature
        keep = torch.topk(logits, top_k).indices if top_k else torch.arange(len(logits))
        probs = torch.softmax(logits[keep], -1)
        hit = (keep == ids[t]).nonzero()
        out.append(float(probs[hit[0, 0]]) if len(hit) else 0.0)
    return out, logps


@pytest.mark.parametrize(
    "text",
    ["The council met in Seoul.", "首尔市议会讨论了预算。", "Совет обсудил бюджет 2023 года."],
)
@pytest.mark.parametrize("prefix", [None, PREFIX])
def test_next_token_laws_match_one_forward_per_prefix(tiny, text, prefix):
    requests = in_memory_requests(tiny, embedder=HashEmbedder())
    settings = dict(n=16, top_k=5, temperature=0.7, mode="exact", min_mass=0.0, seed=0)
    (law,) = requests.next_tokens("target", [text], prefix, settings)
    assert law["ids"] == tiny.encode(text)[1:]  # x_1 is never scored, with or without P
    q, logps = _brute_q(tiny, text, prefix, 5, 0.7)
    np.testing.assert_allclose(law["q"], q, atol=1e-5)
    for shown, logp in zip(law["logp"], logps, strict=True):  # untempered, full vocabulary
        for token, value in shown.items():
            assert value == pytest.approx(float(logp[int(token)]), abs=1e-4)
    assert [d.keys() for d in law["logp"]] == [d.keys() for d in law["dists"]]
    for dist, dropped in zip(law["dists"], law["dropped"], strict=True):
        assert len(dist) == 5 and sum(dist.values()) + dropped == pytest.approx(1.0)
    sampled = dict(settings, mode="sample")
    (draws,) = requests.next_tokens("target", [text], prefix, sampled)
    assert all(sum(d.values()) == 16 for d in draws["dists"])
    assert draws["q"] == law["q"]
    # the draws are the request's: a fresh client (new store) draws the same
    again = in_memory_requests(tiny).next_tokens("target", [text], prefix, sampled)[0]
    assert again["dists"] == draws["dists"]


def test_next_token_laws_forward_the_prefix_once_for_every_text(tiny):
    # P + x used to go through the model whole for every text: P's KV cache is reused now
    texts = ["The council met in Seoul.", "首尔市议会讨论了预算。", "Совет обсудил бюджет."]
    prefix = "A prefix no other test uses.\n\n"  # the backend keeps the last prefix's cache
    seen: list[int] = []
    hook = tiny.model.get_input_embeddings().register_forward_hook(
        lambda module, args, out: seen.append(args[0].numel())
    )
    try:
        requests = in_memory_requests(tiny, embedder=HashEmbedder())
        settings = dict(n=4, top_k=5, temperature=1.0, mode="sample", min_mass=0.0, seed=0)
        requests.next_tokens("target", texts, prefix, settings)
    finally:
        hook.remove()
    context = len(tiny.start_ids) + len(tiny.encode(prefix))
    assert sum(seen) == context + sum(len(tiny.encode(t)) for t in texts)


def test_token_disclosure_scores_and_direction_on_tiny_model(tiny):
    texts = ["The quick brown fox jumps over the lazy dog.", "首尔市议会讨论了预算。"]
    attack = SimMIA(disclosure="token", mode="exact", n_samples=10, top_k=0, min_mass=0.0)
    scores = attack.score_with_backend(tiny, texts, prefix=PREFIX, embedder=HashEmbedder())
    # with the whole vocabulary and temperature 1, q_t = p(x_t | ctx): SimMIA* is the relative
    # mean of (N p + 1) / (N + 2) from the planner's log-probs
    plain = tiny.score([ScoreRequest(t) for t in texts])
    prefixed = tiny.score([ScoreRequest(t, PREFIX) for t in texts])
    for i in range(len(texts)):
        n = len(prefixed[i]) - 1  # x_2 .. x_T
        a = (10 * np.exp(plain[i].logp[-n:].astype(float)) + 1) / 12
        b = (10 * np.exp(prefixed[i].logp[-n:].astype(float)) + 1) / 12
        assert scores["simmia_star"][i] == pytest.approx(-np.mean(b / a), rel=1e-4)
    assert np.isfinite(scores["simmia"]).all()


def test_prob_ratio_disclosure_equals_planner_formula(tiny):
    texts = ["In 2023 the council met in Seoul.", "Совет обсудил бюджет."]
    scores = SimMIA(disclosure="prob_ratio").score_with_backend(tiny, texts, prefix=PREFIX)
    for i, text in enumerate(texts):
        (a,) = tiny.score([ScoreRequest(text)])
        (b,) = tiny.score([ScoreRequest(text, PREFIX)])
        n = len(b) - 1  # x_2 .. x_T
        diff = b.logp[-n:].astype(float) - a.logp[-n:].astype(float)
        assert scores["simmia"][i] == pytest.approx(-np.mean(np.exp(diff)), rel=1e-5)
        assert scores["simmia_star"][i] == pytest.approx(-np.mean(diff), abs=1e-5)


# -- refusals -----------------------------------------------------------------------------------
class TextOnly(Backend):
    capabilities = frozenset({SAMPLING})

    def sample(self, prompts, settings):
        return [["word"] * settings.n for _ in prompts]

    def __repr__(self) -> str:
        return "TextOnly()"


def test_unsupported_combinations_are_refused_before_any_work():
    for disclosure in ("token", "logprob"):
        with pytest.raises(CapabilityError, match=f"disclosure='{disclosure}'.*disclosure='text'"):
            SimMIA(disclosure=disclosure).check_backend(TextOnly())
    with pytest.raises(CapabilityError, match="disclosure='logprob'.*'prob_ratio'"):
        SimMIA(disclosure="logprob").check_backend(TextOnly())
    with pytest.raises(CapabilityError, match="'prob_ratio' needs log-probabilities"):
        SimMIA(disclosure="prob_ratio").check_backend(TextOnly())
    SimMIA(disclosure="text").check_backend(TextOnly())  # text stays available
    for disclosure in ("token", "logprob"):
        with pytest.raises(ConfigError, match="greedy_topk"):
            SimMIA(disclosure=disclosure, mode="greedy_topk")
    with pytest.raises(ConfigError, match="disclosure must be one of"):
        SimMIA(disclosure="words")


def test_token_disclosure_refuses_text_beyond_context(tiny):
    long_text = " ".join(["budget"] * 200)  # the tiny model's context is 128 tokens
    with pytest.raises(ConfigError, match="exceeds the model context"):
        SimMIA(disclosure="token", n_samples=2).score_with_backend(
            tiny, [long_text], prefix=PREFIX, embedder=HashEmbedder()
        )


# -- runs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("disclosure", "kinds"),
    [
        ("prob_ratio", {"logprobs"}),
        ("token", {"next_token", "embed"}),
        ("logprob", {"next_token", "embed"}),
    ],
)
def test_run_with_disclosure_reruns_from_cache(
    tiny_model_dir, tmp_path, monkeypatch, disclosure, kinds
):
    monkeypatch.setattr("imprint.requests.embed.default_embedder", HashEmbedder)
    params = parse_params(
        [f"simmia.disclosure={disclosure}", "simmia.n_samples=6", "simmia.n_shots=1"]
    )
    config = dict(
        model=str(tiny_model_dir),
        data=str(wikimia_subset(tmp_path, 6)),
        attacks=("simmia",),
        params=params,
        truncate_words=8,
        device="cpu",
        cache=tmp_path / "signals.sqlite",
        progress=False,
        n_bootstrap=20,
        blind=False,
        shot_holdout=1,  # 6 texts: too few for the default 10 held-out shots
    )
    first = execute_run(config_from_flags(out=tmp_path / "first", **config))
    second = execute_run(config_from_flags(out=tmp_path / "second", **config))
    done, again = first.manifest["requests"], second.manifest["requests"]
    assert kinds <= set(done["target"]) | set(done.get("embedder", {})), done
    assert "next_word" not in done.get("target", {}) and "sample" not in done.get("target", {})
    assert all(c["executed"] > 0 for role in done.values() for c in role.values()), done
    for role, by_kind in again.items():
        for kind, counts in by_kind.items():
            assert counts["executed"] == 0, (role, kind, counts)
            assert counts["cache_hits"] == counts["requests"] == done[role][kind]["requests"]
    for column in ("simmia", "simmia_star"):
        assert np.isfinite(first.scores[column]).all(), column
        np.testing.assert_array_equal(second.scores[column], first.scores[column])
    assert f'"disclosure": "{disclosure}"' in json.dumps(first.manifest["attacks"])
