"""The calibration suite: every interval, p-value and verdict imprint reports, on simulated data
whose truth is known (:mod:`imprint.calibration`).

    .venv/bin/python benchmarks/bench_calibration.py            # full: more simulations, minutes
    .venv/bin/python benchmarks/bench_calibration.py --quick    # the CI counts, seeded
    .venv/bin/python benchmarks/bench_calibration.py --only document_shi sequence_clustered
    .venv/bin/python benchmarks/bench_calibration.py --k-sweep 1000   # the TPR resolution rule

Prints one table (figure / method / nominal / measured / n / tolerance / pass) in Markdown and
writes it as JSON with ``--out``. Tolerances come from the number of simulations (3 binomial or
sample standard errors), not from a guess. Rows marked OLD run the behaviour before issue 20 and
should fail (the defect reproduced). Exit status 1 when a row is not as expected.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from imprint.calibration import SUITE, Row, run_suite


def _num(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| figure | method | nominal | measured | n | tolerance | pass |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "yes" if r.passed else "no"
        if not r.expect_pass:
            verdict += (
                " (old behaviour: expected to fail)" if not r.passed else " (old: NOT reproduced)"
            )
        measured = f"{r.measured:.4f}" if r.kind == "mean" else _num(r.measured)
        lines.append(
            f"| {r.figure} | {r.method} | {_num(r.nominal)} | {measured} | {r.n} | "
            f"{r.tolerance} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CI simulation counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", choices=[e.name for e in SUITE])
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    sweep = "instead: TPR coverage at the edge for k = 1-8 false positives allowed"
    parser.add_argument("--k-sweep", type=int, metavar="N_SIMS", help=sweep)
    args = parser.parse_args(argv)
    started = time.time()
    if args.k_sweep:
        from imprint.calibration.edges import rows_k_sweep

        rows = rows_k_sweep(args.k_sweep, args.seed)
    else:
        rows = run_suite(quick=args.quick, seed=args.seed, only=args.only)
    print(table(rows))
    bad = [r for r in rows if not r.ok]
    mode = "quick" if args.quick else "full"
    print(f"\n{len(rows)} rows ({mode}, seed {args.seed}), {len(bad)} not as expected, "
          f"{time.time() - started:.0f} s")  # fmt: skip
    if args.out:
        payload = {"mode": mode, "seed": args.seed, "rows": [r.to_dict() for r in rows]}
        args.out.write_text(json.dumps(payload, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
