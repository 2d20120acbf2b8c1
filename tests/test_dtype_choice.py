"""``--dtype auto``: bf16 on CPU only with native bf16 matrix instructions AND a passed accuracy
gate for these weights on this CPU kind AND a probe measuring bf16 faster here; every other case
stays float32 and says which rule decided. The CPU's flags, the recorded gates and the probe come
in through the chooser's parameters (no torch math faked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imprint.backends.bf16_gates import BF16_PATH, GATE_SPEARMAN
from imprint.backends.dtype_choice import PROBE_MIN_SPEEDUP, choose_dtype, cpu_flags, native_bf16
from imprint.backends.hf import HFLogprobBackend
from imprint.errors import ConfigError

ZEN4 = frozenset({"fpu", "avx512f", "avx512_bf16", "avx512_vnni"})
SAPPHIRE = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
OLD_X86 = frozenset({"fpu", "sse2", "avx2", "fma"})
DIMS = {"hidden": 8, "kv": 4, "intermediate": 16, "vocab": 64, "layers": 2}


def column(spearman: float = 0.9995, auc: float = 0.001, tpr: int = 0) -> dict[str, object]:
    passed = spearman >= GATE_SPEARMAN and auc <= 0.005 and tpr <= 1
    return {
        "spearman": {"wiki": spearman, "zh": 0.9999},
        "auc_diff": {"wiki": auc},
        "tpr_diff_texts": {"wiki": tpr},
        "passed": passed,
    }


def families(unit: str = "avx512_bf16", path: str = BF16_PATH, **cols: dict) -> dict:
    columns = {"loss": column(), "min_k_pp": column(0.9991), **cols}
    from imprint.backends.bf16_gates import worst

    gate = {
        "bf16_path": path,
        "passed": all(c["passed"] for c in columns.values()),
        "columns": columns,
        "worst": worst(columns),
        "texts": "120 WikiMIA-64 rows 420-539",
        "measured": "2026-12-07",
        "cpu": "test CPU",
    }
    return {"smollm2-135m": {"fingerprint": "w1", "dims": DIMS, "cpu_kinds": {unit: gate}}}


def weights() -> str:
    return "w1"


def fast(fingerprint: str, dims: object) -> float:
    return 3.0


def test_explicit_dtypes_are_canonical_and_never_gated() -> None:
    def unused() -> str:
        raise AssertionError("an explicit dtype must not fingerprint the weights")

    for asked, dtype in [("bf16", "bfloat16"), ("fp32", "float32"), ("float16", "float16")]:
        choice = choose_dtype(asked, "cpu", unused, flags=OLD_X86, gates={}, probe=fast)
        assert (choice.dtype, choice.reason) == (dtype, "requested")
    with pytest.raises(ConfigError, match="unknown dtype 'int4'"):
        choose_dtype("int4", "cpu", unused)


def test_auto_on_cuda_is_bf16() -> None:
    assert choose_dtype("auto", "cuda:0", weights, flags=OLD_X86, gates={}).dtype == "bfloat16"


def test_cpu_without_native_bf16_stays_fp32_without_reading_the_weights() -> None:
    def unused() -> str:
        raise AssertionError("no gate is consulted without native bf16")

    choice = choose_dtype("auto", "cpu", unused, flags=OLD_X86, gates=families(), probe=fast)
    assert choice.dtype == "float32" and "no native bf16 matrix instructions" in choice.reason


def test_native_bf16_without_a_recorded_gate_stays_fp32() -> None:
    choice = choose_dtype("auto", "cpu", lambda: "other", flags=ZEN4, gates=families(), probe=fast)
    assert choice.dtype == "float32"
    assert "avx512_bf16" in choice.reason and "no bf16 accuracy gate" in choice.reason


def test_a_gate_measured_on_another_cpu_kind_does_not_count() -> None:
    """AMX and AVX-512 bf16 kernels round differently: an avx512_bf16 gate says nothing of AMX."""
    choice = choose_dtype("auto", "cpu", weights, flags=SAPPHIRE, gates=families(), probe=fast)
    assert choice.dtype == "float32" and "on amx_bf16 CPUs" in choice.reason


def test_passed_gate_and_a_faster_probe_pick_bf16_and_say_why() -> None:
    for flags, unit in [(ZEN4, "avx512_bf16"), (SAPPHIRE, "amx_bf16")]:
        gates = families(unit)
        choice = choose_dtype("auto", "cpu", weights, flags=flags, gates=gates, probe=fast)
        assert choice.dtype == "bfloat16"
        assert unit in choice.reason and "smollm2-135m passed" in choice.reason
        assert "lowest Spearman 0.99910 (min_k_pp, wiki)" in choice.reason
        assert "120 WikiMIA-64" in choice.reason and "3.00x as fast" in choice.reason
        assert "--dtype float32" in choice.reason
    assert choice.describe() == {"requested": "auto", "dtype": "bfloat16", "reason": choice.reason}


def test_a_probe_that_finds_bf16_no_faster_keeps_fp32() -> None:
    def slow(fingerprint: str, dims: object) -> float:
        assert fingerprint == "w1" and dims == DIMS  # the model's shapes, from the gate record
        return PROBE_MIN_SPEEDUP - 0.1

    choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates=families(), probe=slow)
    assert choice.dtype == "float32" and "as fast as float32 here" in choice.reason


def test_one_failing_column_keeps_fp32_and_names_it_without_probing() -> None:
    def unused(fingerprint: str, dims: object) -> float:
        raise AssertionError("a failed gate needs no probe")

    for bad in (column(0.9979), column(auc=0.006), column(tpr=2)):
        gates = families(min_k=bad)
        choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates=gates, probe=unused)
        assert choice.dtype == "float32"
        assert "failed the accuracy gate" in choice.reason and "columns min_k;" in choice.reason


def test_a_gate_of_an_older_bf16_path_does_not_count() -> None:
    stale = families(path="bf16-head/0")
    choice = choose_dtype("auto", "cpu", weights, flags=ZEN4, gates=stale, probe=fast)
    assert choice.dtype == "float32" and "no bf16 accuracy gate" in choice.reason


def test_unknown_weights_stay_fp32() -> None:
    choice = choose_dtype("auto", "cpu", lambda: None, flags=ZEN4, gates=families(), probe=fast)
    assert choice.dtype == "float32"


def test_the_shipped_gate_file_reads() -> None:
    """The recorded results parse and name, per family, the weights and the shapes the probe
    times; every recorded gate carries its verdict and the texts it was measured on."""
    from imprint.backends.bf16_gates import load_results

    for record in load_results().values():
        assert set(record["dims"]) == set(DIMS) and record["fingerprint"]
        for gate in record["cpu_kinds"].values():
            assert isinstance(gate["passed"], bool) and gate["texts"] and gate["cpu"]


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
