"""The one rule every output uses to read the blind (model-less) baseline.

Two claims rest on it, and the run warning, the forest plot (band and caption), the report, the
demo's checks, the study tables and metrics.json all take them from here:

1. **Is there a distribution shift?** (:func:`blind_verdict`) The strongest blind classifier's
   selection-adjusted AUC interval (Bonferroni over the m classifiers of the suite, see
   :mod:`imprint.diagnostics.blind_suite`) gives one of three states:

   - ``shift``: the interval lies above 0.5: the text alone separates members from
     non-members, so attack AUCs on these data do not measure membership;
   - ``no_shift``: the interval contains 0.5 and its upper bound is at most
     ``0.5 + NO_SHIFT_MARGIN`` (0.6): the text alone is shown not to reach AUC 0.6, the margin
     the SoK (Meeus et al. 2024, section 4) and Das et al. (2024) read as "near chance";
   - ``inconclusive``: the interval contains 0.5 but reaches above 0.6: no shift was shown, and
     none that large was ruled out (too few texts: with 4 classifiers about 100 per class are
     needed for the interval to be that narrow).

   An interval wholly below 0.5 is not read as a shift: out-of-fold scores of a classifier that
   learned nothing fall below chance (each held-out fold has the opposite class balance of its
   training folds), so it is ``inconclusive``. Under no shift the warning (state ``shift``)
   fires at most at the one-sided family level, 2.5 %; the calibration suite and
   ``benchmarks/bench_calibration.py --only blind_verdict`` measure it.

2. **Does an attack beat the text?** (:func:`attack_beats_text`) The attack's scores and the
   strongest blind classifier's out-of-fold scores on the same texts are compared by DeLong's
   paired test (cluster-robust over documents; :func:`imprint.metrics.paired.delong_test`),
   Bonferroni over the k attacks compared: an attack beats the text when the lower bound of
   AUC(attack) - AUC(blind) at level ``1 - 0.05 / k`` is above 0. Overlapping intervals decide
   nothing. DeLong holds the blind column fixed, but out-of-fold scores come from k models
   fitted on overlapping data, so the blind AUC varies more than DeLong counts (no signal,
   50 + 50, one classifier: "beats the text" in 0.064 of data sets at nominal 0.025). Given the
   suite's folds, the difference's interval is therefore the hull of DeLong's and the corrected
   resampled t interval over the folds' AUC differences (Nadeau & Bengio 2003, as
   :mod:`imprint.metrics.cv_interval` does for the blind AUC): both must exclude 0. Without
   folds (a study cell stored by an older imprint) DeLong alone decides and the text says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from imprint.errors import DataError
from imprint.metrics import Interval
from imprint.metrics.binary import roc_auc_score
from imprint.metrics.cv_interval import corrected_cv_interval
from imprint.metrics.paired import delong_test

__all__ = [
    "NO_SHIFT_MARGIN",
    "STATES",
    "BlindVerdict",
    "TextComparison",
    "attack_beats_text",
    "blind_verdict",
    "compare_with_text",
]

#: the no-shift state needs the blind interval's upper bound at most 0.5 + this
NO_SHIFT_MARGIN = 0.1
#: the family level of the attack-vs-text comparisons (Bonferroni over the attacks compared)
TEXT_CONFIDENCE = 0.95
State = Literal["shift", "no_shift", "inconclusive"]
STATES: tuple[str, ...] = ("shift", "no_shift", "inconclusive")
HEADLINES = {
    "shift": "distribution shift shown",
    "no_shift": "no shift detectable at this n",
    "inconclusive": "inconclusive (interval too wide to rule out a shift)",
}


@dataclass(frozen=True)
class BlindVerdict:
    """The blind baseline's state, the interval it rests on and why, in words."""

    state: State
    classifier: str
    interval: Interval
    n_classifiers: int
    confidence: float
    margin: float = NO_SHIFT_MARGIN

    @property
    def headline(self) -> str:
        return HEADLINES[self.state]

    @property
    def interval_text(self) -> str:
        iv = self.interval
        level = f"{100 * self.confidence:.2f}".rstrip("0").rstrip(".")
        how = (
            f"Bonferroni {level} %, strongest of {self.n_classifiers}"
            if self.n_classifiers > 1
            else f"{level} %"
        )
        return f"{self.classifier} AUC {iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}] ({how})"

    @property
    def summary(self) -> str:
        """The state and its interval on one line (the terminal's and the band's label)."""
        return f"blind baseline: {self.headline}: {self.interval_text}"

    @property
    def reason(self) -> str:
        """One sentence: the state, the interval and what follows for the attacks' AUCs."""
        top = 0.5 + self.margin
        why = {
            "shift": "its interval lies above 0.5: members and non-members are distinguishable "
            "from the text alone, so attack AUCs on these data do not measure membership. Use "
            "a randomized split (privacy game) or a benchmark whose blind baseline is at chance",
            "no_shift": f"its interval contains 0.5 and stays at or below {top:g}: the text "
            f"alone does not reach AUC {top:g}",
            "inconclusive": f"its interval contains 0.5 but reaches above {top:g}: no shift is "
            f"shown, and a shift up to AUC {self.interval.high:.3f} is not ruled out at this n "
            "(more texts narrow it)",
        }[self.state]
        return f"{self.summary}; {why}."

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "headline": self.headline,
            "classifier": self.classifier,
            "auc": self.interval.to_dict(),
            "n_classifiers": self.n_classifiers,
            "confidence": self.confidence,
            "margin": self.margin,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlindVerdict:
        auc = data["auc"]
        return blind_verdict(
            Interval(float(auc["estimate"]), float(auc["low"]), float(auc["high"])),
            classifier=str(data["classifier"]),
            n_classifiers=int(data["n_classifiers"]),
            confidence=float(data["confidence"]),
            margin=float(data.get("margin", NO_SHIFT_MARGIN)),
        )


def blind_verdict(
    interval: Interval,
    *,
    classifier: str,
    n_classifiers: int,
    confidence: float,
    margin: float = NO_SHIFT_MARGIN,
) -> BlindVerdict:
    """The three-state verdict (module docstring) of the strongest blind classifier's AUC
    ``interval`` (selection-adjusted at ``confidence`` over ``n_classifiers``)."""
    low, high = interval.low, interval.high
    if math.isnan(low) or math.isnan(high):
        state: State = "inconclusive"
    elif low > 0.5:
        state = "shift"
    elif low <= 0.5 <= high and high <= 0.5 + margin:
        state = "no_shift"
    else:
        state = "inconclusive"
    return BlindVerdict(state, classifier, interval, n_classifiers, confidence, margin)


@dataclass(frozen=True)
class TextComparison:
    """AUC(attack) - AUC(blind) on the same texts, at the family level over ``n_compared``
    attacks: the hull of DeLong's paired interval and, when ``n_folds`` > 0, the corrected CV
    interval over that many folds' differences; ``beats_text`` when its lower bound is above 0.
    """

    attack: str
    blind: str
    diff: Interval
    p_value: float
    confidence: float
    n_compared: int
    n_texts: int
    n_folds: int = 0

    @property
    def beats_text(self) -> bool:
        return bool(self.diff.low > 0)

    @property
    def text(self) -> str:
        d = self.diff
        level = f"{100 * self.confidence:.2f}".rstrip("0").rstrip(".")
        word = "beats the text" if self.beats_text else "not shown to beat the text"
        how = (
            f"hull of DeLong paired and corrected CV t over {self.n_folds} folds"
            if self.n_folds
            else "DeLong paired only (no folds stored, or fewer than two with both classes: "
            "the blind column's refitting not counted)"
        )
        return (
            f"{self.attack} {word}: AUC - AUC({self.blind}) = {d.estimate:+.3f} "
            f"[{d.low:+.3f}, {d.high:+.3f}] ({how}, on the same {self.n_texts} texts, "
            f"{level} %, Bonferroni over {self.n_compared})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "attack": self.attack,
            "blind": self.blind,
            "diff": self.diff.to_dict(),
            "p_value": None if math.isnan(self.p_value) else self.p_value,
            "confidence": self.confidence,
            "n_compared": self.n_compared,
            "n_texts": self.n_texts,
            "n_folds": self.n_folds,
            "beats_text": self.beats_text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TextComparison:
        d = data["diff"]
        estimate, low, high = (
            math.nan if d[k] is None else float(d[k]) for k in ("estimate", "low", "high")
        )
        iv = Interval(estimate, low, high)
        p = data.get("p_value")
        return cls(
            str(data["attack"]), str(data["blind"]), iv, math.nan if p is None else float(p),
            float(data["confidence"]), int(data["n_compared"]), int(data["n_texts"]),
            int(data.get("n_folds", 0)),
        )  # fmt: skip


def attack_beats_text(
    labels: ArrayLike,
    attack_scores: ArrayLike,
    blind_scores: ArrayLike,
    *,
    attack: str = "attack",
    blind: str = "blind",
    groups: ArrayLike | None = None,
    n_compared: int = 1,
    folds: ArrayLike | None = None,
) -> TextComparison:
    """Compare one attack with the blind classifier's out-of-fold scores on the same texts.

    All arrays have shape (n,); texts the attack left unscored (NaN) are dropped from both.
    ``groups`` (each text's document) makes DeLong's variance cluster-robust. ``folds`` (each
    text's test fold in the blind suite's cross-validation) widens the interval to its hull
    with the corrected CV interval (module docstring). The interval is at
    ``1 - (1 - TEXT_CONFIDENCE) / n_compared`` (Bonferroni over the attacks compared)."""
    y = np.asarray(labels)
    a = np.asarray(attack_scores, dtype=np.float64)
    b = np.asarray(blind_scores, dtype=np.float64)
    f = None if folds is None else np.asarray(folds)
    if not (y.shape == a.shape == b.shape) or (f is not None and f.shape != y.shape):
        raise DataError(
            f"attack {attack!r} has {a.size} scores, the blind baseline {b.size}"
            f"{'' if f is None else f' with fold labels of shape {f.shape}'} and there are "
            f"{y.size} labels; "
            "compare them on the same texts"
        )
    keep = np.isfinite(a) & np.isfinite(b)
    level = 1 - (1 - TEXT_CONFIDENCE) / max(1, n_compared)
    g = None if groups is None else np.asarray(groups)[keep]
    kept = y[keep]
    if kept.size == 0 or kept.min() == kept.max():
        nan = Interval(math.nan, math.nan, math.nan)
        return TextComparison(attack, blind, nan, math.nan, level, n_compared, int(keep.sum()))
    test = delong_test(kept, a[keep], b[keep], groups=g)
    diff = test.interval(level)
    n_folds = 0
    if f is not None:
        cv, n_folds = _cv_difference(kept, a[keep], b[keep], f[keep], diff.estimate, level)
        if n_folds:
            diff = Interval(diff.estimate, min(diff.low, cv.low), max(diff.high, cv.high))
    n = int(keep.sum())
    return TextComparison(attack, blind, diff, test.p_value, level, n_compared, n, n_folds)


def _cv_difference(
    y: np.ndarray, a: np.ndarray, b: np.ndarray, folds: np.ndarray, estimate: float, level: float
) -> tuple[Interval, int]:
    """The corrected resampled t interval (Nadeau & Bengio 2003; see
    :func:`~imprint.metrics.cv_interval.corrected_cv_interval`) of AUC(attack) - AUC(blind)
    over the folds' test texts, centred on
    ``estimate``, and the number of folds used (0, interval NaN, with fewer than two folds that
    hold both classes)."""
    values, ratios = [], []
    for fold in np.unique(folds):
        held = folds == fold
        if 0 < int(y[held].sum()) < int(held.sum()):
            values.append(roc_auc_score(y[held], a[held]) - roc_auc_score(y[held], b[held]))
            ratios.append(held.sum() / max(y.size - held.sum(), 1))
    if len(values) < 2:
        return Interval(estimate, math.nan, math.nan), 0
    cv = corrected_cv_interval(
        estimate, np.asarray(values), float(np.mean(ratios)), level, bounds=(-1.0, 1.0)
    )
    return cv, len(values)


def compare_with_text(
    labels: ArrayLike,
    columns: Mapping[str, ArrayLike],
    blind_scores: ArrayLike,
    *,
    blind: str,
    groups: ArrayLike | None = None,
    folds: ArrayLike | None = None,
) -> dict[str, TextComparison]:
    """:func:`attack_beats_text` for every column, Bonferroni over the columns compared."""
    k = len(columns)
    return {
        name: attack_beats_text(
            labels,
            scores,
            blind_scores,
            attack=name,
            blind=blind,
            groups=groups,
            n_compared=k,
            folds=folds,
        )
        for name, scores in columns.items()
    }
