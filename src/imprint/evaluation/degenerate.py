"""Score columns that cannot say anything of their own: constant ones (every text scores the
same) and groups that rank every text identically (one is a monotone function of another, so
they share the AUC, every TPR@FPR and its interval, and their paired difference is 0 [0, 0]).

A fitted attack whose fitted model cannot vary at the fit size given does this: QMIA's quantile
head at k = 0 components is a constant, so LL(x) - q ranks texts as LOSS does (refused at that
size, see :mod:`imprint.attacks.qmia`); LiRA or RMIA on too few reference models, or a reference
identical to the target, can do the same. The check is generic, on the scores alone, so it holds
for any attack, plugins included.
"""

from __future__ import annotations

import numpy as np

from imprint.evaluation.results import RunWarning

__all__ = ["degenerate_warnings", "rank_key"]


def rank_key(values: np.ndarray) -> bytes | None:
    """A key equal for two columns exactly when they order every text the same way (ties
    included, NaN positions included); None for a constant column (at most one distinct finite
    value)."""
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    distinct, dense = np.unique(v[finite], return_inverse=True)
    if len(distinct) < 2:
        return None
    ranks = np.full(len(v), -1, dtype=np.int64)
    ranks[finite] = dense
    return ranks.tobytes()


def degenerate_warnings(scores: dict[str, np.ndarray]) -> list[RunWarning]:
    """One ``degenerate_scores`` warning per constant column and per group of columns that
    rank every text identically, saying why the figures are what they are."""
    out: list[RunWarning] = []
    groups: dict[bytes, list[str]] = {}
    for column, values in scores.items():
        if np.isfinite(np.asarray(values, dtype=float)).sum() < 2:
            continue  # unscored: the single-class and unscored-samples warnings say it
        key = rank_key(values)
        if key is None:
            out.append(
                RunWarning(
                    "degenerate_scores",
                    f"{column}: every text has the same score, so its AUC is 0.5 by "
                    "construction and no TPR@FPR means anything; a fitted model that cannot "
                    "vary at its fit size, or a reference that is the target, does this",
                )
            )
            continue
        groups.setdefault(key, []).append(column)
    for same in groups.values():
        if len(same) > 1:
            first, rest = same[0], ", ".join(same[1:])
            out.append(
                RunWarning(
                    "degenerate_scores",
                    f"{rest} rank{'s' * (len(same) == 2)} every text exactly as {first} does "
                    "(one is a monotone function of the other: the same AUC, TPR@FPR and "
                    "intervals, paired difference 0 [0, 0]), so here they add nothing to "
                    f"{first}; a fitted model that cannot vary with the text at its fit size "
                    "does this (qmia's quantile head below 2 x texts_per_parameter texts)",
                )
            )
    return out
