"""Neighbourhood attack: offline lexical neighbours, a tiny random RoBERTa MLM, the neighbour cache,
and scoring through the planner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.attacks import neighbours as nb
from imprint.attacks.base import RunContext
from imprint.attacks.neighborhood import Neighborhood, neighbourhood_score
from imprint.attacks.neighbours import NeighbourVariant, lexical_neighbours
from imprint.backends.hf import HFLogprobBackend
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.requests import RequestRunner, RequestStore
from imprint.requests import mlm_neighbours as mlm
from imprint.requests.client import ModelRequests
from imprint.signals.cache import SignalCache
from imprint.signals.plan import run_plan

TEXT = "In May 2023 the council met in Seoul and discussed the budget."
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "In 2023 the council met in Seoul to discuss the budget.",
    "Membership inference asks whether a text was in the training data.",
]


#: tiny models run faster on one thread than on oversubscribed cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def one_word_apart(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and sum(x != y for x, y in zip(wa, wb, strict=True)) == 1


def mlm_neighbours(spec, texts, store=None, **settings):
    """Neighbours of ``texts`` as a run makes them: neighbours requests through a client."""
    variant = NeighbourVariant(generator=str(spec), **settings)
    client = ModelRequests({}, RequestRunner(RequestStore(store)))
    return client.neighbours(str(spec), texts, nb.generator_config(variant)), client


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForMaskedLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        mask_token="<mask>",
    )
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=fast.pad_token_id,
        type_vocab_size=1,
    )
    folder = tmp_path_factory.mktemp("tiny-mlm")
    RobertaForMaskedLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_lexical_neighbours_swap_one_word_keeping_case_and_punctuation():
    out = lexical_neighbours(TEXT, 50)
    assert len(out) == len(set(out)) and TEXT not in out
    assert all(one_word_apart(TEXT, o) for o in out)
    assert "On May 2023 the council met in Seoul and discussed the budget." in out
    assert "In June 2023 the council met in Seoul and discussed the budget." in out
    assert "In May 2024 the council met in Seoul and discussed the budget." in out
    assert "In May 2023 the council met in Seoul or discussed the budget." in out
    assert lexical_neighbours(TEXT, 50) == out  # deterministic
    assert lexical_neighbours(TEXT, 3) == out[:3]
    assert lexical_neighbours("Seoul council", 5) == ("council Seoul",)  # fallback swap
    assert lexical_neighbours("Seoul", 5) == ()


def test_mlm_neighbours_are_single_token_swaps(tiny_mlm_dir):
    (out,), _ = mlm_neighbours(tiny_mlm_dir, [CORPUS[1]], n=8, top_k=3)
    assert 0 < len(out) <= 8 and CORPUS[1] not in out
    assert all(one_word_apart(CORPUS[1], o) for o in out), out
    (again,), _ = mlm_neighbours(tiny_mlm_dir, [CORPUS[1]], n=8, top_k=3)
    assert again == out  # seeded dropout: the same neighbours from a fresh MLM


def test_mlm_neighbours_are_stored_requests(tiny_mlm_dir, tmp_path, monkeypatch):
    store = tmp_path / "cache.sqlite"
    first, client = mlm_neighbours(tiny_mlm_dir, CORPUS, store, n=5, top_k=2)
    assert client.runner.counts.of("mlm", "neighbours").executed == len(set(CORPUS))

    def refuse(*args, **kwargs):
        raise AssertionError("the MLM was loaded although every text was stored")

    monkeypatch.setattr(mlm, "MaskedLMNeighbours", refuse)
    again, client = mlm_neighbours(tiny_mlm_dir, CORPUS, store, n=5, top_k=2)
    assert again == first
    assert client.runner.counts.of("mlm", "neighbours").cache_hits == len(set(CORPUS))
    # another ranking is another request: it would need the MLM
    with pytest.raises(AssertionError, match="MLM was loaded"):
        mlm_neighbours(tiny_mlm_dir, CORPUS[:1], store, n=5, top_k=2, ranking="logp")


def test_unprepared_mlm_variant_is_refused(tiny_mlm_dir):
    with pytest.raises(ConfigError, match="prepare"):
        NeighbourVariant(generator=str(tiny_mlm_dir)).apply(CORPUS[0])


def test_missing_mlm_is_a_teaching_error(tmp_path):
    with pytest.raises(ConfigError, match="masked LM"):
        Neighborhood(mlm=str(tmp_path / "absent")).prepare([Sample("0", TEXT, 1)], RunContext())
    with pytest.raises(ConfigError):
        Neighborhood(dropout=1.0)


def test_neighborhood_end_to_end_uses_mean_neighbour_loss(tiny_model_dir, tiny_mlm_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    samples = [Sample(str(i), t, i % 2) for i, t in enumerate(CORPUS)]
    for unprepared in (Neighborhood(n=4), Neighborhood(mlm=str(tiny_mlm_dir), n=4, top_k=2)):
        attack = unprepared.prepare(samples, RunContext()).attack or unprepared
        texts = [s.text for s in samples]
        signals, _ = run_plan(texts, attack.needs(), {"target": backend}, SignalCache(None))
        scores = attack.score(signals)["neighborhood"]
        loss = [-float(np.mean(s.logp)) for s in signals.get()]
        nbr = signals.variants(attack.needs()[1])
        expected = [
            neighbourhood_score(x, [-float(np.mean(v.logp)) for v in vs])
            for x, vs in zip(loss, nbr, strict=True)
        ]
        assert scores == pytest.approx(expected)
        assert all(1 <= len(vs) <= 4 for vs in nbr)


# -- candidate ranking (Mattern et al.: p(c) / (1 - p(original))) --------------------------------
def ordered(candidates: list[tuple[float, int, int]]) -> list[tuple[int, int]]:
    """(position, token) in the order MaskedLMNeighbours keeps them."""
    return [(p, c) for _, p, c in sorted(candidates, key=lambda t: (-t[0], t[1], t[2]))]


def test_ratio_ranking_by_hand_differs_from_raw_logp():
    # position 0: the MLM is sure of the original token 0 (p 0.9); position 1: unsure (p 0.4)
    probs = np.array([[0.9, 0.08, 0.015, 0.005], [0.3, 0.2, 0.1, 0.4]])
    logp = np.log(probs)
    # ratio at position 0: 0.08 / 0.1 = 0.8, 0.015 / 0.1 = 0.15, 0.005 / 0.1 = 0.05
    assert mlm.replacement_scores(logp[0], 0)[1:] == pytest.approx(np.log([0.8, 0.15, 0.05]))
    # at position 1: 0.3 / 0.6 = 0.5, 0.2 / 0.6, 0.1 / 0.6
    assert mlm.replacement_scores(logp[1], 3)[:3] == pytest.approx(np.log([0.5, 1 / 3, 1 / 6]))
    assert mlm.replacement_scores(logp[1], 3, "logp") == pytest.approx(logp[1])
    every = np.ones(4, dtype=bool)
    ratio = mlm.rank_candidates(logp, [0, 1], [0, 3], every, set(), top_k=2)
    raw = mlm.rank_candidates(logp, [0, 1], [0, 3], every, set(), top_k=2, ranking="logp")
    assert ordered(ratio) == [(0, 1), (1, 0), (1, 1), (0, 2)]  # 0.8, 0.5, 1/3, 0.15
    assert ordered(raw) == [(1, 0), (1, 1), (0, 1), (0, 2)]  # 0.3, 0.2, 0.08, 0.015
    assert sorted(s for s, _, _ in ratio) == pytest.approx(np.log([0.15, 1 / 3, 0.5, 0.8]))
    # special tokens and a changed word-start status are never candidates
    starts = np.array([True, True, False, True])
    kept = mlm.rank_candidates(logp, [0], [0], starts, {1}, top_k=3)
    assert [c for _, _, c in kept] == [3]


def test_ratio_ranking_is_finite_when_the_original_is_certain():
    # float32 log-softmax: p(original) rounds to exactly 1, 1 - p would be 0 (ratio inf)
    logits = np.array([60.0, 0.0, -1.0, -2.0], dtype=np.float32)
    logp = (logits - np.log(np.sum(np.exp(logits - 60.0))) - 60.0).astype(np.float32)
    assert np.exp(logp[0]) == 1.0
    scores = mlm.replacement_scores(logp, 0)
    z = 1 + np.exp(-1.0) + np.exp(-2.0)  # the others' share, renormalised
    assert scores[1:] == pytest.approx(np.log([1 / z, np.exp(-1.0) / z, np.exp(-2.0) / z]))


def test_ranking_is_a_named_field_in_the_variant_and_its_cache_key(tmp_path):
    attack = Neighborhood(mlm=str(tmp_path / "mlm"))
    assert attack.ranking == "ratio" and attack.variant.ranking == "ratio"
    assert vars(Neighborhood(ranking="logp"))["ranking"] == "logp"  # the manifest's entry
    assert "p/(1-p_orig)" in Neighborhood.summary
    logp_variant = NeighbourVariant(generator=str(tmp_path / "mlm"), ranking="logp")
    assert nb.generator_config(attack.variant) != nb.generator_config(logp_variant)
    with pytest.raises(ConfigError, match="ranking"):
        Neighborhood(ranking="prob")


def test_mlm_neighbours_under_both_rankings_are_single_swaps(tiny_mlm_dir):
    for ranking in ("ratio", "logp"):
        (out,), _ = mlm_neighbours(tiny_mlm_dir, [CORPUS[0]], n=6, top_k=3, ranking=ranking)
        assert 0 < len(out) <= 6 and all(one_word_apart(CORPUS[0], o) for o in out), out
