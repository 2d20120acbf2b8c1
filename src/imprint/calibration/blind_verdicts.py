"""Calibration rows for the blind verdict (:mod:`imprint.diagnostics.blind_verdict`) under no
shift: members and non-members are texts drawn from one word distribution, labels a random
permutation, so every model-less classifier's true AUC is 0.5.

- the run warning (state ``shift``: the strongest classifier's Bonferroni interval above 0.5)
  must fire in at most 2.5 % of data sets (one-sided, family level 0.05);
- the rule it replaces (the point estimate ``|AUC - 0.5| > 0.1``) runs as an OLD row: it fired
  in 12 % (3 classifiers, 50 + 50) in the outside review;
- "an attack beats the text": an attack with no signal (independent noise scores) compared
  with the strongest classifier's out-of-fold scores on the same texts must be called better
  in at most 2.5 % of data sets;
- the share in the ``no_shift`` state is shown for context (how often 50 + 50 texts can rule
  out a shift to AUC 0.6).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from imprint.calibration.baselines import null_texts
from imprint.calibration.core import Row, info_row, size_row

__all__ = ["VERDICT_BLIND", "rows_blind_verdict"]

#: the classifiers of the outside review's 3-classifier simulation (the SoK forest costs ~20 s)
VERDICT_BLIND = ("tfidf_logreg", "date_detector", "greedy_ngrams")
#: the old rule's threshold on the point estimate
OLD_DELTA = 0.1


def null_verdicts(
    n_sims: int,
    seed: int,
    *,
    n_per_class: int = 50,
    baselines: Sequence[str] = VERDICT_BLIND,
    b: int = 200,
) -> dict[str, list[bool]]:
    """Per simulated no-shift data set: whether the warning fired (``new``), whether the old
    point-estimate rule would have (``old``), whether a no-signal attack was said to beat the
    text (``beats``) and whether the state was ``no_shift``."""
    from imprint.diagnostics.blind_suite import (
        blind_suite_warning,
        run_blind_suite,
        selected_summary,
        suite_verdict,
    )
    from imprint.diagnostics.blind_verdict import attack_beats_text

    out: dict[str, list[bool]] = {"new": [], "old": [], "beats": [], "no_shift": []}
    n = 2 * n_per_class
    for i in range(n_sims):
        rng = np.random.default_rng([seed, i])
        texts = null_texts(rng, n)
        labels = rng.permutation(np.arange(n) % 2)
        results = run_blind_suite(
            texts, labels.tolist(), seed=i, n_bootstrap=b, baselines=list(baselines),
            sok_protocol=False,
        )  # fmt: skip
        selected, verdict = selected_summary(results), suite_verdict(results)
        if selected is None or verdict is None:
            continue
        out["new"].append(blind_suite_warning(results) is not None)
        out["old"].append(abs(selected[0].auc - 0.5) > OLD_DELTA)
        out["no_shift"].append(verdict.state == "no_shift")
        noise = rng.normal(size=n)
        compared = attack_beats_text(labels, noise, selected[0].scores, folds=selected[0].folds)
        out["beats"].append(compared.beats_text)
    return out


def rows_blind_verdict(n_sims: int, seed: int, *, n_per_class: int = 50) -> list[Row]:
    """The rows of the module docstring."""
    found = null_verdicts(n_sims, seed, n_per_class=n_per_class)
    m = len(VERDICT_BLIND)
    where = f"no shift ({n_per_class} + {n_per_class} texts, strongest of {m})"
    return [
        size_row(
            f"blind warning fires, {where}",
            f"Bonferroni interval (1 - 0.05/{m}) above 0.5 (state 'shift')",
            found["new"],
            0.025,
        ),
        size_row(
            f"blind warning fires, {where}",
            f"OLD: point estimate |AUC - 0.5| > {OLD_DELTA}",
            found["old"],
            0.025,
            expect_pass=False,
        ),
        size_row(
            f"attack with no signal beats the text, {where}",
            "hull of DeLong paired and corrected CV t over the suite's folds, vs the "
            "strongest's out-of-fold scores, 95 %",
            found["beats"],
            0.025,
        ),
        info_row(
            f"state 'no_shift' (upper bound <= 0.6), {where}",
            "share of data sets",
            float(np.mean(found["no_shift"])),
            len(found["no_shift"]),
        ),
    ]
