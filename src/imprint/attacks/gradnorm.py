"""GradNorm (white-box): the norm of the loss gradient with respect to the model's parameters.

Training drove a member's loss towards a local minimum, so its gradient is small: score =
-||d loss(x) / d theta||, higher = member. Proposed for LLM pre-training data in Wang et al. 2024
and used as a white-box baseline by later benchmarks, which do not agree on how the parameter
tensors g_1..g_m are combined (``aggregate``, written to the manifest):

- ``global`` (default, Wang et al.'s theta gradient norm): the p-norm of the whole gradient as one
  vector, sqrt(sum_i ||g_i||^2) for L2; large tensors (the embedding matrix) dominate it.
- ``tensor_mean`` (MIMIR, Duan et al. 2024): the mean over tensors of ||g_i||_p, every tensor
  weighted alike. MIMIR's code runs it with p = inf: ``aggregate=tensor_mean, norm=linf``
  reproduces its GradNorm.

``norm``: ``l2`` (default), ``l1`` or ``linf``.

Not a TokenStats signal: each text's norm is a ``gradnorm`` request (stored and counted like every
model call); the run calls ``check_backend(target)`` before any work. A backend without the
GRADIENTS capability raises :class:`CapabilityError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from imprint.attacks.base import register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import Access, Backend
from imprint.backends.gradients import check_gradients, check_norm
from imprint.errors import ConfigError
from imprint.requests.client import ModelRequests
from imprint.requests.kinds import GradNormRequest
from imprint.requests.plan import AttackCalls


def gradnorm_score(norms: np.ndarray) -> np.ndarray:
    """Scores from gradient norms, shape (n,): -norm (members have smaller gradients)."""
    return -np.asarray(norms, dtype=np.float64)


@register("gradnorm")
@dataclass(frozen=True)
class GradNorm(ModelCallAttack):
    norm: str = "l2"
    aggregate: str = "global"

    summary = (
        "minus the norm of the loss gradient (white-box; L2 of the whole gradient as Wang et al.; "
        "aggregate=tensor_mean, norm=linf for MIMIR's mean of per-tensor norms)"
    )
    paper = (
        "Wang et al. 2024, Pandora's White-Box: Precise Training Data Detection and "
        "Extraction in Large Language Models"
    )
    access = Access.WHITE_BOX

    def __post_init__(self) -> None:
        try:
            check_norm(self.norm, self.aggregate)
        except ConfigError as err:
            raise ConfigError(f"gradnorm: {err}") from err

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` has no gradients."""
        check_gradients(backend)

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """One ``gradnorm`` request per text."""
        return AttackCalls.of([("target", self._request(t)) for t in texts])

    def _request(self, text: str) -> GradNormRequest:
        return GradNormRequest(text=text, norm=self.norm, aggregate=self.aggregate)

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Column ``gradnorm``, shape (len(texts),), higher = member."""
        norms = requests.gradient_norms("target", texts, norm=self.norm, aggregate=self.aggregate)
        return {self.name: gradnorm_score(norms)}
