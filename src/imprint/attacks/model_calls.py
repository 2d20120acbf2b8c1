"""Attacks that call models beyond log-prob passes (sampling, greedy tokens, gradients, ...).

They score through a :class:`imprint.requests.client.ModelRequests` handed in by the run (the
``requests`` of :class:`~imprint.attacks.base.ScoringInputs`, read by :meth:`Attack.score`), so
every model call they make is a typed request: deduplicated, stored under the model's content
fingerprint, counted per kind, and answered from the store on a rerun or after a kill.
``score_with_backend`` is the convenience for library use: the same code over an in-memory store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.attacks.base import Attack, ScoringInputs
from imprint.errors import ConfigError
from imprint.requests.client import ModelRequests, in_memory_requests
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet


class ModelCallAttack(Attack):
    """Base class: implement ``check_backend`` and ``score_with_requests``."""

    def needs(self) -> tuple[Need, ...]:
        return ()

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """Override to declare the calls (see :meth:`Attack.planned_requests`); by default the
        plan says this attack's calls are not counted."""
        return AttackCalls(uncounted=("its model calls",))

    def score_with_requests(
        self, requests: ModelRequests, texts: Sequence[str], **kwargs: Any
    ) -> dict[str, np.ndarray]:
        """Column name -> scores of shape (len(texts),), higher = member."""
        raise NotImplementedError  # abstract

    def score_with_backend(
        self,
        backend: Any,
        texts: Sequence[str],
        *,
        embedder: Any = None,
        roles: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, np.ndarray]:
        """Score against ``backend`` directly (in-memory request store; nothing persists)."""
        self.check_backend(backend)
        requests = in_memory_requests(backend, embedder=embedder, roles=roles)
        return self.score_with_requests(requests, texts, **kwargs)

    def score(self, inputs: ScoringInputs | SignalSet) -> dict[str, np.ndarray]:
        """Scores through ``inputs.requests`` (the run's request client)."""
        inputs = ScoringInputs.of(inputs)
        if inputs.requests is None:
            raise ConfigError(
                f"{self.name} calls the model itself and was given no request client: pass "
                "ScoringInputs(texts, requests=...), or for library use call "
                "score_with_backend(backend, texts)"
            )
        return self.score_with_requests(inputs.requests, inputs.texts)
