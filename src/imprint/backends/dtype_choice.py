"""What ``--dtype auto`` loads a local model in, and why (recorded in the manifest and shown in
the report's provenance table).

On CUDA auto is bfloat16. On CPU it is bfloat16 only when all three hold:

1. the CPU multiplies bf16 matrices natively (``amx_bf16`` or ``avx512_bf16`` on x86, ``bf16``
   on Arm): elsewhere bf16 is emulated and slower than float32;
2. these weights' family passed the bf16 accuracy gate on this CPU kind
   (:mod:`imprint.backends.bf16_gates`: per score column, AUC within 0.005 of float32's, TPR at
   the lowest measurable FPR within one text, Spearman >= 0.998 on WikiMIA, Chinese, Russian and
   long texts), recorded in ``bf16_gate_results.json`` by ``benchmarks/bench_bf16.py
   --record-gate``;
3. a quick probe measured on this machine (:mod:`imprint.backends.dtype_probe`: the model's
   matrix products in both dtypes, about a second, cached per machine and model) finds bf16 at
   least :data:`PROBE_MIN_SPEEDUP` times faster: a busy or throttled machine, or a torch build
   without fast bf16 kernels, keeps float32.

A gate recorded for another bf16 scoring path (:data:`BF16_PATH`) counts as not recorded.
Anything else stays float32, and the reason says which rule decided. ``--dtype float32``
reproduces float32 results exactly; the two dtypes never share cached answers (the dtype and the
bf16 path are part of the backend's fingerprint). The CPU's flags, the recorded gates and the
probe come in through :func:`choose_dtype`'s parameters in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.backends.bf16_gates import BF16_PATH, find_gate, load_results, summary
from imprint.errors import ConfigError

__all__ = ["BF16_PATH", "DtypeChoice", "choose_dtype", "cpu_flags", "native_bf16"]

NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 AMX, x86 AVX-512, Arm (BF16 ext)
CANONICAL = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
CANONICAL |= {"float16": "float16", "fp16": "float16"}
# bf16 must beat float32 by this much on the probe: the compiled bf16 path also pays a few
# seconds of compilation per process, and the probe's products are only most of a forward
PROBE_MIN_SPEEDUP = 1.25

#: probe(fingerprint, dims) -> bf16 speed-up over float32 on this machine
Probe = Callable[[str, Mapping[str, int]], float]


@dataclass(frozen=True)
class DtypeChoice:
    """The dtype a model was loaded in: what was asked, what was chosen and the rule's reason."""

    requested: str
    dtype: str  # float32, bfloat16 or float16
    reason: str

    def describe(self) -> dict[str, str]:
        return {"requested": self.requested, "dtype": self.dtype, "reason": self.reason}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (x86 ``flags``, Arm ``Features``); empty where not readable."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def native_bf16(flags: frozenset[str]) -> str | None:
    """The first native bf16 matrix feature among ``flags``, or None."""
    return next((f for f in NATIVE_BF16_FLAGS if f in flags), None)


def choose_dtype(
    requested: str,
    device: str,
    weights: Callable[[], str | None],
    *,
    flags: frozenset[str] | None = None,
    gates: Mapping[str, Any] | None = None,
    probe: Probe | None = None,
) -> DtypeChoice:
    """The dtype to load in on ``device`` (already resolved: cpu, cuda or cuda:N).

    ``weights()`` gives the weights' content fingerprint (None when unknown); it is called only
    when the gate decides, since fingerprinting reads the weight files once. ``gates`` are the
    recorded families (:func:`~imprint.backends.bf16_gates.load_results`), ``probe`` the speed
    probe (:func:`~imprint.backends.dtype_probe.cached_speedup`, passed by
    :func:`~imprint.backends.models.choose_model_dtype`).
    """
    if requested != "auto":
        if requested not in CANONICAL:
            raise ConfigError(
                f"unknown dtype {requested!r}; use auto, float32, bfloat16 or float16"
            )
        return DtypeChoice(requested, CANONICAL[requested], "requested")
    if device.startswith("cuda"):
        return DtypeChoice("auto", "bfloat16", "auto on CUDA: bf16 tensor cores")
    unit = native_bf16(cpu_flags() if flags is None else flags)
    if unit is None:
        why = "this CPU has no native bf16 matrix instructions (no amx_bf16/avx512_bf16/bf16 flag)"
        return DtypeChoice("auto", "float32", f"auto on CPU: float32, {why}")
    if probe is None:  # callers that load models pass the cached probe (models.py)
        raise ValueError("choose_dtype needs a speed probe to decide auto on a bf16 CPU")
    return _gated(unit, weights(), load_results() if gates is None else gates, probe)


def _gated(
    unit: str, fingerprint: str | None, families: Mapping[str, Any], probe: Probe
) -> DtypeChoice:
    def fp32(why: str) -> DtypeChoice:
        why = f"auto on CPU: float32; the CPU has {unit}, but {why}"
        return DtypeChoice("auto", "float32", why)

    found = find_gate(families, fingerprint, unit)
    if found is None or found[2].get("bf16_path") != BF16_PATH:
        return fp32(
            f"no bf16 accuracy gate is recorded for these weights on {unit} CPUs under the "
            "current bf16 path (benchmarks/bench_bf16.py --record-gate measures one)"
        )
    family, record, gate = found
    where = f"{gate['texts']}; measured {gate['measured']} on {gate['cpu']}"
    if not gate["passed"]:
        failed = sorted(c for c, e in gate["columns"].items() if not e["passed"])
        return fp32(
            f"bf16 failed the accuracy gate for {family} on {unit} (columns {', '.join(failed)}; "
            f"{summary(gate)}; {where})"
        )
    speedup = probe(fingerprint or "", record["dims"])
    measured = f"bf16 ran the model's matrix products {speedup:.2f}x as fast as float32 here"
    if speedup < PROBE_MIN_SPEEDUP:
        return fp32(f"{measured} (< {PROBE_MIN_SPEEDUP}x needed)")
    return DtypeChoice(
        "auto",
        "bfloat16",
        f"auto on CPU: bfloat16; the CPU has {unit}, {family} passed the bf16 accuracy gate on "
        f"{unit} ({summary(gate)}; {where}) and {measured}; --dtype float32 reproduces float32",
    )
