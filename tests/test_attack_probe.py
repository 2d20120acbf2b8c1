"""The probe attack (Liu et al. 2024): standardisation and the probe fit on hand-made data, the
hidden_states request kind, agreement with a transcription of the authors' LRProbe on 40 texts,
and an end-to-end run whose proxy is trained on the run's held-out non-members."""

from __future__ import annotations

import numpy as np
import pytest
from attack_fixtures import (
    authors_lrprobe_transcription,
    client_for,
    run_fitted_on_held_out,
    wikimia_texts,
)
from scipy.stats import spearmanr

from imprint.attacks.probe import PROMPT, Probe, fit_probe, standardise
from imprint.errors import ConfigError
from imprint.requests.hidden_states import HiddenStatesRequest, hidden_states


def test_standardise_uses_each_sets_own_mean_and_sd():
    acts = np.array([[1.0, 5.0], [3.0, 5.0]])
    # column 1: mean 2, sd (ddof 1) sqrt(2); a constant column stays 0
    assert standardise(acts) == pytest.approx(np.array([[-1 / 2**0.5, 0.0], [1 / 2**0.5, 0.0]]))


def test_the_probe_weights_the_separating_direction():
    acts = np.array([[1.0, 0.3], [2.0, -0.2], [-1.0, 0.1], [-2.0, -0.3]])
    w = fit_probe(acts, np.array([1.0, 1.0, 0.0, 0.0]), lr=1e-2, weight_decay=0.0, epochs=500)
    assert w[0] > 0.5 and abs(w[1]) < w[0]
    with pytest.raises(ConfigError, match="template must contain"):
        Probe(template="no slot")


def test_hidden_states_are_every_layers_last_token_and_stored(tiny_model_dir):
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    client = in_memory_requests(backend)
    acts = hidden_states(client, "target", ["a short text", "another"], "Q: [TEXT] A:")
    n_layers, width = backend.model.config.num_hidden_layers, backend.model.config.hidden_size
    assert acts.shape == (2, n_layers, width) and acts.dtype == np.float32
    blob = HiddenStatesRequest.encode(acts[0])
    assert np.array_equal(HiddenStatesRequest.decode(blob), acts[0])
    again = hidden_states(client, "target", ["a short text"], "Q: [TEXT] A:")
    assert np.array_equal(again[0], acts[0])
    assert client.runner.counts.of("target", "hidden_states").executed == 2  # the third stored
    import torch

    ids = [*backend.start_ids, *backend.encode("Q: a short text A:")]
    with torch.no_grad():
        out = backend.model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    # layers before the last: HF's hidden states (the last one has the final norm applied)
    np.testing.assert_allclose(acts[0][0], out[1][0, -1].numpy(), rtol=1e-5, atol=1e-5)


def test_a_model_without_its_block_list_is_refused_by_name(tiny_model_dir):
    from imprint.backends.hf import HFLogprobBackend
    from imprint.errors import CapabilityError
    from imprint.requests.client import in_memory_requests

    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    backend.model.config.num_hidden_layers = 7  # no ModuleList of 7 blocks
    with pytest.raises(CapabilityError, match="no list of 7 decoder blocks found in"):
        hidden_states(in_memory_requests(backend), "target", ["a text"], PROMPT)


def test_probe_agrees_with_the_authors_lrprobe_on_40_texts(tiny_model_dir, one_torch_thread):
    import torch

    texts = wikimia_texts(50)
    client = client_for(str(tiny_model_dir))
    acts = hidden_states(client, "target", texts, PROMPT)[:, -1].astype(np.float64)
    labels = np.array([1.0, 0.0] * 5)
    w = fit_probe(standardise(acts[:10]), labels, lr=1e-3, weight_decay=0.1, epochs=1000)
    ours = standardise(acts[10:]) @ w
    gen = torch.Generator().manual_seed(0)
    d = acts.shape[1]
    init = ((torch.rand(d, generator=gen) * 2 - 1) / np.sqrt(d)).numpy()
    net = authors_lrprobe_transcription(standardise(acts[:10]), labels, init)
    with torch.no_grad():
        p = net(torch.tensor(standardise(acts[10:]), dtype=torch.float32)).squeeze(-1).double()
    theirs = torch.logit(p).numpy()
    gap = float(np.max(np.abs(ours - theirs)))
    rho = spearmanr(ours, p.numpy()).statistic
    print(
        f"probe vs authors' LRProbe transcription, 40 texts: max |logit diff| {gap:.2e}, "
        f"Spearman {rho:.4f}"
    )
    assert gap < 1e-3 and rho == pytest.approx(1.0)


def test_probe_runs_on_held_out_non_members(tiny_model_dir, tmp_path, one_torch_thread):
    params = {"n_train": 4, "probe_epochs": 50}
    result = run_fitted_on_held_out(tiny_model_dir, tmp_path, "probe", params, 4)
    assert len(result.samples) == 9  # 13 - 4 proxy texts
    assert np.all(np.isfinite(result.scores["probe"]))
    work = result.manifest["requests"]
    assert work["target"]["hidden_states"]["requests"] == 9
    assert work["probe-proxy"]["hidden_states"]["requests"] == 4
