"""The document aggregators take what they need from scoring: Meeus et al. declare the target's
plain log-prob pass, get it from the run's request client while the models are open, and the
document evaluation never reopens the signal store afterwards."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from imprint.attacks.loss import Loss
from imprint.backends.base import TokenStats
from imprint.data import Sample
from imprint.documents.run_hook import (
    MEEUS_NEEDS,
    NOT_PLANNED,
    DocumentOptions,
    DocumentSignals,
    document_signals,
    split_for_run,
)
from imprint.evaluation.documents import MEEUS, evaluate_documents
from imprint.signals.needs import Need


class Client:
    """A request client that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def token_stats(self, role: str, texts: Sequence[str], **_: Any) -> list[TokenStats]:
        self.calls.append((role, list(texts)))
        return [_stats(len(t.split()), seed=i) for i, t in enumerate(texts)]


def _stats(n: int, *, seed: int) -> TokenStats:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 50, size=n).astype(np.int32)
    logp = -rng.random(n).astype(np.float32) * 5
    zeros = np.zeros(n, np.float32)
    return TokenStats(ids, logp, zeros, zeros, np.ones(n, np.int32), ids)


def test_meeus_declares_the_target_plain_pass() -> None:
    assert (Need(model="target"),) == MEEUS_NEEDS
    assert set(MEEUS_NEEDS) <= set(Loss().needs())  # LOSS plans the pass Meeus reads


def test_signals_come_from_the_request_client_when_planned() -> None:
    client = Client()
    texts = ["a b c", "d e"]
    found = document_signals([Loss()], client, texts)  # type: ignore[arg-type]
    assert client.calls == [("target", texts)]
    assert found.token_stats is not None and len(found.token_stats) == 2
    assert found.missing is None and found.vocab_size is None


def test_an_unplanned_pass_is_a_note_not_a_model_call() -> None:
    client = Client()
    only_prefixed = SimpleNamespace(needs=lambda: (Need(model="target", prefix="shots"),))
    found = document_signals([only_prefixed], client, ["a b c"])  # type: ignore[list-item]
    assert client.calls == []
    assert found.token_stats is None and found.missing == NOT_PLANNED


def _document_run(n_docs: int = 12, per_doc: int = 4) -> tuple[Any, list[Sample], dict]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    docs = [
        Sample(f"d{d}", " ".join(rng.choice(words, size=8 * per_doc)), d % 2) for d in range(n_docs)
    ]
    options = DocumentOptions(seq_words=8, max_seqs=per_doc, n_splits=3)
    samples, split = split_for_run(options, docs, {})
    labels = np.array([s.label for s in samples], dtype=float)
    scores = {"loss": labels + rng.normal(0, 1, len(samples))}
    return split, samples, scores


def test_document_evaluation_reads_meeus_from_the_signals_never_the_store(monkeypatch) -> None:
    from imprint.signals import cache

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the document evaluation reopened the signal store")

    monkeypatch.setattr(cache.SignalCache, "__init__", refuse)
    split, samples, scores = _document_run()
    assert split is not None
    stats = tuple(_stats(8, seed=i) for i in range(len(samples)))
    config = SimpleNamespace(
        n_bootstrap=50, seed=0, blind=False, documents=DocumentOptions(n_splits=3)
    )
    found = evaluate_documents(
        split, samples, scores, config=config, signals=DocumentSignals(stats, 50)
    )
    assert MEEUS in found.rows and found.rows[MEEUS].aggregation == "meeus"
    missing = evaluate_documents(
        split, samples, scores, config=config, signals=DocumentSignals(None, None, NOT_PLANNED)
    )
    assert MEEUS not in missing.rows and NOT_PLANNED in missing.notes
