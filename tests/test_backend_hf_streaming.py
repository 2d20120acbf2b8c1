"""Long texts stream through sliding windows: bounded forwards, same numbers, progress shown."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.backends.base import ScoreRequest, TokenStats
from imprint.backends.hf import HFLogprobBackend, sliding_windows
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import batches_by_budget, run_plan

# mixed scripts and symbols: byte-level BPE splits most of these into many tokens
LONG = " ".join(
    [
        "Membership inference asks whether a text was in the training data.",
        "Ωμέγα και άλφα, 東京の天気は晴れ。 Привет, мир! مرحبا بالعالم 🙂",
        "In 2023 the council met in Seoul to discuss the budget: 1, 10, 100.",
    ]
    * 3
)
SHORT = "Hi there."


@pytest.fixture(scope="module")
def windowed(tiny_model_dir):
    return HFLogprobBackend(
        str(tiny_model_dir), device="cpu", max_length=32, stride=12, token_budget=64
    )


@contextmanager
def _record_forwards(backend: HFLogprobBackend) -> Iterator[list[tuple[int, int]]]:
    """(rows, width) of every forward through the backend's base model while in the block."""
    shapes: list[tuple[int, int]] = []
    base = getattr(backend.model, backend.model.base_model_prefix)

    def hook(module, args, kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = base.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


def _reference_windows(model, ids: list[int], max_length: int, stride: int) -> np.ndarray:
    """Brute force: each window alone through the full model, log p of its scored tokens."""
    out = []
    for window, first in sliding_windows(ids, max_length, stride):
        with torch.no_grad():
            logits = model(torch.tensor([window])).logits[0].float()
        logp = torch.log_softmax(logits[first - 1 : -1], -1)
        out.append(logp.gather(1, torch.tensor(window[first:])[:, None])[:, 0].numpy())
    return np.concatenate(out)


def test_long_text_scored_in_budgeted_forwards(tiny_model_dir, windowed):
    ids = [*windowed.start_ids, *windowed.encode(LONG)]
    assert len(ids) > 15 * windowed.max_length  # many windows
    with _record_forwards(windowed) as shapes:
        out = windowed.score([ScoreRequest(LONG), ScoreRequest(SHORT), ScoreRequest(LONG.upper())])
    assert len(shapes) > 10
    assert max(rows * width for rows, width in shapes) <= windowed.token_budget
    for text, stats in zip([LONG, SHORT, LONG.upper()], out, strict=True):
        text_ids = [*windowed.start_ids, *windowed.encode(text)]
        assert len(stats) == len(text_ids) - 1  # every token once, windows in order
        np.testing.assert_array_equal(stats.token_ids, text_ids[1:])
        ref = _reference_windows(windowed.model, text_ids, 32, 12)
        np.testing.assert_allclose(stats.logp, ref, atol=1e-4)


def test_streamed_equals_one_big_forward(tiny_model_dir, windowed):
    big = HFLogprobBackend(
        str(tiny_model_dir), device="cpu", max_length=32, stride=12, token_budget=10**6
    )
    with _record_forwards(big) as big_shapes:
        one = big.score([ScoreRequest(LONG), ScoreRequest(SHORT)])
    assert len(big_shapes) == 1  # every window of both texts in one forward
    streamed = windowed.score([ScoreRequest(LONG), ScoreRequest(SHORT)])
    for a, b in zip(one, streamed, strict=True):
        for field in TokenStats.FIELDS:
            np.testing.assert_allclose(getattr(a, field), getattr(b, field), atol=1e-4, rtol=1e-4)


def test_window_wider_than_budget_runs_alone(tiny_model_dir):
    narrow = HFLogprobBackend(
        str(tiny_model_dir), device="cpu", max_length=32, stride=16, token_budget=8
    )
    with _record_forwards(narrow) as shapes:
        stats = narrow.score([ScoreRequest(LONG)])[0]
    assert {rows for rows, _ in shapes} == {1} and max(w for _, w in shapes) == 32
    assert len(stats) == len(narrow.encode(LONG))


def test_prefixed_requests_stream_too(windowed):
    texts = [f"Hi {i} Ωμ" for i in range(12)]
    prefix = "In Seoul."
    with _record_forwards(windowed) as shapes:
        out = windowed.score([ScoreRequest(t, prefix=prefix) for t in texts])
    alone = [windowed.score([ScoreRequest(t, prefix=prefix)])[0] for t in texts[:3]]
    widths = [len(windowed.encode(t)) for t in texts]
    assert len(shapes) >= 3  # the prefix pass, then budget-sized chunks of the texts
    assert max(r * w for r, w in shapes[1:]) <= windowed.token_budget
    for stats, width in zip(out, widths, strict=True):
        assert len(stats) == width
    for a, b in zip(out[:3], alone, strict=True):
        np.testing.assert_allclose(a.logp, b.logp, atol=1e-5)


def test_progress_advances_within_one_long_text(windowed):
    steps: list[tuple[str, int]] = []

    def progress(label: str, total: int):
        steps.append(("total", total))
        return lambda n: steps.append(("advance", n))

    run_plan([LONG], [Need()], {"target": windowed}, SignalCache(None), progress=progress)
    advances = [n for kind, n in steps if kind == "advance"]
    assert len(advances) > 10  # shown per forward, not once at the end
    assert sum(advances) == steps[0][1]  # the bar ends exactly full


def test_long_text_is_a_batch_of_its_own():
    batches = batches_by_budget([500, 10, 12, 300, 64], 4096, max_length=64)
    assert batches[:2] == [[0], [3]]  # each long text alone, committed before the next starts
    assert sorted(batches[2]) == [1, 2, 4]


_REDUCE_RSS = """
import torch
from imprint.backends.reduce import reduce_hidden
def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4096
torch.manual_seed(0)
head = torch.nn.Linear(64, 49152, bias=False)  # SmolLM2's vocabulary
hidden, targets = torch.randn(4080, 64), torch.randint(0, 49152, (4080,))
with torch.no_grad():
    reduce_hidden(hidden[:170], targets[:170], head, vocab_size=49152)  # allocator warmed up
    before = rss()
    reduce_hidden(hidden, targets, head, vocab_size=49152)
print((rss() - before) // 2**20)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads RSS from /proc")
def test_chunked_reduction_keeps_resident_memory_flat():
    """4,080 positions x 49,152 logits: the chunks' ~32 MiB buffers must be reused, not pinned
    (results kept per chunk fragmented the heap: +1.8 GB resident; now a few hundred MB)."""
    done = subprocess.run(
        [sys.executable, "-c", _REDUCE_RSS], capture_output=True, text=True, check=True
    )
    grown_mib = int(done.stdout.split()[-1])
    assert grown_mib < 1024, f"resident memory grew by {grown_mib} MiB over one reduction"
