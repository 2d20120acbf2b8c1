"""GradNorm (white-box): the norm of the loss gradient with respect to the model's parameters.

Training drove a member's loss towards a local minimum, so its gradient is small: score =
-||d loss(x) / d theta|| (L2 over all parameters by default), higher = member. Proposed for LLM
pre-training data in Wang et al. 2024 and used as a white-box baseline by later benchmarks.

Not a TokenStats signal: the attack declares ``needs_backend = True`` and no needs; the run calls
``check_backend(target)`` before any work and ``score_with_backend(target, texts)`` instead of
``score``. A backend without the GRADIENTS capability raises :class:`CapabilityError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import Attack, register
from imprint.backends.gradients import NORMS, check_gradients, gradient_norms
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


def gradnorm_score(norms: np.ndarray) -> np.ndarray:
    """Scores from gradient norms, shape (n,): -norm (members have smaller gradients)."""
    return -np.asarray(norms, dtype=np.float64)


@register("gradnorm")
@dataclass(frozen=True)
class GradNorm(Attack):
    norm: str = "l2"

    summary = "minus the norm of the parameter gradient of the loss (white-box, L2)"
    paper = (
        "Wang et al. 2024, Pandora's White-Box: Precise Training Data Detection and "
        "Extraction in Large Language Models"
    )
    access = "white-box"
    needs_backend: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise ConfigError(f"gradnorm norm must be one of {sorted(NORMS)}, got {self.norm!r}")

    def needs(self) -> tuple[Need, ...]:
        return ()

    def check_backend(self, backend: Any) -> None:
        """Raise CapabilityError before any work when ``backend`` has no gradients."""
        check_gradients(backend)

    def score_with_backend(self, backend: Any, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Column name -> scores of shape (len(texts),), higher = member."""
        return {self.name: gradnorm_score(gradient_norms(backend, texts, norm=self.norm))}

    def score(self, signals: SignalSet) -> dict[str, np.ndarray]:
        raise ConfigError(
            "gradnorm needs the target backend: call "
            "score_with_backend(backend, texts) (needs_backend = True)"
        )
