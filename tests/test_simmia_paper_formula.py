"""SimMIA's disclosure variants against the paper's equations written out here, independently of
imprint's scoring code (issue 19 item 1).

Paper (Yi and Li 2026): sim(a, b) = (cos(E(a), E(b)) + 1) / 2 (Eq. 2); s(x_i | ctx) = E_{v ~ M}
[sim(x_i, v)] (Eq. 3); SimMIA* uses the indicator with Laplace smoothing (Eq. 1); SimMIA(x) =
-mean_{i >= 2} s(x_i | P + x_<i) / s(x_i | x_<i) (Eq. 4). "Progressive Disclosure": token-by-token
sampling when tokenization is visible; with log-probs, sim weighted by the model's probabilities
normalised across the unique next tokens. Here every law comes from one full forward per prefix
of a tiny random model (no cache, no batching, no tree) and E is a fake embedder; imprint's rules
for text-less tokens (documented in ``SimMIA.deviations``) are restated where they apply.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import HashEmbedder

from imprint.attacks.simmia import SimMIA
from imprint.backends.hf import HFLogprobBackend
from imprint.data.words import first_word, split_words
from imprint.requests.client import in_memory_requests

PREFIX = "Numbers like 1, 10 and 100 appear.\n\n"
TEXTS = ["The council met in Seoul to discuss the budget.", "The quick brown fox jumps."]
N, TOP_K, TEMPERATURE = 10, 5, 0.7

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


EMB = HashEmbedder()


def eq2(a: str, b: str) -> float:
    """sim(a, b) = (cos(E(a), E(b)) + 1) / 2 on the fake embedder."""
    u, v = EMB.embed([a, b])
    return (float(u @ v) + 1.0) / 2.0


def sim(a: str, b: str) -> float:
    """Eq. 2 between tokens; imprint's rule: a text-less sampled token has similarity 0."""
    return 0.0 if not b.strip() or "\ufffd" in b else eq2(a, b)


def eq4(plain: list[float], prefixed: list[float]) -> float:
    """Eq. 4 over the scored positions (those with a plain score)."""
    pairs = [(b, a) for a, b in zip(plain, prefixed, strict=True) if a > 0]
    return -float(np.mean([b / a for b, a in pairs]))


@torch.no_grad()
def token_laws(backend, text: str, prefix: str | None):
    """Per token x_t, t = 2..T: (x_t, p untempered over the vocabulary, q the top-k/temperature
    law), each by one forward over [start token +] [P +] x_<t."""
    context = [*backend.start_ids, *(backend.encode(prefix) if prefix else [])]
    ids = backend.encode(text)
    out = []
    for t in range(1, len(ids)):
        logits = backend.model(input_ids=torch.tensor([[*context, *ids[:t]]])).logits[0, -1]
        logits = logits.double()
        p = torch.softmax(logits, -1).numpy()
        top = torch.topk(logits / TEMPERATURE, TOP_K)
        q = np.zeros_like(p)
        q[top.indices.numpy()] = torch.softmax(top.values, -1).numpy()
        out.append((ids[t], p, q))
    return out


def token_text(backend, token: int) -> str:
    return backend.tokenizer.decode([token])


def paper_token_scores(backend, text, prefix, weights_of):
    """(s, s*) per position: Eq. 3 with weights ``weights_of(p, q, true) -> {v: w}``, and the
    weighted indicator with Laplace smoothing; a text-less true token takes the latter."""
    s, star = [], []
    for true, p, q in token_laws(backend, text, prefix):
        weights = weights_of(p, q, true)
        rate = (N * weights.get(true, 0.0) + 1) / (N + 2)
        truth = token_text(backend, true)
        embeddable = bool(truth.strip()) and "\ufffd" not in truth
        s.append(
            sum(w * sim(truth, token_text(backend, v)) for v, w in weights.items())
            if embeddable
            else rate
        )
        star.append(rate)
    return s, star


def paper_scores(backend, text, weights_of):
    plain = paper_token_scores(backend, text, None, weights_of)
    prefixed = paper_token_scores(backend, text, PREFIX, weights_of)
    return eq4(plain[0], prefixed[0]), eq4(plain[1], prefixed[1])


def by_law(p, q, true):
    """Token disclosure, exact mode: every token of the sampling law, weighted by its q."""
    return {int(v): float(q[v]) for v in np.flatnonzero(q)}


def by_logprob_over(unique):
    """Log-prob disclosure: p(v) / sum_{u in U} p(u) over the unique next tokens U."""

    def weights(p, q, true):
        kept = unique(p, q)
        total = sum(p[v] for v in kept)
        return {v: float(p[v] / total) for v in kept}

    return weights


def attack_scores(tiny, **params):
    attack = SimMIA(n_samples=N, top_k=TOP_K, temperature=TEMPERATURE, min_mass=0.0, **params)
    return attack.score_with_backend(tiny, TEXTS, prefix=PREFIX, embedder=HashEmbedder())


def test_token_disclosure_equals_the_papers_token_by_token_sampling(tiny):
    got = attack_scores(tiny, disclosure="token", mode="exact")
    for i, text in enumerate(TEXTS):
        want = paper_scores(tiny, text, by_law)
        assert got["simmia"][i] == pytest.approx(want[0], rel=1e-5)
        assert got["simmia_star"][i] == pytest.approx(want[1], rel=1e-5)


def test_logprob_disclosure_equals_the_papers_probability_weighted_similarity(tiny):
    # exact mode: U = the sampling law's tokens (top 5); at temperature 0.7 the model's own p
    # weighs them differently from the law q, so token and logprob disclosures differ
    got = attack_scores(tiny, disclosure="logprob", mode="exact")
    top5 = by_logprob_over(lambda p, q: [int(v) for v in np.flatnonzero(q)])
    for i, text in enumerate(TEXTS):
        want = paper_scores(tiny, text, top5)
        assert got["simmia"][i] == pytest.approx(want[0], rel=1e-5)
        assert got["simmia_star"][i] == pytest.approx(want[1], rel=1e-5)
    token = attack_scores(tiny, disclosure="token", mode="exact")
    assert not np.allclose(token["simmia"], got["simmia"], rtol=1e-3)


def test_logprob_disclosure_with_sampled_tokens(tiny):
    """Sample mode: U = the unique tokens of N draws (the request layer's draws, read as the
    API's sampled tokens); weights and similarity computed here from the brute-force p."""
    got = attack_scores(tiny, disclosure="logprob", mode="sample", seed=3)
    requests = in_memory_requests(tiny)
    settings = dict(n=N, top_k=TOP_K, temperature=TEMPERATURE, mode="sample", min_mass=0.0, seed=3)
    for i, text in enumerate(TEXTS):
        parts = []
        for prefix in (None, PREFIX):
            (law,) = requests.next_tokens("target", [text], prefix, settings)
            drawn = iter([[int(v) for v in d] for d in law["dists"]])
            assert all(sum(d.values()) == N for d in law["dists"])

            def unique(p, q, drawn=drawn):
                kept = next(drawn)
                assert all(q[v] > 0 for v in kept)  # draws come from the top-k law
                return kept

            parts.append(paper_token_scores(tiny, text, prefix, by_logprob_over(unique)))
        assert got["simmia"][i] == pytest.approx(eq4(parts[0][0], parts[1][0]), rel=1e-5)
        assert got["simmia_star"][i] == pytest.approx(eq4(parts[0][1], parts[1][1]), rel=1e-5)


@torch.no_grad()
def word_law(backend, prompt: list[int], max_tokens: int) -> dict[str, float]:
    """The exact next-word law after ``prompt``: every continuation by full forwards (top-k,
    temperature; a word ends at a non-word character, EOS or ``max_tokens`` tokens)."""
    eos = backend.tokenizer.eos_token_id
    law: dict[str, float] = {}

    def walk(gen: list[int], mass: float) -> None:
        logits = backend.model(input_ids=torch.tensor([prompt + gen])).logits[0, -1].double()
        top = torch.topk(logits / TEMPERATURE, TOP_K)
        probs = torch.softmax(top.values, -1).tolist()
        for token, p in zip(top.indices.tolist(), probs, strict=True):
            new = gen if token == eos else [*gen, token]
            ended = token == eos or len(new) >= max_tokens
            word, final = first_word(
                backend.tokenizer.decode(new, skip_special_tokens=True), ended=ended
            )
            if final:
                law[word] = law.get(word, 0.0) + mass * p
            else:
                walk(new, mass * p)

    walk([], 1.0)
    return law


def test_text_disclosure_equals_the_papers_word_by_word_sampling(tiny):
    text = "The council met in Seoul."
    got = SimMIA(
        n_samples=N,
        top_k=TOP_K,
        temperature=TEMPERATURE,
        mode="exact",
        min_mass=0.0,
        max_word_tokens=2,
    ).score_with_backend(tiny, [text], prefix=PREFIX, embedder=HashEmbedder())
    words = split_words(text)
    scores = {}
    for name, context in (("plain", ""), ("prefixed", PREFIX)):
        s, star = [], []
        for i in range(1, len(words)):  # from the second word (Eq. 4)
            prompt = [tiny.bos_id, *tiny.encode(context + text[: words[i - 1].end])]
            law = word_law(tiny, prompt, 2)
            true = words[i].text
            s.append(sum(w * (eq2(true, v) if v else 0.0) for v, w in law.items()))
            star.append((N * law.get(true, 0.0) + 1) / (N + 2))
        scores[name] = (s, star)
    assert got["simmia"][0] == pytest.approx(
        eq4(scores["plain"][0], scores["prefixed"][0]), rel=1e-5
    )
    assert got["simmia_star"][0] == pytest.approx(
        eq4(scores["plain"][1], scores["prefixed"][1]), rel=1e-5
    )
