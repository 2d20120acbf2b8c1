"""GradNorm: gradient norms match a direct backward pass, training lowers them (sign), and
backends without gradients are refused before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imprint.attacks.gradnorm import GradNorm
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import LOGPROBS, Backend
from imprint.backends.gradients import combine_norms, gradient_norms
from imprint.backends.hf import HFLogprobBackend
from imprint.errors import CapabilityError, ConfigError

TEXTS = ["The quick brown fox jumps over the lazy dog.", "In 2023 the council met in Seoul."]


#: tiny models run faster on one thread than on oversubscribed cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def direct_grads(backend: HFLogprobBackend, text: str) -> list[torch.Tensor]:
    ids = torch.tensor([[backend.bos_id, *backend.encode(text)]])
    backend.model.zero_grad()
    backend.model(input_ids=ids, labels=ids).loss.backward()
    grads = [p.grad.clone() for p in backend.model.parameters() if p.grad is not None]
    backend.model.zero_grad()
    return grads


def direct_norm(backend: HFLogprobBackend, text: str) -> float:
    return sum(float(g.pow(2).sum()) for g in direct_grads(backend, text)) ** 0.5


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
    class GrayBox(Backend):
        name = "api"
        capabilities = frozenset({LOGPROBS})

    attack = GradNorm()
    assert isinstance(attack, ModelCallAttack) and attack.needs() == ()
    with pytest.raises(CapabilityError, match="gradients"):
        attack.check_backend(GrayBox())
    with pytest.raises(CapabilityError):
        attack.score_with_backend(GrayBox(), TEXTS)


def test_combine_norms_global_and_tensor_mean_by_hand():
    # tensor a = (3, -4): l1 7, l2 5, linf 4; tensor b = (0, 1, 2, -2): l1 5, l2 3, linf 2
    grads = [torch.tensor([[3.0, -4.0]]), torch.tensor([0.0, 1.0, 2.0, -2.0])]
    assert combine_norms(grads, "l2", "global") == pytest.approx(34**0.5)  # sqrt(9+16+0+1+4+4)
    assert combine_norms(grads, "l1", "global") == pytest.approx(12.0)
    assert combine_norms(grads, "linf", "global") == pytest.approx(4.0)
    assert combine_norms(grads, "l2", "tensor_mean") == pytest.approx((5 + 3) / 2)  # MIMIR
    assert combine_norms(grads, "l1", "tensor_mean") == pytest.approx((7 + 5) / 2)
    assert combine_norms(grads, "linf", "tensor_mean") == pytest.approx((4 + 2) / 2)
    with pytest.raises(ConfigError, match="tensor_mean"):
        combine_norms(grads, "l2", "sum")
    with pytest.raises(ConfigError, match="no parameter"):
        combine_norms([], "l2", "global")


def test_tensor_mean_matches_mimirs_mean_of_per_tensor_norms(tiny_model_dir):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    for norm, p in (("l2", 2.0), ("linf", float("inf"))):
        attack = GradNorm(norm=norm, aggregate="tensor_mean")
        scores = attack.score_with_backend(backend, TEXTS)["gradnorm"]
        expected = [
            -float(
                np.mean(
                    [float(torch.linalg.vector_norm(g, ord=p)) for g in direct_grads(backend, t)]
                )
            )
            for t in TEXTS
        ]
        assert scores == pytest.approx(expected, rel=1e-4)
    # the default stays Wang et al.'s one norm of the whole gradient, and differs
    default = GradNorm().score_with_backend(backend, TEXTS)["gradnorm"]
    assert default == pytest.approx([-direct_norm(backend, t) for t in TEXTS], rel=1e-4)
    assert not np.allclose(
        default, GradNorm(aggregate="tensor_mean").score_with_backend(backend, TEXTS)["gradnorm"]
    )


def test_aggregation_is_a_named_validated_field():
    assert GradNorm().aggregate == "global"
    assert vars(GradNorm(aggregate="tensor_mean"))["aggregate"] == "tensor_mean"  # manifest
    assert "tensor_mean" in GradNorm.summary and "MIMIR" in GradNorm.summary
    with pytest.raises(ConfigError, match="gradnorm.*aggregation"):
        GradNorm(aggregate="mean")
