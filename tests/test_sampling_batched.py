"""Batched, per-prompt seeded sampling (issue 26) on the tiny random Llama: a prompt's draws are
the same alone, in a batch, in any order; one prompt per loop reproduces ``generate``'s draws
under today's per-prompt seed; stop strings, empty, non-Latin and too-long prompts."""

from __future__ import annotations

import pytest
import torch

from imprint.backends.base import SamplingSettings
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.sampling import Group, prompt_seed, sample_groups, warp
from imprint.backends.text import HFTextBackend, cut_at_stop
from imprint.errors import ConfigError
from imprint.requests import RequestRunner, RequestStore
from imprint.requests.client import ModelRequests

PROMPTS = [
    "The quick brown fox",
    "In",
    "In 2023 the council met in Seoul to discuss the budget.",
    "Hurricane Ana was the second",
    "東京は日本の首都です",
    "",
]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def alone(tiny: HFLogprobBackend, prompts: list[str], **kw: object) -> list[list[str]]:
    text = HFTextBackend(tiny, max_rows=1)  # one prompt per decode loop
    return [text.sample([p], SamplingSettings(**kw))[0] for p in prompts]  # type: ignore[arg-type]


def test_batched_draws_equal_one_prompt_per_call(tiny, one_torch_thread):
    kw = {"n": 4, "max_tokens": 12, "seed": 3}
    together = HFTextBackend(tiny).sample(PROMPTS, SamplingSettings(**kw))  # type: ignore[arg-type]
    assert together == alone(tiny, PROMPTS, **kw)
    # order and company do not matter either
    reordered = HFTextBackend(tiny, max_rows=8).sample(PROMPTS[::-1], SamplingSettings(**kw))  # type: ignore[arg-type]
    assert reordered[::-1] == together
    assert all(len(s) == 4 for s in together) and len({t for s in together for t in s}) > 6


def generate_draws(
    text: HFTextBackend, lm: HFLogprobBackend, prompt: str, seed: int, **sampling: float
) -> list[str]:
    """3 draws of 10 tokens from ``generate()`` on one prompt after
    ``torch.manual_seed(prompt_seed(seed, prompt))`` (top-k 50), decoded as ``text`` decodes."""
    ids = torch.tensor([text._prompt_ids(prompt, "continue")])
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(prompt_seed(seed, prompt))
        generated = lm.model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=10,
            num_return_sequences=3,
            pad_token_id=lm.pad_id,
            do_sample=True,
            top_k=50,
            **sampling,
        )
    return [text._decode(row) for row in generated[:, ids.shape[1] :].tolist()]


def test_one_prompt_per_loop_reproduces_generate_under_todays_seed(tiny, one_torch_thread):
    """Today's path: generate() per prompt after torch.manual_seed(prompt_seed(seed, prompt))."""
    text = HFTextBackend(tiny)
    for prompt in PROMPTS[:3]:
        expected = generate_draws(text, tiny, prompt, 5, temperature=1.0, top_p=1.0)
        assert text.sample([prompt], SamplingSettings(3, 10, seed=5)) == [expected]


def test_seeds_are_respected(tiny, one_torch_thread):
    text = HFTextBackend(tiny)
    a = text.sample(PROMPTS[:3], SamplingSettings(3, 8, seed=1))
    assert a == text.sample(PROMPTS[:3], SamplingSettings(3, 8, seed=1))
    assert a != text.sample(PROMPTS[:3], SamplingSettings(3, 8, seed=2))
    # a prompt's draws are seeded by (seed, prompt): the same prompt twice draws the same
    twice = text.sample([PROMPTS[0], PROMPTS[0]], SamplingSettings(3, 8, seed=1))
    assert twice[0] == twice[1] == a[0]
    # unseeded draws still run (the global generator)
    assert len(text.sample(PROMPTS[:2], SamplingSettings(2, 4, seed=None))) == 2


def test_stop_strings_cut_and_end_the_row_early(tiny, one_torch_thread):
    text = HFTextBackend(tiny)
    free = text.sample(PROMPTS[:4], SamplingSettings(4, 16, seed=7))
    stop = [" the", "."]
    stopped = text.sample(PROMPTS[:4], SamplingSettings(4, 16, stop=stop, seed=7))
    assert stopped == [[cut_at_stop(s, stop) for s in row] for row in free]
    assert any(cut_at_stop(s, stop) != s for row in free for s in row)  # some stop did bite
    assert stopped == alone(tiny, PROMPTS[:4], n=4, max_tokens=16, stop=stop, seed=7)


def test_groups_with_their_own_settings_share_a_loop(tiny, one_torch_thread):
    """Per-row settings: each group's budget, temperature, top-k, top-p and stop in one loop
    give the draws it gets alone; a finished group leaves the batch without disturbing others."""
    settings = [
        {"max_tokens": 3, "temperature": 1.0, "top_k": 50},
        {"max_tokens": 14, "temperature": 0.7, "top_k": 0, "top_p": 0.9},
        {"max_tokens": 9, "temperature": 0.0},
        {"max_tokens": 12, "temperature": 1.3, "top_k": 5, "stop": ("e",)},
    ]

    def groups() -> list[Group]:
        ids = [[tiny.bos_id, *tiny.encode(p)] for p in PROMPTS[:4]]
        return [Group(ids[i], 3, seed=11 + i, **s) for i, s in enumerate(settings)]  # type: ignore[arg-type]

    decode = tiny.tokenizer.decode
    together = groups()
    with torch.no_grad():
        sample_groups(tiny, together, decode=decode)
        single = [g for g in groups()]
        for g in single:
            sample_groups(tiny, [g], decode=decode)
    assert [g.out for g in together] == [g.out for g in single]
    assert [max(len(o) for o in g.out) for g in together][0] == 3


def test_warpers_match_transformers(one_torch_thread):
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = torch.randn(6, 300, generator=torch.Generator().manual_seed(0)) * 3
    ids = torch.zeros(6, 1, dtype=torch.long)
    for temperature, top_k, top_p in [(1.0, 50, 1.0), (0.7, 0, 0.9), (1.5, 20, 0.5)]:
        expected = scores
        if temperature != 1.0:
            expected = TemperatureLogitsWarper(temperature)(ids, expected)
        if top_k:
            expected = TopKLogitsWarper(top_k)(ids, expected)
        if top_p < 1:
            expected = TopPLogitsWarper(top_p)(ids, expected)
        assert torch.equal(warp(scores, temperature, top_k, top_p), expected)


def test_bad_prompts_get_a_clear_answer(tiny, tiny_model_dir, tmp_path, one_torch_thread):
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    long_prompt = " ".join(["fox"] * 200)  # past the tiny Llama's 128 positions: rotary, runs on
    kw = {"n": 2, "max_tokens": 4, "seed": 0}
    assert HFTextBackend(tiny).sample([long_prompt, "In"], SamplingSettings(**kw)) == alone(  # type: ignore[arg-type]
        tiny, [long_prompt, "In"], **kw
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # learned positions: refused
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    gpt2 = HFTextBackend(HFLogprobBackend(str(tmp_path / "gpt2"), device="cpu"))
    with pytest.raises(ConfigError, match="exceeds the model's 32 positions.*--truncate-words"):
        gpt2.sample([long_prompt], SamplingSettings(1, 4, seed=0))
    assert len(gpt2.sample(["In"], SamplingSettings(1, 4, seed=0))[0]) == 1
    empty = HFTextBackend(tiny).sample(
        [""], SamplingSettings(2, 5, seed=0)
    )  # from the start token alone
    assert len(empty[0]) == 2 and empty == HFTextBackend(tiny).sample(
        [""], SamplingSettings(2, 5, seed=0)
    )
    with pytest.raises(ConfigError, match="top_p"):
        Group([0], 1, 1, 0, top_p=0.0)


def test_the_engine_sends_one_loop_per_batch_with_the_same_draws(tiny, one_torch_thread):
    backend = HFTextBackend(tiny)
    client = ModelRequests({"target": backend}, RequestRunner(RequestStore(None)))
    got = client.sample("target", PROMPTS[:4], 3, 6, seed=9, top_k=50)
    assert backend.usage()["generate_calls"] == 1  # was one generate call per prompt
    assert got == alone(tiny, PROMPTS[:4], n=3, max_tokens=6, seed=9, top_k=50)


@pytest.fixture(scope="module")
def tiny_gemma(tiny_model_dir, tmp_path_factory) -> HFLogprobBackend:
    """A tiny random Gemma 3 (a sliding window of 4 tokens, soft-capped logits) with the tiny
    model's tokenizer: its KV cache mixes sliding and full layers."""
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        final_logit_softcapping=30.0,
    )
    out = tmp_path_factory.mktemp("tiny-gemma")
    Gemma3ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return HFLogprobBackend(str(out), device="cpu")


def test_sliding_window_model_batches_and_matches_generate(tiny_gemma, one_torch_thread):
    prompts = ["The quick brown fox jumps over the lazy", "In", "Hurricane Ana was the second"]
    together = HFTextBackend(tiny_gemma).sample(prompts, SamplingSettings(3, 10, seed=2))
    assert together == alone(tiny_gemma, prompts, n=3, max_tokens=10, seed=2)
    text = HFTextBackend(tiny_gemma)
    assert together[0] == generate_draws(text, tiny_gemma, prompts[0], 2)
