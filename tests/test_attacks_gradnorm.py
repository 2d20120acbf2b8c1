"""GradNorm: gradient norms match a direct backward pass, training lowers them (sign), and
backends without gradients are refused before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imprint.attacks.gradnorm import GradNorm
from imprint.backends.base import LOGPROBS
from imprint.backends.gradients import gradient_norms
from imprint.backends.hf import HFLogprobBackend
from imprint.errors import CapabilityError

TEXTS = ["The quick brown fox jumps over the lazy dog.", "In 2023 the council met in Seoul."]


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run faster on one thread than on oversubscribed cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def direct_norm(backend: HFLogprobBackend, text: str) -> float:
    ids = torch.tensor([[backend.bos_id, *backend.encode(text)]])
    backend.model.zero_grad()
    backend.model(input_ids=ids, labels=ids).loss.backward()
    total = sum(
        float(p.grad.pow(2).sum()) for p in backend.model.parameters() if p.grad is not None
    )
    backend.model.zero_grad()
    return total**0.5


def test_gradient_norms_match_a_direct_backward(tiny_model_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    norms = gradient_norms(backend, TEXTS)
    assert norms == pytest.approx([direct_norm(backend, t) for t in TEXTS], rel=1e-4)
    assert all(p.grad is None for p in backend.model.parameters())  # .grad untouched
    linf = gradient_norms(backend, TEXTS[:1], norm="linf")
    assert 0 < linf[0] < norms[0]


def test_sliding_windows_cover_long_texts(tiny_model_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu", max_length=8, stride=4)
    norms = gradient_norms(backend, TEXTS)
    assert np.isfinite(norms).all() and (norms > 0).all()


def test_training_on_a_text_raises_its_gradnorm_score(tiny_model_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    attack = GradNorm()
    before = attack.score_with_backend(backend, TEXTS)["gradnorm"]
    ids = torch.tensor([[backend.bos_id, *backend.encode(TEXTS[0])]])
    optimiser = torch.optim.Adam(backend.model.parameters(), lr=1e-2)
    for _ in range(30):  # make TEXTS[0] a member
        optimiser.zero_grad()
        backend.model(input_ids=ids, labels=ids).loss.backward()
        optimiser.step()
    backend.model.zero_grad()
    after = attack.score_with_backend(backend, TEXTS)["gradnorm"]
    assert after[0] > before[0]  # smaller gradient -> higher score
    assert after[0] > after[1]  # the member outranks the non-member


def test_backend_without_gradients_is_refused():
    class GrayBox:
        name = "api"
        capabilities = frozenset({LOGPROBS})

    attack = GradNorm()
    assert attack.needs_backend and attack.needs() == ()
    with pytest.raises(CapabilityError, match="gradients"):
        attack.check_backend(GrayBox())
    with pytest.raises(CapabilityError):
        attack.score_with_backend(GrayBox(), TEXTS)
