"""Shared fixtures: a tiny random causal LM with a real (trained in-memory) BPE tokenizer."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

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
    return save_tiny_llama(save_dir, fast, seed=seed, layers=layers, tie_word_embeddings=False)


def save_tiny_llama(
    save_dir: Path, tokenizer: Any, *, seed: int = 0, layers: int = 2, **config: Any
) -> Path:
    """Save a tiny random Llama (seeded; hidden size 32, 4 heads, 2 K/V heads, 128 positions)
    sized to ``tokenizer``, with its BOS and EOS, and the tokenizer, to ``save_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **config,
        )
    )
    save_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(save_dir)
    tokenizer.save_pretrained(save_dir)
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


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance with 2 CPUs for one test module (the Ray tests import ray first, so
    they are skipped where the [ray] extra is missing)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


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


def force_hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hugging Face hub and datasets offline for one test (skipped without ``datasets``)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets_config = pytest.importorskip("datasets.config")
    import huggingface_hub.constants as hub_constants

    # The libraries read these at import time; patch them too in case they were imported already.
    monkeypatch.setattr(datasets_config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True, raising=False)


def quiet_run(model: Path, data: Path, out: Path, **fields: Any) -> Any:
    """``execute_run`` of ``model`` on ``data`` into ``out`` with the other RunConfig ``fields``
    (attacks, references, n_bootstrap, ...): no progress bars, no blind baseline."""
    from imprint.run import RunConfig, execute_run

    return execute_run(
        RunConfig(model=str(model), data=str(data), out=out, progress=False, blind=False, **fields)
    )


def quiet_wikimia_run(tmp_path: Path, model: Path, **fields: Any) -> Any:
    """:func:`quiet_run` on WikiMIA length 32, cache ``tmp_path/cache.sqlite``, output
    ``tmp_path/run``."""
    data = WIKIMIA / "WikiMIA_length32.jsonl"
    return quiet_run(model, data, tmp_path / "run", cache=tmp_path / "cache.sqlite", **fields)


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
