"""The HF backend's statistics equal a full-logits computation, prefix and windows included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imprint.backends import reduce as reduce_mod
from imprint.backends.base import ScoreRequest, TokenStats
from imprint.backends.hf import HFLogprobBackend, sliding_windows
from imprint.backends.models import resolve_model
from imprint.errors import ConfigError

TEXTS = [
    "The quick brown fox jumps.",
    "Hi",
    "Membership inference asks whether a text was in the training data. " * 3,
]


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def reference_stats(model, ids: list[int], n_context: int) -> dict[str, np.ndarray]:
    """Brute force: full logits, full log-softmax, statistics for positions >= n_context."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    logp = torch.log_softmax(logits, -1)
    targets = torch.tensor(ids[1:])
    p = logp.exp()
    mean = (p * logp).sum(-1)
    var = (p * logp * logp).sum(-1) - mean**2
    chosen = logp.gather(1, targets[:, None])[:, 0]
    rank = (logp > chosen[:, None]).sum(-1) + 1
    sl = slice(n_context - 1, None)
    return {
        "logp": chosen[sl].numpy(),
        "mean_logp": mean[sl].numpy(),
        "var_logp": var[sl].numpy(),
        "rank": rank[sl].numpy(),
        "token_ids": targets[sl].numpy(),
        "argmax": logits.argmax(-1)[sl].numpy(),
    }


def assert_matches(stats: TokenStats, ref: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(stats.logp, ref["logp"], atol=1e-4)
    np.testing.assert_allclose(stats.mean_logp, ref["mean_logp"], atol=1e-4)
    np.testing.assert_allclose(stats.var_logp, ref["var_logp"], atol=1e-3)
    np.testing.assert_array_equal(stats.rank, ref["rank"])
    np.testing.assert_array_equal(stats.token_ids, ref["token_ids"])
    np.testing.assert_array_equal(stats.argmax, ref["argmax"])


def test_scores_match_full_forward(backend):
    out = backend.score([ScoreRequest(t) for t in TEXTS])
    for text, stats in zip(TEXTS, out, strict=True):
        ids = [backend.bos_id, *backend.encode(text)]
        assert len(stats) == len(ids) - 1  # every text token scored, BOS never
        assert_matches(stats, reference_stats(backend.model, ids, 1))


def test_prefix_tokens_masked_and_cache_reused(backend):
    prefix = "In 2023 the council met in Seoul."
    out = backend.score([ScoreRequest(t, prefix=prefix) for t in TEXTS])
    prefix_ids = [backend.bos_id, *backend.encode(prefix)]
    for text, stats in zip(TEXTS, out, strict=True):
        ids = prefix_ids + backend.encode(text)
        assert len(stats) == len(backend.encode(text))
        assert_matches(stats, reference_stats(backend.model, ids, len(prefix_ids)))
    # a second batch with the same prefix gives identical numbers (stored cache not mutated)
    again = backend.score([ScoreRequest(TEXTS[0], prefix=prefix)])[0]
    np.testing.assert_allclose(again.logp, out[0].logp, atol=1e-5)


def test_mixed_prefix_batch_keeps_order(backend):
    requests = [
        ScoreRequest(TEXTS[0]),
        ScoreRequest(TEXTS[1], prefix="Hi there."),
        ScoreRequest(TEXTS[2]),
    ]
    mixed = backend.score(requests)
    alone = [backend.score([r])[0] for r in requests]
    for a, b in zip(mixed, alone, strict=True):
        np.testing.assert_allclose(a.logp, b.logp, atol=1e-5)


def test_sliding_window_scores_every_token_once(tiny_model_dir, backend):
    small = HFLogprobBackend(str(tiny_model_dir), device="cpu", max_length=16, stride=8)
    stats = small.score([ScoreRequest(TEXTS[2])])[0]
    n_tokens = len(backend.encode(TEXTS[2]))
    assert len(stats) == n_tokens
    full = backend.score([ScoreRequest(TEXTS[2])])[0]
    np.testing.assert_allclose(stats.logp[:15], full.logp[:15], atol=1e-5)  # first window
    np.testing.assert_array_equal(stats.token_ids, full.token_ids)


def test_sliding_windows_cover_each_position_once():
    ids = list(range(50))
    covered = []
    for window, first in sliding_windows(ids, 16, 6):
        assert len(window) <= 16
        start = ids.index(window[0])
        covered += list(range(start + first, start + len(window)))
    assert covered == list(range(1, 50))


def test_chunked_reduction_equals_unchunked(monkeypatch):
    torch.manual_seed(0)
    hidden = torch.randn(37, 8)
    head = torch.nn.Linear(8, 301)
    targets = torch.randint(0, 301, (37,))
    full = reduce_mod.reduce_logits(head(hidden), targets)
    monkeypatch.setattr(reduce_mod, "_CHUNK_ELEMENTS", 301 * 5)  # 5 positions per chunk
    chunked = reduce_mod.reduce_hidden(hidden, targets, head, vocab_size=301)
    for key in full:  # float sums may differ in the last bits with the chunk shape
        torch.testing.assert_close(chunked[key], full[key], atol=1e-4, rtol=1e-4)


def test_fingerprint_changes_with_scoring_settings(tiny_model_dir, backend):
    other = HFLogprobBackend(str(tiny_model_dir), device="cpu", max_length=32)
    assert other.fingerprint != backend.fingerprint


def test_bad_model_specs_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ConfigError, match="GGUF file not found"):
        resolve_model("gguf:/nope/model.gguf")
    with pytest.raises(ConfigError, match="unknown model"):
        resolve_model("not a model")
