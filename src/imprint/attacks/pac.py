"""PAC, Polarized Augment Calibration (Ye et al. 2024, Data Contamination Calibration for Black-box
LLMs).

Polarized distance of a text: d(x) = mean of the ``far`` (5 %) highest token log-probs minus the
mean of the ``near`` (30 %) lowest, each at least one token. PAC(x) = d(x) - mean_j d(x~_j) over
``n_aug`` (10) random-swap augmentations x~_j, each swapping 30 % of the words (variant
:class:`~imprint.attacks.augment.SwapAugment`, ``swap``). The official code ranks with ``-PAC``
(``roc_auc_score(labels, -PAC)``): a member's own order is far more peaked than its shuffled
versions, so its d(x) - d(x~) is the lower. Score = mean_j d(x~_j) - d(x) = -PAC, higher = member.

Defaults: far 0.05 and near 0.3 and swap fraction 0.3 as in the official code; n_aug = 10 (the
official script uses 5; more augmentations lower the calibration's variance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imprint.attacks.augment import SwapAugment
from imprint.attacks.base import Attack, check_fraction, register
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


def polarized_distance(logp: np.ndarray, *, far: float = 0.05, near: float = 0.3) -> float:
    """Mean of the max(1, floor(far*T)) highest minus mean of the max(1, floor(near*T)) lowest."""
    values = np.sort(np.asarray(logp, dtype=np.float64))
    if values.size == 0:
        raise ValueError("cannot compute a polarized distance of an empty text")
    n_far = max(1, int(values.size * far))
    n_near = max(1, int(values.size * near))
    return float(np.mean(values[-n_far:]) - np.mean(values[:n_near]))


def pac_score(
    logp: np.ndarray, augmented: list[np.ndarray], *, far: float = 0.05, near: float = 0.3
) -> float:
    """mean_j d(x~_j) - d(x) (= -PAC, higher = member); ``augmented`` holds (T_j,) log-probs."""
    calibration = np.mean([polarized_distance(a, far=far, near=near) for a in augmented])
    return float(calibration - polarized_distance(logp, far=far, near=near))


@register("pac")
@dataclass(frozen=True)
class Pac(Attack):
    n_aug: int = 10
    swap_fraction: float = 0.3
    far: float = 0.05
    near: float = 0.3

    summary = "polarized log-prob distance of x against random-swap augmentations (10 x 30 %)"
    paper = "Ye et al. 2024, Data Contamination Calibration for Black-box LLMs"

    def __post_init__(self) -> None:
        if self.n_aug < 1:
            raise ConfigError(f"pac n_aug must be >= 1, got {self.n_aug}")
        for name in ("swap_fraction", "far", "near"):
            check_fraction(f"pac {name}", getattr(self, name))

    @property
    def variant(self) -> SwapAugment:
        return SwapAugment(n=self.n_aug, fraction=self.swap_fraction)

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(variant=self.variant))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        augmented = signals.variants(Need(variant=self.variant))
        return {
            self.name: np.array(
                [
                    pac_score(s.logp, [a.logp for a in aug], far=self.far, near=self.near)
                    for s, aug in zip(signals.get(), augmented, strict=True)
                ]
            )
        }
