"""The one engine batches log-prob passes exactly as the planner before it (2df37b6's
``signals.plan._plan_batches``): the same texts in the same batches, so every forward pass sums
the same floats and scores are identical, not merely close (issue 21, "same results")."""

from __future__ import annotations

import random

import numpy as np

from imprint.backends.base import LOGPROBS, Backend, TokenStats
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.runner import RequestRunner, batches_by_budget
from imprint.requests.store import RequestStore


class _Recorder(Backend):
    """Whitespace tokens; records the batches it is asked to score."""

    fingerprint = "recorder"
    capabilities = frozenset({LOGPROBS})
    batch_tokens = 40
    max_length = 64

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str | None]]] = []

    def count_tokens(self, texts):
        return [len(t.split()) + 1 for t in texts]  # + the start token

    def score(self, requests):
        self.batches.append([(r.text, r.prefix) for r in requests])
        out = []
        for r in requests:
            n = len(r.text.split())
            f = np.zeros(n, np.float32)
            i = np.zeros(n, np.int32)
            out.append(TokenStats(i, f, f, f, i, i))
        return out


def _planner_before(requests, lengths, budget, max_length):
    """The earlier planner: requests in plan order, grouped by prefix (first seen first), each
    group batched by batches_by_budget over token lengths."""
    by_prefix: dict[str | None, list[int]] = {}
    for i, r in enumerate(requests):
        by_prefix.setdefault(r.prefix, []).append(i)
    out = []
    for group in by_prefix.values():
        for idx in batches_by_budget([lengths[i] for i in group], budget, max_length=max_length):
            out.append([(requests[group[i]].text, requests[group[i]].prefix) for i in idx])
    return out


def test_logprob_batches_equal_the_planner_before_with_ties_and_prefixes():
    rng = random.Random(0)
    words = ["a", "bb", "ccc", "dddd", "eeeee"]  # equal token counts, unequal characters
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 15))) for _ in range(80)]
    requests = [LogprobRequest(t, p) for p in (None, "shots") for t in dict.fromkeys(texts)]
    backend = _Recorder()
    RequestRunner(RequestStore(None)).run("target", backend.fingerprint, requests, backend)
    lengths = backend.count_tokens([r.text for r in requests])
    expected = _planner_before(requests, lengths, backend.batch_tokens, backend.max_length)
    assert backend.batches == expected
    assert len(expected) > 10  # many batches, so tie order decides their members
