"""Shared fixtures: a tiny random causal LM with a real (trained in-memory) BPE tokenizer."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
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


@pytest.fixture(autouse=True)
def _float32_auto(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--dtype auto`` as on a CPU with no recorded bf16 gate (float32), so expected values do
    not depend on whether the runner's CPU has avx512_bf16/AMX (issue 34). Tests of the choice
    pass their gates explicitly, or ask for ``real_bf16_gates``."""
    if "real_bf16_gates" in request.fixturenames:
        return
    from imprint.backends import dtype_choice

    monkeypatch.setattr(dtype_choice, "load_results", lambda: {})


@pytest.fixture
def real_bf16_gates() -> None:
    """The shipped bf16 gate results (``backends/bf16_gate_results.json``), not the suite's
    float32 default."""


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny models run faster on one thread than on oversubscribed cores (restored after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class HashEmbedder:
    """A deterministic stand-in for MiniLM: a unit vector seeded by each stripped string's hash
    (no model). ``fingerprint`` keys its embeddings in the request store."""

    fingerprint = "hash-embedder-v1"

    def embed(self, strings: Sequence[str]) -> np.ndarray:
        rows = []
        for s in strings:
            seed = int(hashlib.sha256(s.strip().encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=8)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32)


def wikimia_subset(folder: Path, members: int, non_members: int | None = None) -> Path:
    """The first ``members`` member and ``non_members`` (default: as many) non-member rows of
    WikiMIA length 32, written to ``folder/subset.jsonl``."""
    with (WIKIMIA / "WikiMIA_length32.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    n_out = members if non_members is None else non_members
    subset = [r for r in rows if r["label"] == 1][:members]
    subset += [r for r in rows if r["label"] == 0][:n_out]
    path = folder / "subset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in subset))
    return path


@pytest.fixture(autouse=True)
def _wide_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI lays a pipe out at 80 columns (issue 35); captured output is a pipe, and tests
    that read a message or a table cell whole get a wide one. tests/test_terminal_output.py
    checks the 80-column layout itself (COLUMNS=80, or a real process without COLUMNS)."""
    import imprint.cli.common as common

    monkeypatch.setattr(common, "PIPE_WIDTH", 1000)
    monkeypatch.setattr(common.console, "width", 1000)  # a subcommand's app has no callback
