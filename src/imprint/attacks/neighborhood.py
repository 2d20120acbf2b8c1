"""Neighbourhood comparison (Mattern et al. 2023): the loss of x against the losses of its
neighbours, texts one word away that a member's memorisation does not carry over to.

score = mean_j loss(x~_j) - loss(x), loss = mean token negative log-likelihood; higher = member
(a member's loss is lower than its neighbours'). The mean over neighbours follows the paper (not
the max). Neighbours come from a masked LM the user names (``mlm``: a local folder or hub id;
RoBERTa-style, dropout 0.7 on the swapped position's embedding, top-10 candidates per position,
best ``n`` = 50 single swaps ranked, as in the paper, by p(c) / (1 - p(original));
``ranking="logp"`` ranks by the raw log p(c)) or, by default, from an offline lexical scheme that
needs no weights (the paper has none; ``ranking`` does not apply to it); see
:mod:`imprint.attacks.neighbours` for both and how they differ. A text without neighbours (a single
word) scores 0. Variant: ``neighbours``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from imprint.attacks.base import (
    Attack,
    Preparation,
    RunContext,
    mean_logp,
    prepared_field,
    register,
)
from imprint.attacks.neighbours import LEXICAL, NeighbourVariant, generator_config
from imprint.data.sample import Sample
from imprint.requests.client import standalone_requests
from imprint.signals.needs import Need, SignalSet


def neighbourhood_score(loss: float, neighbour_losses: Sequence[float] | np.ndarray) -> float:
    """mean(neighbour_losses) - loss; 0 when there are no neighbours."""
    values = np.asarray(neighbour_losses, dtype=np.float64)
    return float(np.mean(values) - loss) if values.size else 0.0


@register("neighborhood")
@dataclass(frozen=True)
class Neighborhood(Attack):
    mlm: str | None = None
    n: int = 50
    top_k: int = 10
    dropout: float = 0.7
    ranking: str = "ratio"
    # MLM neighbours by text, filled in by prepare() from the run's neighbours requests
    neighbours: Mapping[str, tuple[str, ...]] | None = prepared_field()

    summary = (
        "mean loss of one-word neighbours minus the loss of x (offline lexical swaps; with mlm=, "
        "MLM swaps ranked by p/(1-p_orig) as Mattern et al., ranking=logp for raw log p)"
    )
    paper = (
        "Mattern et al. 2023, Membership Inference Attacks against Language Models via "
        "Neighbourhood Comparison"
    )

    def __post_init__(self) -> None:
        _ = self.variant  # validates n, top_k, dropout and ranking

    @property
    def variant(self) -> NeighbourVariant:
        return NeighbourVariant(
            generator=self.mlm or LEXICAL,
            n=self.n,
            top_k=self.top_k,
            dropout=self.dropout,
            ranking=self.ranking,
            table=self.neighbours,
        )

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        """MLM neighbours of every sample, as requests of the run (stored, counted); the attack
        returned holds them. Lexical neighbours need no set-up."""
        if self.mlm is None:
            return Preparation()
        requests = run.requests or standalone_requests()
        texts = list(dict.fromkeys(s.text for s in samples))
        found = requests.neighbours(self.mlm, texts, generator_config(self.variant))
        return Preparation(attack=replace(self, neighbours=dict(zip(texts, found, strict=True))))

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(variant=self.variant))

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        neighbours = signals.variants(Need(variant=self.variant))
        return {
            self.name: np.array(
                [
                    neighbourhood_score(-mean_logp(s.logp), [-mean_logp(v.logp) for v in nbrs])
                    for s, nbrs in zip(signals.get(), neighbours, strict=True)
                ]
            )
        }
