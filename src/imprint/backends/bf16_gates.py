"""bf16 accuracy gates by weights fingerprint, written by benchmarks/bench_bf16.py --record-gate
(read by imprint.backends.dtype_choice; edit by re-measuring)."""

GATES = {
    "2247cc9832e20442": {
        "bf16_path": "fp32-head+fused-reduce/1",
        "command": "benchmarks/bench_bf16.py --record-gate",
        "cpu": "AMD EPYC (native bf16: avx512_bf16)",
        "measured": "2026-12-01",
        "passed": False,
        "spearman": {
            "loss": 0.999847,
            "min_k": 0.999111,
            "min_k_pp": 0.996257,
            "zlib": 0.999701,
            "zlib_char": 0.99966,
        },
        "spec": "smollm2-135m",
        "texts": "120 WikiMIA-64 rows 300-419",
    },
}
