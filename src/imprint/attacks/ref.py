"""Reference-model calibration (Carlini et al. 2021; Watson et al. 2022).

For each reference model r: ``ref[r]`` = LL_target(x) - LL_r(x) (difference) and
``ref_ratio[r]`` = -loss_target(x) / loss_r(x) (ratio); LL is the mean token log-likelihood.
A member is easier for the target than for a model that never saw it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import mean_logp, register
from imprint.attacks.per_reference import PerReferenceAttack
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


@register("ref")
@dataclass(frozen=True)
class Reference(PerReferenceAttack):
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it

    summary = "target log-likelihood calibrated by reference models (difference and ratio)"
    paper = "Carlini et al. 2021; Watson et al. 2022, On the Importance of Difficulty Calibration"

    def __post_init__(self) -> None:
        if not self.refs:
            raise ConfigError("attack 'ref' needs at least one reference model: --ref NAME=SPEC")

    def columns(self) -> tuple[str, ...]:
        return tuple(c for r in self.refs for c in (f"ref[{r}]", f"ref_ratio[{r}]"))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        ll = np.array([mean_logp(s.logp) for s in signals.get()])
        out = {}
        for r in self.refs:
            ll_ref = np.array([mean_logp(s.logp) for s in signals.get(Need(model=r))])
            out[f"ref[{r}]"] = ll - ll_ref
            out[f"ref_ratio[{r}]"] = -(ll / ll_ref)
        return out
