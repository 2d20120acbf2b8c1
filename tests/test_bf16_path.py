"""The CPU bf16 scoring path: float32 output head, compiled fused reduction (inductor's C++
kernels), eager fallback; float32 models keep the eager reduction and their fingerprint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.backends.base import ScoreRequest
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.reduce import _checked, chunk_reducer, chunk_rows, reduce_logits, uses_fused

TEXTS = ["Kraków leży nad Wisłą.", "The quick brown fox jumps over the lazy dog " * 4, "北京"]


def test_compiled_cpu_reduction_matches_eager() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(40, 1009, generator=gen) * 4
    logits[5, :600] = -torch.inf  # masked vocabulary entries stay finite
    targets = torch.randint(0, 1009, (40,), generator=gen)
    targets[5] = 800
    fused = chunk_reducer(torch.device("cpu"), torch.bfloat16)
    assert fused is not reduce_logits
    a, b = reduce_logits(logits, targets), fused(logits, targets)
    for key in ("logp", "mean_logp", "var_logp", "top1_logp"):
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-4)
    for key in ("rank", "argmax"):
        assert torch.equal(a[key], b[key])


def test_float32_and_no_compile_stay_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert chunk_reducer(cpu, torch.float32) is reduce_logits
    assert chunk_rows(49152, cpu) == 8 * 1024 * 1024 // 49152  # float32 chunks unchanged
    assert chunk_rows(49152, cpu, fused=True) < chunk_rows(49152, cpu)
    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")
    assert not uses_fused(cpu, torch.bfloat16)
    assert chunk_reducer(cpu, torch.bfloat16) is reduce_logits


def test_a_compiler_failure_falls_back_to_eager_once() -> None:
    calls = []

    def broken(logits: torch.Tensor, targets: torch.Tensor) -> None:
        calls.append(1)
        raise RuntimeError("no C++ compiler")

    reduce = _checked(broken)
    logits, targets = torch.randn(3, 11), torch.tensor([1, 2, 3])
    with pytest.warns(UserWarning, match="reducing eagerly"):
        out = reduce(logits, targets)
    torch.testing.assert_close(out["logp"], reduce_logits(logits, targets)["logp"])
    reduce(logits, targets)
    assert calls == [1]  # not retried


def test_bf16_model_on_cpu_scores_with_a_float32_head(tiny_model_dir: Path) -> None:
    fp32 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    bf16 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert not fp32.float32_head and bf16.float32_head
    hidden = torch.randn(4, bf16.model.config.hidden_size).bfloat16()
    assert bf16.head(hidden).dtype == torch.float32
    assert fp32.fingerprint != bf16.fingerprint
    a = fp32.score([ScoreRequest(t) for t in TEXTS])
    b = bf16.score([ScoreRequest(t) for t in TEXTS])
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.token_ids, y.token_ids)
        np.testing.assert_allclose(x.logp, y.logp, atol=0.05)
        np.testing.assert_allclose(x.mean_logp, y.mean_logp, atol=0.05)
