"""bf16 accuracy gates by weights fingerprint, written by benchmarks/bench_bf16.py --record-gate
(read by imprint.backends.dtype_choice; edit by re-measuring)."""

GATES = {
    "2247cc9832e20442": {
        "bf16_path": "bf16-head+compiled-blocks+fused-reduce/2",
        "command": "benchmarks/bench_bf16.py --record-gate",
        "cpu": "Intel(R) Xeon(R) Processor (native bf16: amx_bf16)",
        "floor": 0.999889,
        "measured": "2026-12-01",
        "passed": False,
        "spearman": {
            "loss": 0.999882,
            "min_k": 0.999833,
            "min_k_pp": 0.998805,
            "zlib": 0.999875,
            "zlib_char": 0.99984,
        },
        "spec": "smollm2-135m",
        "texts": "120 WikiMIA-64 rows 300-419",
    },
}
