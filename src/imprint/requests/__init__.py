"""The request layer: typed model requests, run once, stored, counted.

Every call to a model (log-prob passes, sampled and greedy continuations, SimMIA's next-word
weights and next-token laws, gradient norms, masked-LM neighbours, embeddings, paraphrases) is a
typed request (:mod:`.kinds`, :mod:`.logprobs`, :mod:`.next_token`) executed by
:class:`RequestRunner` through the persistent :class:`RequestStore` and an executor.
"""

from imprint.requests.kinds import (
    ChoiceRequest,
    EmbedRequest,
    GradNormRequest,
    GreedyRequest,
    NeighbourRequest,
    NextWordRequest,
    ParaphraseRequest,
    Request,
    SampleRequest,
    TokenCountsRequest,
)
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.next_token import NextTokenRequest
from imprint.requests.runner import KindCounts, Lazy, RequestCounts, RequestRunner
from imprint.requests.store import RequestStore

__all__ = [
    "ChoiceRequest",
    "EmbedRequest",
    "GradNormRequest",
    "GreedyRequest",
    "KindCounts",
    "Lazy",
    "LogprobRequest",
    "NeighbourRequest",
    "NextTokenRequest",
    "NextWordRequest",
    "ParaphraseRequest",
    "Request",
    "RequestCounts",
    "RequestRunner",
    "RequestStore",
    "SampleRequest",
    "TokenCountsRequest",
]
