"""The device-dependent paths of the gray-box backend: memory-planned batches, the compiled
reduction, pinned transfers. The CPU halves run everywhere; the CUDA halves need a GPU and are
skipped, with that reason, where there is none (CI has none; they run in benchmarks' device job).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.backends.base import ScoreRequest
from imprint.backends.budget import (
    CPU_TOKEN_BUDGET,
    MAX_AUTO_BUDGET,
    activation_bytes_per_token,
    auto_token_budget,
)
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.reduce import _fused_stats, chunk_rows, reduce_logits, to_host

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
TEXTS = ["Kraków leży nad Wisłą.", "北京是中国的首都。", "The quick brown fox " * 30, "Ж"]


def test_activation_bytes_hand_computed() -> None:
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=2048, intermediate_size=8192)
    # bf16: 2 * (8 * 2048 + 4 * 8192) = 98,304 bytes, plus 4 * 2048 for the mask row
    assert activation_bytes_per_token(config, dtype_bytes=2, max_length=2048) == 98_304 + 8_192


def test_auto_budget_on_cpu_is_the_fixed_default(tiny_model_dir: Path) -> None:
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    assert backend.token_budget == CPU_TOKEN_BUDGET
    assert auto_token_budget(backend.model, torch.device("cpu"), max_length=64) == 4096
    assert backend.describe()["token_budget"] == CPU_TOKEN_BUDGET


def test_chunk_rows_on_cpu_stays_near_32_mib() -> None:
    assert chunk_rows(49152) == 8 * 1024 * 1024 // 49152
    assert chunk_rows(10**9) == 1  # never zero rows


def test_fused_formulas_equal_eager_on_cpu() -> None:
    """The out-of-place version compiled on CUDA computes the same statistics (here eager)."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 997, generator=gen) * 4
    logits[3, :500] = -torch.inf  # masked vocabulary entries must stay finite
    targets = torch.randint(0, 997, (50,), generator=gen)
    targets[3] = 700
    a, b = reduce_logits(logits, targets), _fused_stats(logits, targets)
    for key in ("logp", "mean_logp", "var_logp"):
        assert torch.isfinite(b[key]).all()
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-4)
    for key in ("rank", "argmax"):
        assert torch.equal(a[key], b[key])


def test_to_host_on_cpu_keeps_integer_statistics_exact() -> None:
    stats = {"logp": torch.tensor([-1.5, -0.25]), "rank": torch.tensor([262_143, 1])}
    host = to_host(stats)
    assert host["rank"].dtype == np.int64 and host["rank"].tolist() == [262_143, 1]
    assert host["logp"].tolist() == [-1.5, -0.25]


@cuda
def test_compiled_reduction_on_cuda_matches_eager() -> None:
    from imprint.backends.reduce import chunk_reducer

    gen = torch.Generator(device="cuda").manual_seed(0)
    for n in (1, 37, 300):  # dynamic shapes: no recompilation per chunk length
        logits = torch.randn(n, 50_000, device="cuda", generator=gen) * 3
        targets = torch.randint(0, 50_000, (n,), device="cuda", generator=gen)
        fused = chunk_reducer(torch.device("cuda"))(logits, targets)
        eager = reduce_logits(logits, targets)
        for key in ("logp", "mean_logp", "var_logp"):
            torch.testing.assert_close(fused[key], eager[key], rtol=1e-4, atol=1e-3)
        assert torch.equal(fused["argmax"], eager["argmax"])
        assert (fused["rank"] - eager["rank"]).abs().max() <= 1  # float ties at most


@cuda
def test_pinned_transfer_on_cuda_round_trips() -> None:
    stats = {
        "logp": torch.tensor([-1.5, -0.25], device="cuda"),
        "rank": torch.tensor([262_143, 1], device="cuda"),
        "argmax": torch.tensor([5, 7], device="cuda"),
    }
    host = to_host(stats)
    assert host["rank"].tolist() == [262_143, 1] and host["argmax"].tolist() == [5, 7]
    assert host["logp"].tolist() == [-1.5, -0.25]


@cuda
def test_cuda_backend_matches_cpu_and_plans_a_larger_budget(tiny_model_dir: Path) -> None:
    cpu = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    gpu = HFLogprobBackend(str(tiny_model_dir), device="cuda", dtype="float32")
    half = HFLogprobBackend(str(tiny_model_dir), device="cuda")  # auto = bf16 on CUDA
    assert gpu.token_budget >= CPU_TOKEN_BUDGET and gpu.token_budget <= MAX_AUTO_BUDGET
    requests = [ScoreRequest(t, None) for t in TEXTS]
    for a, b, c in zip(cpu.score(requests), gpu.score(requests), half.score(requests), strict=True):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logp, b.logp, atol=2e-4)
        np.testing.assert_allclose(a.mean_logp, b.mean_logp, atol=2e-4)
        np.testing.assert_allclose(a.logp, c.logp, atol=0.1)  # bf16 weights and activations
