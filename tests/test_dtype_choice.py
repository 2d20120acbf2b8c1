"""``--dtype auto``: bf16 on CPU only with native bf16 matrix instructions AND a passed accuracy
gate for these weights; every other case stays float32 and says which rule decided. The CPU's
flags and the recorded gates come in through the chooser's parameters (no torch math faked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imprint.backends.dtype_choice import (
    BF16_PATH,
    GATE_SPEARMAN,
    choose_dtype,
    cpu_flags,
    load_gates,
    native_bf16,
    record_gate,
)
from imprint.backends.hf import HFLogprobBackend
from imprint.errors import ConfigError

ZEN4 = frozenset({"fpu", "avx512f", "avx512_bf16", "avx512_vnni"})
SAPPHIRE = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
OLD_X86 = frozenset({"fpu", "sse2", "avx2", "fma"})
COLUMNS = {"loss": 0.99999, "zlib": 0.99995, "min_k": 0.99992, "min_k_pp": 0.99991}
META = {"texts": "120 WikiMIA-64 rows 300-419", "measured": "2026-12-01", "cpu": "test CPU"}


def gate(spearman: dict[str, float], path: str = BF16_PATH) -> dict[str, object]:
    return {"bf16_path": path, "spearman": spearman, **META}


def weights() -> str:
    return "w1"


def test_explicit_dtypes_are_canonical_and_never_gated() -> None:
    def unused() -> str:
        raise AssertionError("an explicit dtype must not fingerprint the weights")

    for asked, dtype in [("bf16", "bfloat16"), ("fp32", "float32"), ("float16", "float16")]:
        choice = choose_dtype(asked, "cpu", unused, flags=OLD_X86, gates={})
        assert (choice.dtype, choice.reason) == (dtype, "requested")
    with pytest.raises(ConfigError, match="unknown dtype 'int4'"):
        choose_dtype("int4", "cpu", unused)


def test_auto_on_cuda_is_bf16() -> None:
    assert choose_dtype("auto", "cuda:0", weights, flags=OLD_X86, gates={}).dtype == "bfloat16"


def test_cpu_without_native_bf16_stays_fp32_without_reading_the_weights() -> None:
    def unused() -> str:
        raise AssertionError("no gate is consulted without native bf16")

    choice = choose_dtype("auto", "cpu", unused, flags=OLD_X86, gates={"w1": gate(COLUMNS)})
    assert choice.dtype == "float32" and "no native bf16 matrix instructions" in choice.reason


def test_native_bf16_without_a_recorded_gate_stays_fp32() -> None:
    choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates={"other": gate(COLUMNS)})
    assert choice.dtype == "float32"
    assert "avx512_bf16" in choice.reason and "no bf16 accuracy gate" in choice.reason


def test_passed_gate_on_native_bf16_picks_bf16_and_says_why() -> None:
    for flags, unit in [(ZEN4, "avx512_bf16"), (SAPPHIRE, "amx_bf16")]:
        choice = choose_dtype("auto", "cpu", weights, flags=flags, gates={"w1": gate(COLUMNS)})
        assert choice.dtype == "bfloat16"
        assert unit in choice.reason and "passed" in choice.reason
        assert "min_k_pp 0.99991" in choice.reason and "120 WikiMIA-64" in choice.reason
    assert choice.describe() == {"requested": "auto", "dtype": "bfloat16", "reason": choice.reason}


def test_one_failing_column_keeps_fp32_and_names_it() -> None:
    failing = {**COLUMNS, "min_k": 0.9989}
    choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates={"w1": gate(failing)})
    assert choice.dtype == "float32"
    assert "failed" in choice.reason and "min_k Spearman vs float32 0.99890" in choice.reason


def test_a_failed_gate_says_when_even_rounded_weights_cannot_pass() -> None:
    failing = {**gate({**COLUMNS, "min_k_pp": 0.9988}), "floor": 0.99988}
    choice = choose_dtype("auto", "cpu", weights, flags=SAPPHIRE, gates={"w1": failing})
    assert choice.dtype == "float32"
    assert "bf16-rounded weights reaches only 0.99988" in choice.reason
    passing_floor = {**gate({**COLUMNS, "min_k_pp": 0.9988}), "floor": 0.99995}
    choice = choose_dtype("auto", "cpu", weights, flags=SAPPHIRE, gates={"w1": passing_floor})
    assert "rounded weights" not in choice.reason  # only said when it explains the failure


def test_a_gate_of_an_older_bf16_path_does_not_count() -> None:
    stale = {"w1": gate(COLUMNS, path="bf16-head/0")}
    choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates=stale)
    assert choice.dtype == "float32" and "no bf16 accuracy gate" in choice.reason


def test_unknown_weights_stay_fp32() -> None:
    choice = choose_dtype("auto", "cpu", lambda: None, flags=ZEN4, gates={"w1": gate(COLUMNS)})
    assert choice.dtype == "float32"


def test_recorded_gate_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "gates.py"
    record_gate("w1", "smollm2-135m", COLUMNS, META, path=path)
    record_gate("w2", "other", {**COLUMNS, "loss": GATE_SPEARMAN - 1e-4}, META, path=path)
    gates = load_gates(path)
    assert gates["w1"]["passed"] is True and gates["w2"]["passed"] is False
    assert choose_dtype("auto", "cpu", weights, flags=ZEN4, gates=gates).dtype == "bfloat16"
    choice = choose_dtype("auto", "cpu", lambda: "w2", flags=ZEN4, gates=gates)
    assert choice.dtype == "float32" and "loss" in choice.reason


def test_cpu_flags_read_x86_and_arm_cpuinfo(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\nbugs\t: x\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert native_bf16(cpu_flags(x86)) == "avx512_bf16"
    assert native_bf16(cpu_flags(arm)) == "bf16"
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_manifest_records_the_choice(tiny_model_dir: Path) -> None:
    """A tiny model has no recorded gate: auto is float32 on this CPU whatever its flags, and the
    manifest entry says what was asked, what was loaded and why."""
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    entry = backend.describe()
    assert entry["dtype"]["requested"] == "auto" and entry["dtype"]["dtype"] == "float32"
    assert entry["dtype"]["reason"].startswith("auto on CPU: float32")
    assert (entry["head"], entry["reduction"], entry["blocks"]) == ("float32", "eager", "eager")
    explicit = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bf16").describe()
    assert explicit["dtype"] == {"requested": "bf16", "dtype": "bfloat16", "reason": "requested"}
    assert (explicit["head"], explicit["reduction"]) == ("bfloat16", "compiled")
    assert explicit["blocks"] == "compiled"
