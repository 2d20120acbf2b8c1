"""Shared fixtures: a tiny random causal LM with a real (trained in-memory) BPE tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
WIKIMIA = SHARED_DATA / "wikimia"

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "In 2023 the council met in Seoul to discuss the budget.",
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii.",
    "Membership inference asks whether a text was in the training data.",
    "Numbers like 1, 10 and 100 appear in many documents; so do dates.",
]


def make_tiny_model(save_dir: Path, *, vocab: int = 320, seed: int = 0, layers: int = 2) -> Path:
    """Save a tiny random Llama model plus a byte-level BPE tokenizer to ``save_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    save_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(save_dir)
    fast.save_pretrained(save_dir)
    return save_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_ref_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-ref"), seed=1)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own imprint cache unless it sets IMPRINT_CACHE_DIR itself."""
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(tmp_path / "imprint-cache"))
