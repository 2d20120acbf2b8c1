"""What ``--dtype auto`` loads a local model in, and why (recorded in the manifest).

On CUDA auto is bfloat16. On CPU it is bfloat16 only when both hold:

1. the CPU multiplies bf16 matrices natively (``amx_bf16`` or ``avx512_bf16`` on x86, ``bf16``
   on Arm): elsewhere bf16 is emulated and slower than float32;
2. these weights passed the accuracy gate: every score column of the gray-box battery (loss,
   zlib, min_k, min_k_pp) in bf16 ranks held-out WikiMIA texts as float32 does, Spearman >=
   :data:`GATE_SPEARMAN` per column. ``benchmarks/bench_bf16.py --record-gate`` measures it and
   writes the result to ``bf16_gates.py`` next to this module (a Python literal, so it ships in
   the wheel), keyed by the weights' content fingerprint, so a run knows without a float32 pass
   of its own.

A gate recorded for another bf16 scoring path (:data:`BF16_PATH`) counts as not recorded.
Anything else, including weights never gated, stays float32, and the reason says which rule
decided. The CPU's flags come through :func:`cpu_flags` (a parameter in tests).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError

GATE_SPEARMAN = 0.9999
GATE_FILE = Path(__file__).with_name("bf16_gates.py")
_GATE_HEADER = (
    '"""bf16 accuracy gates by weights fingerprint, written by benchmarks/bench_bf16.py '
    '--record-gate\n(read by imprint.backends.dtype_choice; edit by re-measuring)."""\n\nGATES = '
)
# bump when the bf16 path changes what it computes: gates measured on the old one no longer hold
BF16_PATH = "bf16-head+compiled-blocks+fused-reduce/2"
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 AMX, x86 AVX-512, Arm (BF16 ext)
CANONICAL = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
CANONICAL |= {"float16": "float16", "fp16": "float16"}


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


def load_gates(path: Path = GATE_FILE) -> dict[str, Any]:
    """Recorded gate results by weights fingerprint ({} when none are recorded)."""
    if not path.exists():
        return {}
    _, _, literal = path.read_text().partition("GATES = ")
    return dict(ast.literal_eval(literal)) if literal.strip() else {}


def choose_dtype(
    requested: str,
    device: str,
    weights: Callable[[], str | None],
    *,
    flags: frozenset[str] | None = None,
    gates: Mapping[str, Any] | None = None,
) -> DtypeChoice:
    """The dtype to load in on ``device`` (already resolved: cpu, cuda or cuda:N).

    ``weights()`` gives the weights' content fingerprint (None when unknown); it is called only
    when the gate decides, since fingerprinting reads the weight files once.
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
    return _gated(unit, weights(), load_gates() if gates is None else gates)


def _gated(unit: str, fingerprint: str | None, gates: Mapping[str, Any]) -> DtypeChoice:
    gate = gates.get(fingerprint) if fingerprint else None
    if gate is None or gate.get("bf16_path") != BF16_PATH:
        return DtypeChoice(
            "auto",
            "float32",
            f"auto on CPU: float32; the CPU has {unit}, but no bf16 accuracy gate is recorded for "
            f"these weights under the current bf16 path (benchmarks/bench_bf16.py --record-gate)",
        )
    spearman: dict[str, float] = gate["spearman"]
    worst = min(spearman, key=lambda k: spearman[k])
    where = f"{gate['texts']} held-out texts, measured {gate['measured']} on {gate['cpu']}"
    if spearman[worst] >= GATE_SPEARMAN:
        return DtypeChoice(
            "auto",
            "bfloat16",
            f"auto on CPU: bfloat16; the CPU has {unit} and bf16 passed the accuracy gate "
            f"(lowest Spearman vs float32: {worst} {spearman[worst]:.5f} >= {GATE_SPEARMAN}; "
            f"{where})",
        )
    floor = (
        f"; even float32 arithmetic on bf16-rounded weights reaches only {gate['floor']:.5f}"
        if gate.get("floor") is not None and gate["floor"] < GATE_SPEARMAN
        else ""
    )
    return DtypeChoice(
        "auto",
        "float32",
        f"auto on CPU: float32; the CPU has {unit}, but bf16 failed the accuracy gate ({worst} "
        f"Spearman vs float32 {spearman[worst]:.5f} < {GATE_SPEARMAN}; {where}{floor})",
    )


def record_gate(
    fingerprint: str,
    spec: str,
    spearman: Mapping[str, float],
    meta: Mapping[str, Any],
    *,
    path: Path = GATE_FILE,
) -> dict[str, Any]:
    """Write one gate result into ``path`` (other fingerprints kept); returns it."""
    entry = {
        "spec": spec,
        "bf16_path": BF16_PATH,
        "spearman": {k: round(float(v), 6) for k, v in spearman.items()},
        "passed": min(spearman.values()) >= GATE_SPEARMAN,
        **meta,
    }
    gates = load_gates(path)
    gates[fingerprint] = entry
    path.write_text(_GATE_HEADER + _literal(gates) + "\n")
    return entry


def _literal(value: Any, indent: int = 0) -> str:
    """``value`` as a Python literal laid out as ruff formats it (sorted keys, one per line,
    trailing commas), so the recorded file passes ``ruff format --check`` unchanged."""
    if isinstance(value, Mapping):
        pad = " " * indent
        items = "".join(
            f"{pad}    {json.dumps(str(k), ensure_ascii=False)}: {_literal(v, indent + 4)},\n"
            for k, v in sorted(value.items())
        )
        return "{\n" + items + pad + "}" if items else "{}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)  # bool, int, float
