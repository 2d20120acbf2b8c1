"""Hostile tests of the CPU bf16 path's compiled transformer blocks (backends/compiled_blocks.py):
prefixed (KV-cache) scoring, windows, odd texts, errors mid-forward, and that generation, gradients
and hidden states after scoring see the eager blocks."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_tiny_model

from imprint.backends.base import SamplingSettings, ScoreRequest, TokenStats
from imprint.backends.hf import HFLogprobBackend
from imprint.requests.hidden_states import HiddenStatesRequest

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "北京是中国的首都。",
    "مرحبا بالعالم",
    "😀🎉 emoji only",
    "x",
    " ",  # whitespace only: one token
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii. " * 6,  # > 64 tokens
]
PREFIX = "In 2023 the council met in Seoul to discuss the budget."


@pytest.fixture(scope="module")
def tiny4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny4"), layers=4)


def _bf16(folder: Path) -> HFLogprobBackend:
    return HFLogprobBackend(str(folder), device="cpu", dtype="bfloat16", max_length=64)


def _eagerly(backend: HFLogprobBackend, requests: list[ScoreRequest]) -> list[TokenStats]:
    os.environ["IMPRINT_NO_COMPILE"] = "1"
    try:
        return backend.score(requests)
    finally:
        del os.environ["IMPRINT_NO_COMPILE"]


def _no_instance_forwards(backend: HFLogprobBackend) -> bool:
    return all("forward" not in block.__dict__ for block in backend.model.model.layers)


def test_odd_texts_windows_and_prefixes_score_as_the_eager_blocks(tiny_model_dir: Path) -> None:
    backend = _bf16(tiny_model_dir)
    for requests in (
        [ScoreRequest(t) for t in TEXTS],
        [ScoreRequest(t, prefix=PREFIX) for t in TEXTS[:6]],
        [ScoreRequest(TEXTS[4])],  # batch of one, one-token text
        [ScoreRequest(TEXTS[6])],  # one text in sliding windows
        [ScoreRequest(TEXTS[4], prefix=PREFIX)],  # a one-token row after a KV cache
    ):
        compiled, eager = backend.score(requests), _eagerly(backend, requests)
        for x, y in zip(compiled, eager, strict=True):
            assert np.array_equal(x.token_ids, y.token_ids)
            np.testing.assert_allclose(x.logp, y.logp, atol=0.05)
            assert np.isfinite(x.mean_logp).all() and np.isfinite(x.var_logp).all()
    assert backend.describe()["blocks"] == "compiled"
    assert _no_instance_forwards(backend)


def test_sampling_gradients_and_hidden_states_after_scoring_are_a_fresh_backends(
    tiny_model_dir: Path,
) -> None:
    scored, fresh = _bf16(tiny_model_dir), _bf16(tiny_model_dir)
    scored.score([ScoreRequest(t) for t in TEXTS])
    scored.score([ScoreRequest(t, prefix=PREFIX) for t in TEXTS[:3]])
    args = (["The quick", "北京"], SamplingSettings(3, 8, seed=7))
    assert scored.text_backend().sample(*args) == fresh.text_backend().sample(*args)
    np.testing.assert_array_equal(scored.gradient_norms(TEXTS[:2]), fresh.gradient_norms(TEXTS[:2]))
    batch = [HiddenStatesRequest(text=t, template="[TEXT]") for t in TEXTS[:3]]
    for x, y in zip(
        HiddenStatesRequest.execute(scored, batch),
        HiddenStatesRequest.execute(fresh, batch),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    # and scoring after them still compiles
    scored.score([ScoreRequest(TEXTS[0])])
    assert scored.describe()["blocks"] == "compiled"


def test_an_interrupt_mid_forward_leaves_no_compiled_forward_behind(tiny4_dir: Path) -> None:
    backend = _bf16(tiny4_dir)
    requests = [ScoreRequest(t) for t in TEXTS[:3]]
    before = backend.score(requests)

    def interrupt(*_args: object) -> None:
        raise KeyboardInterrupt

    hook = backend.model.model.layers[2].register_forward_pre_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            backend.score(requests)
    finally:
        hook.remove()
    assert _no_instance_forwards(backend)
    assert backend.describe()["blocks"] == "compiled"
    for x, y in zip(before, backend.score(requests), strict=True):
        np.testing.assert_array_equal(x.logp, y.logp)


def test_the_manifest_and_fingerprint_follow_the_options(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    assert {k: fp32.describe()[k] for k in ("blocks", "head", "reduction")} == {
        "blocks": "eager",
        "head": "float32",
        "reduction": "eager",
    }
    bf16 = _bf16(tiny_model_dir)
    assert {k: bf16.describe()[k] for k in ("blocks", "head", "reduction")} == {
        "blocks": "compiled",
        "head": "bfloat16",
        "reduction": "compiled",
    }
    bf16.fused_head = True  # the option: the head in vocabulary slices (reduce.fused_head_stats)
    assert bf16.describe()["reduction"] == "fused head (compiled)"
    fused_fingerprint = bf16.fingerprint
    bf16.fused_head = False
    assert bf16.fingerprint != fused_fingerprint  # the two heads never share stored answers
    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")
    assert bf16.describe()["blocks"] == "eager (IMPRINT_NO_COMPILE=1)"
    assert bf16.describe()["reduction"] == "eager"
    monkeypatch.delenv("IMPRINT_NO_COMPILE")
    bf16.float32_head = True
    assert bf16.describe()["head"] == "float32"


def test_a_real_error_on_the_first_call_is_not_taken_for_a_compile_failure(
    tiny_model_dir: Path,
) -> None:
    """An error that is not the compiler's (here: raised by the embedding, before any block)
    propagates once, without the 'compiling failed' warning, and leaves the blocks compiled."""
    backend = _bf16(tiny_model_dir)
    calls = []

    def broken(*_args: object) -> None:
        calls.append(1)
        raise ValueError("bad input")

    hook = backend.model.model.embed_tokens.register_forward_pre_hook(broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="bad input"):
            backend.score([ScoreRequest(TEXTS[0])])
    hook.remove()
    assert not [w for w in caught if "scoring eagerly" in str(w.message)]
    assert calls == [1]  # the forward is not rerun
    assert _no_instance_forwards(backend)
    assert backend.describe()["blocks"] == "compiled"


def test_prefixed_scoring_does_not_compile_a_graph_per_block(tiny4_dir: Path) -> None:
    """The KV-cache path must not trace each block on its own: dynamo guards on the block's
    ``layer_idx`` and on its cache layer's strides, so every block got its own graph, and past
    ``torch._dynamo.config.recompile_limit`` (8; SmolLM2-135M has 30 blocks) the rest ran
    eagerly, silently, while the manifest said 'compiled'."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    backend = _bf16(tiny4_dir)
    backend.score([ScoreRequest(t) for t in TEXTS[:3]])  # the plain graph and the reduction
    before = counters["stats"]["unique_graphs"]
    backend.score([ScoreRequest(t, prefix=PREFIX) for t in TEXTS[:3]])
    assert counters["stats"]["unique_graphs"] - before <= 1  # was 4: one per block


def test_a_texts_scores_do_not_depend_on_what_was_scored_before(tiny4_dir: Path) -> None:
    """Once the blocks' code hit dynamo's recompile limit (here lowered to 3 so that 4 blocks
    reach it; 8 by default, reached by a ReCaLL pass on any model of 8+ blocks), shapes it had
    not compiled ran eagerly: the same request scored differently after a prefixed pass than in
    a fresh process, under one fingerprint."""
    request = [ScoreRequest(TEXTS[0])]  # batch of one: its own graph (no attention mask)
    with torch._dynamo.config.patch(recompile_limit=3):
        torch._dynamo.reset()
        backend = _bf16(tiny4_dir)
        first = backend.score(request)
        torch._dynamo.reset()
        backend = _bf16(tiny4_dir)
        backend.score([ScoreRequest(t) for t in TEXTS[:3]])
        backend.score([ScoreRequest(t, prefix=PREFIX) for t in TEXTS[:3]])
        after_recall = backend.score(request)
    np.testing.assert_array_equal(first[0].logp, after_recall[0].logp)


def test_the_float32_head_option_changes_a_fingerprint_already_read(tiny_model_dir: Path) -> None:
    """The fingerprint is memoised on first read; the float32 head, switched on afterwards (as
    benchmarks/bench_bf16.py toggles it on one backend), kept the bf16 head's fingerprint."""
    bf16 = _bf16(tiny_model_dir)
    default = bf16.fingerprint
    bf16.float32_head = True
    assert bf16.fingerprint != default


def test_a_tempered_role_follows_the_targets_scoring_variant(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ACMIA's tempered roles froze the target's fingerprint at creation, so passes made after
    IMPRINT_NO_COMPILE=1 (eager blocks) were stored under the compiled key (found in review)."""
    from imprint.backends.tempered import TemperedBackend

    tempered = TemperedBackend(_bf16(tiny_model_dir), 0.5)
    compiled = tempered.fingerprint
    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")
    assert tempered.fingerprint != compiled


def test_a_forward_already_on_a_block_is_put_back_after_the_pass(tiny_model_dir: Path) -> None:
    """accelerate's hooks live in the block's instance ``forward``: the pass used to delete it."""
    backend = _bf16(tiny_model_dir)
    block = backend.model.model.layers[0]
    calls = []
    original = block.forward

    def hooked(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    block.forward = hooked
    backend.score([ScoreRequest(TEXTS[0])])
    assert block.__dict__["forward"] is hooked
    del block.__dict__["forward"]


def test_too_many_input_variants_are_an_error_not_a_silent_eager_pass(
    tiny4_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imprint.backends import compiled_blocks
    from imprint.errors import ConfigError

    monkeypatch.setattr(compiled_blocks, "RECOMPILE_LIMIT", 1)
    torch._dynamo.reset()
    backend = _bf16(tiny4_dir)
    backend.score([ScoreRequest(TEXTS[0])])  # one graph: batch of one, no padding
    with pytest.raises(ConfigError, match="IMPRINT_NO_COMPILE=1"):
        backend.score([ScoreRequest(t) for t in TEXTS[:3]])  # padded batch: a second graph
    assert _no_instance_forwards(backend)
    torch._dynamo.reset()
