"""The CPU bf16 scoring path: compiled transformer blocks (installed for the scoring pass only),
bf16 output head (a float32 one as an option), compiled fused reduction (inductor's C++ kernels),
eager fallbacks; float32 models keep eager blocks, the eager reduction and their fingerprint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

from imprint.backends.base import ScoreRequest, TokenStats
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.reduce import _checked, chunk_reducer, chunk_rows, reduce_logits, uses_fused
from imprint.errors import ConfigError

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
    assert chunk_rows(49152, cpu, fused=True) == 256  # bf16 head: 256-row GEMMs (see reduce.py)
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


def _scores(backend: HFLogprobBackend) -> list[TokenStats]:
    return backend.score([ScoreRequest(t) for t in TEXTS])


def test_bf16_model_on_cpu_scores_with_compiled_blocks_and_a_bf16_head(
    tiny_model_dir: Path,
) -> None:
    fp32 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    bf16 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert not fp32.cpu_reduced and bf16.cpu_reduced and not bf16.float32_head
    hidden = torch.randn(4, bf16.model.config.hidden_size).bfloat16()
    assert bf16.head(hidden).dtype == torch.bfloat16
    assert fp32.fingerprint != bf16.fingerprint
    a, b = _scores(fp32), _scores(bf16)
    assert fp32.describe()["blocks"] == "eager" and bf16.describe()["blocks"] == "compiled"
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.token_ids, y.token_ids)
        np.testing.assert_allclose(x.logp, y.logp, atol=0.05)
        np.testing.assert_allclose(x.mean_logp, y.mean_logp, atol=0.05)
    # compiled only while scoring: generation and the next-word tree see the class's forward
    assert all("forward" not in block.__dict__ for block in bf16.blocks.blocks)


def test_compiled_blocks_score_as_the_eager_ones(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf16 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    compiled = _scores(bf16)
    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")
    assert bf16.describe()["blocks"] == "eager (IMPRINT_NO_COMPILE=1)"
    eager = _scores(bf16)
    for x, y in zip(compiled, eager, strict=True):
        # fused kernels round to bf16 at fewer points than eager ones: close, not equal
        np.testing.assert_allclose(x.logp, y.logp, atol=0.05)


def test_a_float32_head_is_an_option_with_its_own_fingerprint(tiny_model_dir: Path) -> None:
    default = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    option = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    option.float32_head = True
    hidden = torch.randn(4, option.model.config.hidden_size).bfloat16()
    assert option.head(hidden).dtype == torch.float32
    assert option.fingerprint != default.fingerprint


def test_blocks_that_fail_to_compile_are_an_error_naming_the_switch(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # compiled and eager bf16 blocks score differently: no silent change of mode
    bf16 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    compiled_fingerprint = bf16.fingerprint
    # the process-wide reduction is compiled before torch.compile breaks: only the blocks fail
    reduce = chunk_reducer(torch.device("cpu"), torch.bfloat16)
    reduce(torch.randn(3, 11), torch.tensor([1, 2, 3]))

    def broken(fn: object, **kwargs: object) -> object:
        def run(*args: object, **kw: object) -> None:
            raise BackendCompilerFailed(fn, RuntimeError("no C++ compiler"), None)

        return run

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.raises(ConfigError, match="IMPRINT_NO_COMPILE=1"):
        _scores(bf16)
    assert all("forward" not in block.__dict__ for block in bf16.blocks.blocks)
    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")  # the switch the error names
    assert bf16.describe()["blocks"] == "eager (IMPRINT_NO_COMPILE=1)"
    assert bf16.fingerprint != compiled_fingerprint  # eager scores under their own key
    assert all(np.isfinite(x.logp).all() for x in _scores(bf16))
