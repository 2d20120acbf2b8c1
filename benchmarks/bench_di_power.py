"""How many documents dataset inference needs: the power of the test ``imprint run --unit
document`` runs, and of its verdict, by simulation, against shifts of 0.3, 0.5 and 0.8 SD.

Each simulated data set has two sets of n documents with 3 attack features per document (i.i.d.
normal, one sequence a document: :func:`imprint.documents.di_calibration.simulated_set`); the
suspect set's first feature is shifted by ``shift`` standard deviations of a document's score
(document AUC Phi(shift / sqrt 2)). Each goes through the run's own code:
:func:`~imprint.documents.dataset_inference.dataset_inference` (halves, the linear combination
learnt on one half, clipping, the one-sided Welch test at alpha 0.05), and for the verdict also
the false-positive check (the test on two halves of the validation set) and the power table at
the full size (20 random halvings), then :func:`~imprint.documents.di_verdict.verdict`.

Prints, per shift: the share flagged at each size of a grid (the test's power), the fewest
documents per set whose power reaches 80 % (simulated; and the noncentral-t formula the verdict
uses, :func:`~imprint.documents.di_verdict.docs_for_power`, for the t-test on the halves with
known weights), and the share of data sets whose verdict is *trained on* (a flag counts only when
the power table flags >= 80 % of the halvings: the verdict asks for that power).

Run: nice -n 10 .venv/bin/python benchmarks/bench_di_power.py [--sims 200] [--verdict-sims 100]
     [--shifts 0.3 0.5 0.8] [--out bench-di-power.json]
     nice -n 10 .venv/bin/python benchmarks/bench_di_power.py --table a.json b.json  (no runs)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

POWER = 0.8
GRID = (0.6, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)  # multiples of the formula's size
VERDICT_GRID = (1.0, 1.5, 2.0, 2.5)  # multiples of the simulated test's size


def one_set(rng: np.random.Generator, n: int, shift: float) -> tuple[Any, ...]:
    from imprint.documents.di_calibration import simulated_set

    xs, gs = simulated_set(rng, n_docs=n, seqs_per_doc=1, rho=0.0, shift=shift)
    xv, gv = simulated_set(rng, n_docs=n, seqs_per_doc=1, rho=0.0)
    return xs, xv, gs, gv


def flag_rate(n: int, shift: float, sims: int, seed: int) -> float:
    """The share of ``sims`` data sets the test flags (its power; its size at shift 0)."""
    from imprint.documents.dataset_inference import dataset_inference

    rng = np.random.default_rng([seed, n, round(shift * 100)])
    return float(
        np.mean([dataset_inference(*one_set(rng, n, shift), seed=i).flagged for i in range(sims)])
    )


def verdict_rate(n: int, shift: float, sims: int, seed: int) -> dict[str, float]:
    """Shares of ``sims`` data sets flagged and whose verdict is each of the three states."""
    from imprint.documents.dataset_inference import dataset_inference, p_value_curve
    from imprint.documents.di_verdict import verdict

    rng = np.random.default_rng([seed, n, round(shift * 100), 1])
    states: list[str] = []
    flagged = 0
    for i in range(sims):
        xs, xv, gs, gv = one_set(rng, n, shift)
        test = dataset_inference(xs, xv, gs, gv, seed=i)
        half = np.isin(gv, rng.permutation(np.unique(gv))[: n // 2])
        check = dataset_inference(xv[half], xv[~half], gv[half], gv[~half], seed=i)
        curve = p_value_curve(xs, xv, gs, gv, sizes=[n], seed=i)
        states.append(verdict(test, check, curve).state)
        flagged += test.flagged
    out = {s: states.count(s) / sims for s in ("trained on", "not detected", "inconclusive")}
    return {"flagged": flagged / sims, **out}


def first_reaching(rates: dict[int, float], level: float) -> int | None:
    """The smallest size from which every measured rate is >= ``level``."""
    found = None
    for n in sorted(rates, reverse=True):
        if rates[n] < level:
            break
        found = n
    return found


def smoothed_size(rates: dict[int, float], level: float) -> int | None:
    """The size where a probit line through the measured rates, Phi^-1(rate) = a + b sqrt(n)
    (the t-test's power is about Phi(d sqrt(n) / 2 - z_alpha)), reaches ``level``: steadier than
    the first grid size that does (each rate has a binomial s.e. of about 0.03)."""
    from scipy.stats import norm

    pts = [(math.sqrt(n), norm.ppf(r)) for n, r in rates.items() if 0.02 < r < 0.98]
    if len(pts) < 2:
        return None
    b, a = np.polyfit(*zip(*pts, strict=True), 1)
    return None if b <= 0 else math.ceil(((norm.ppf(level) - a) / b) ** 2)


def run_shift(shift: float, sims: int, verdict_sims: int, seed: int) -> dict[str, Any]:
    from imprint.documents.di_verdict import docs_for_power

    formula = docs_for_power(shift, POWER)
    assert formula is not None
    sizes = sorted({max(8, 2 * round(formula * f / 2)) for f in GRID} | {20})
    power = {}
    for n in sizes:
        power[n] = flag_rate(n, shift, sims, seed)
        print(f"  shift {shift}, {n} documents per set: flagged {power[n]:.3f}", flush=True)
    needed = first_reaching(power, POWER)
    base = needed or sizes[-1]
    v_sizes = sorted({20, *(2 * round(base * f / 2) for f in VERDICT_GRID)})
    verdicts = {}
    for n in v_sizes:
        verdicts[n] = verdict_rate(n, shift, verdict_sims, seed)
        print(f"  shift {shift}, {n} documents per set: verdicts {verdicts[n]}", flush=True)
    trained = {n: v["trained on"] for n, v in verdicts.items()}
    return {
        "shift_sd": shift,
        "document_auc": 0.5 * (1 + math.erf(shift / 2)),  # Phi(shift / sqrt 2)
        "formula_docs_for_80": formula,
        "simulated_docs_for_80": needed,
        "smoothed_docs_for_80": smoothed_size(power, POWER),
        "power": power,
        "verdicts": verdicts,
        "docs_for_80_trained_on": first_reaching(trained, POWER),
        "smoothed_docs_for_80_trained_on": smoothed_size(trained, POWER),
    }


def reread(row: dict[str, Any]) -> dict[str, Any]:
    """A saved row (JSON keys are strings) with sizes as ints and the probit sizes redone."""
    power = {int(n): v for n, v in row["power"].items()}
    verdicts = {int(n): v for n, v in row["verdicts"].items()}
    trained = {n: v["trained on"] for n, v in verdicts.items()}
    return {**row, "power": power, "verdicts": verdicts,
            "smoothed_docs_for_80": smoothed_size(power, POWER),
            "smoothed_docs_for_80_trained_on": smoothed_size(trained, POWER)}  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    """Documents per set for 80 % power, per shift: the test (first grid size reaching it, and
    the probit line's), the formula, and 'trained on' in 80 % of data sets; then the shares at
    20 documents per set."""
    lines = [
        "| shift (SD) | document AUC | test: 80 % flagged (grid; probit line) | formula | "
        "verdict 'trained on' in 80 % (grid; probit line) | at 20 per set: flagged / trained on |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        at20 = r["verdicts"].get(20) or r["verdicts"].get("20") or {}
        flag20 = r["power"].get(20, r["power"].get("20", math.nan))  # 200 data sets, not 60
        trained20 = at20.get("trained on", math.nan)
        lines.append(
            f"| {r['shift_sd']:g} | {r['document_auc']:.2f} | {r['simulated_docs_for_80']}; "
            f"{r['smoothed_docs_for_80']} | {r['formula_docs_for_80']} | "
            f"{r['docs_for_80_trained_on']}; {r['smoothed_docs_for_80_trained_on']} | "
            f"{flag20:.2f} / {trained20:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=200, help="data sets per size (the test)")
    parser.add_argument("--verdict-sims", type=int, default=100, help="per size (the verdict)")
    parser.add_argument("--shifts", type=float, nargs="+", default=[0.3, 0.5, 0.8])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--table", type=Path, nargs="+", default=None,
        help="no simulation: the table of earlier runs' --out files (one shift each, say)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.table is not None:
        print(table([reread(r) for path in args.table for r in json.loads(path.read_text())]))
        return
    rows = []
    for shift in args.shifts:
        t0 = time.perf_counter()
        rows.append(run_shift(shift, args.sims, args.verdict_sims, args.seed))
        print(f"shift {shift}: {time.perf_counter() - t0:.0f} s", flush=True)
        print(json.dumps(rows[-1], indent=1), flush=True)
    print(table(rows))
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
