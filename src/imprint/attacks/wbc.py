"""WBC, Window-Based Comparison (Chen et al. 2026): sign votes of local loss differences.

Per token, the target's and the reference's losses l_t = -log p(x_t | x_<t). For a window size
w, every window of w consecutive tokens votes *member* when the reference's summed loss exceeds
the target's (the target found that stretch easier), and the text's score for w is the fraction
of windows that vote so:

    s_w(x) = 1/(T-w+1) * sum_i 1[ sum_{t=i}^{i+w-1} l_ref(t) > sum_{t=i}^{i+w-1} l_tgt(t) ]

A vote is a sign, so one extreme token cannot swing the score the way it swings a mean. The
score averages s_w over geometrically spaced window sizes (the authors' default set 2, 3, 4, 6,
9, 13, 18, 25, 32, 40 covers token- to phrase-level memorisation). A text shorter than w uses
w = T (one window: the sign of the whole-text difference), as the authors' code does. Higher =
member, in [0, 1]. A text with no scored token has no score: NaN, with a warning.

The reference must share the target's tokenizer (windows compare the same tokens); a reference
that tokenizes a text differently is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import register
from imprint.attacks.ez_mia import aligned_pairs, warn_undefined
from imprint.attacks.per_reference import PerReferenceAttack
from imprint.errors import ConfigError
from imprint.signals.needs import SignalSet

WINDOWS = (2, 3, 4, 6, 9, 13, 18, 25, 32, 40)  # the authors' released configuration


def window_votes(target_loss: np.ndarray, ref_loss: np.ndarray, window: int) -> float:
    """s_w: the fraction of length-``window`` windows where the reference's summed loss is
    larger than the target's; shapes (T,). NaN for T = 0."""
    diff = np.asarray(ref_loss, np.float64) - np.asarray(target_loss, np.float64)
    if diff.size == 0:
        return float("nan")
    w = min(window, diff.size)
    sums = np.convolve(diff, np.ones(w), mode="valid")  # windowed sum of l_ref - l_tgt
    return float(np.mean(sums > 0))


def wbc_score(target_logp: np.ndarray, ref_logp: np.ndarray, windows: tuple[int, ...]) -> float:
    """Mean of s_w over ``windows`` from per-token log-probs (loss = -log p), shapes (T,)."""
    votes = [window_votes(-np.asarray(target_logp), -np.asarray(ref_logp), w) for w in windows]
    return float(np.mean(votes))


@register("wbc")
@dataclass(frozen=True)
class Wbc(PerReferenceAttack):
    token_aligned: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # log p and the argmax only: vLLM serves it
    windows: tuple[int, ...] = WINDOWS

    summary = (
        "Window-Based Comparison: share of sliding windows where the reference's loss exceeds "
        "the target's, averaged over window sizes 2..40 (needs --ref, same tokenizer)"
    )
    paper = (
        "Chen et al. 2026, Window-based Membership Inference Attacks Against Fine-tuned Large "
        "Language Models (WBC), arXiv 2601.02751"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", tuple(int(w) for w in self.windows))
        if not self.refs:
            raise ConfigError(
                "attack 'wbc' needs a reference model, e.g. the target's pretrained base: "
                "--ref NAME=SPEC"
            )
        if not self.windows or min(self.windows) < 1:
            raise ConfigError(
                f"wbc windows must be one or more sizes >= 1 (tokens), got {self.windows}; "
                "e.g. --param wbc.windows=2,4,8,16"
            )

    def columns(self) -> tuple[str, ...]:
        return tuple(f"wbc[{r}]" for r in self.refs)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        out = {}
        for r in self.refs:
            column = f"wbc[{r}]"
            pairs = aligned_pairs(signals, r, attack=self.name)
            out[column] = np.array(
                [wbc_score(t.logp, ref.logp, self.windows) for t, ref in pairs], dtype=np.float64
            )
            n_nan = int(np.isnan(out[column]).sum())
            warn_undefined(self.name, column, n_nan, len(signals), "no scored token")
        return out
