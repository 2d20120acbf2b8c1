"""The probe attack (Liu et al. 2024, "Probing Language Models for Pre-training Data Detection",
ACL 2024, the ArxivMIA paper).

Section 3: fine-tune a copy of the target (the proxy) on half of some known non-member texts, so
that they become members of the proxy; train a linear probe on the proxy's activations to tell
those texts from the other half; then read the target's activations on each evaluated text with
the probe. The activation is the output of a decoder layer at the last token of the text put in
the authors' prompt ("Here is a statement:\\n\\n[TEXT]\\n\\nIs the above statement correct?
Answer: "); the layer is the one whose probe separates a held-out part of the proxy data best
(the probe is then refitted on all the proxy texts).

Defaults of the authors' code (``zhliu0106/probing-lm-data``): proxy fine-tuned 2 epochs at a
constant lr of 1e-3 with AdamW (one step per 100 texts: here one full batch per epoch), probe
``LRProbe`` = sigmoid(w . a) without bias, AdamW lr 1e-3, weight decay 0.1, 1,000 full-batch
epochs on binary cross-entropy, every set's activations centred and scaled by its own mean and
sd. Score = w . a (the probe's logit; its sigmoid ranks the same), higher = member.

The known non-members are the first ``n_train`` (default 10) of the run's held-out non-members
(``--shot-holdout``, out of every attack's evaluation; or a ``nonmembers`` pool). White-box: the
target must be a local model (its weights are copied and trained).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, ScoringInputs, register
from imprint.attacks.contract import prepared_field
from imprint.attacks.shots import nonmember_shots, too_few_held_out
from imprint.backends.base import Access
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.requests.hidden_states import HiddenStatesRequest, context_ids, hidden_states
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet

__all__ = ["Probe", "fit_probe", "layer_split", "proxy_split", "standardise"]

PROMPT = "Here is a statement:\n\n[TEXT]\n\nIs the above statement correct? Answer: "
PROXY_ROLE = "probe-proxy"


def standardise(acts: np.ndarray) -> np.ndarray:
    """Centre and scale each column by the set's own mean and sd (ddof 1, as torch.std)."""
    sd = acts.std(axis=0, ddof=1)
    return (acts - acts.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def fit_probe(
    acts: np.ndarray, labels: np.ndarray, *, lr: float, weight_decay: float, epochs: int
) -> np.ndarray:
    """Weights w (d,) of the probe sigmoid(w . a) (no bias) on activations (n, d): torch's
    Linear initialisation under seed 0, then ``epochs`` full-batch AdamW steps on binary
    cross-entropy (the authors' ``LRProbe.from_data``)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.tensor(acts, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.float32)
    bound = 1.0 / np.sqrt(x.shape[1])
    w = (torch.rand(x.shape[1], generator=gen) * 2 - 1) * bound
    w.requires_grad_(True)
    optimizer = torch.optim.AdamW([w], lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy(torch.sigmoid(x @ w), y)
        loss.backward()
        optimizer.step()
    return w.detach().double().numpy()


def proxy_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the proxy's members, 0/1 labels of all ``n`` proxy texts): a seeded half."""
    order = np.random.default_rng(0).permutation(n)
    members = order[: n // 2]
    return members, np.isin(np.arange(n), members).astype(float)


def layer_split(labels: np.ndarray) -> np.ndarray:
    """Mask of the proxy texts the per-layer probes are fitted on: a seeded stratified half of
    each label (at least one); the others choose the layer."""
    rng = np.random.default_rng(1)
    fit = np.zeros(len(labels), bool)
    for cls in (0.0, 1.0):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        fit[idx[: max(1, len(idx) // 2)]] = True
    return fit


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2 else 0.5


@register("probe")
@dataclass(frozen=True)
class Probe(Attack):
    takes_held_out: ClassVar[bool] = True
    access: ClassVar[Access] = Access.WHITE_BOX
    n_train: int = 10
    ft_epochs: int = 2
    ft_lr: float = 1e-3
    probe_epochs: int = 1000
    probe_lr: float = 1e-3
    probe_weight_decay: float = 0.1
    template: str = PROMPT
    _train: tuple[str, ...] | None = prepared_field()

    summary = (
        "linear probe on the activations of a proxy (the target fine-tuned on half of the "
        "held-out non-members), applied to the target's activations"
    )
    paper = "Liu et al. 2024, Probing Language Models for Pre-training Data Detection"
    deviations: ClassVar[tuple[str, ...]] = (
        "The layer is chosen on a stratified half of the proxy's own texts (probes fitted on "
        "the other half; with 10 texts an AUC over 3 x 3 pairs, noisy) and the probe is then "
        "refitted on all of them; the authors fit on their 200 proxy texts and choose the "
        "layer by AUC on a labelled 400-text dev split (evaluation labels imprint never reads); "
        "the SoK's port applies the last layer's probe to the chosen layer.",
        "Proxy: the target fine-tuned 2 full-batch AdamW steps at lr 1e-3 on 5 of the run's 10 "
        "held-out non-members (the authors: 2 steps too, batches of 50 with 2 accumulations, on "
        "100 of 200 ArxivMIA texts, lr swept over 8e-4, 9e-4, 1e-3, in bf16; imprint float32).",
        "The score is the probe's logit w . a (the authors' sigmoid ranks the same without "
        "saturating); activations are read after imprint's start token.",
        "The target's activations are standardised by the scored set's own mean and sd, as the "
        "authors do: a text's score depends on the texts scored with it.",
    )

    def __post_init__(self) -> None:
        if self.n_train < 4 or self.ft_epochs < 1 or self.probe_epochs < 1:
            raise ConfigError(
                "probe needs n_train >= 4 (two proxy members and two non-members), ft_epochs "
                f">= 1 and probe_epochs >= 1; got {self.n_train}, {self.ft_epochs}, "
                f"{self.probe_epochs}"
            )
        if "[TEXT]" not in self.template:
            raise ConfigError("probe.template must contain [TEXT], where the text goes")

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return too_few_held_out("probe", run, cls.n_train)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        shots = nonmember_shots(samples, run, self.n_train, attack="probe")
        return Preparation(
            removed_ids=shots.removed_ids,
            reason=f"probe: {len(shots.samples)} proxy texts from {shots.source}",
            attack=replace(self, _train=tuple(s.text for s in shots.samples)),
        )

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """Hidden states of the training texts under the proxy, of every text under the target."""
        out = [(PROXY_ROLE, HiddenStatesRequest(text=t, template=self.template))
               for t in self._train or ()]  # fmt: skip
        out += [("target", HiddenStatesRequest(text=t, template=self.template)) for t in texts]
        return AttackCalls.of(out)

    def needs(self) -> tuple[Need, ...]:
        return ()

    def score(self, inputs: ScoringInputs | SignalSet) -> dict[str, np.ndarray]:
        inputs = ScoringInputs.of(inputs)
        requests = inputs.requests
        if requests is None or self._train is None:
            raise ConfigError(
                "probe trains on held-out non-members: call prepare(samples, run) first and "
                "pass ScoringInputs(texts, requests=...) (a run does both)"
            )
        if requests.local("target") is None:
            raise ConfigError("probe fine-tunes a copy of the target: it needs a local model")
        idx, labels = proxy_split(len(self._train))
        self._proxy(requests, [self._train[i] for i in idx])
        proxy_acts = hidden_states(requests, PROXY_ROLE, self._train, self.template)
        layer, _ = self.choose_layer(proxy_acts, labels)
        w = fit_probe(  # refitted on every proxy text once the layer is chosen
            standardise(proxy_acts[:, layer].astype(np.float64)),
            labels,
            lr=self.probe_lr,
            weight_decay=self.probe_weight_decay,
            epochs=self.probe_epochs,
        )
        target_acts = hidden_states(requests, "target", inputs.texts, self.template)
        return {self.name: standardise(target_acts[:, layer].astype(np.float64)) @ w}

    def choose_layer(self, acts: np.ndarray, labels: np.ndarray) -> tuple[int, np.ndarray]:
        """(layer, probe weights): probes fitted on a stratified half of the proxy texts, the
        layer whose probe has the highest AUC on the other half (the first on ties)."""
        fit = layer_split(labels)
        best: tuple[float, int, np.ndarray] | None = None
        for layer in range(acts.shape[1]):
            x = acts[:, layer].astype(np.float64)
            w = fit_probe(
                standardise(x[fit]),
                labels[fit],
                lr=self.probe_lr,
                weight_decay=self.probe_weight_decay,
                epochs=self.probe_epochs,
            )
            auc = _auc(labels[~fit], standardise(x[~fit]) @ w)
            if best is None or auc > best[0]:
                best = (auc, layer, w)
        assert best is not None
        return best[1], best[2]

    def _proxy(self, requests: Any, members: Sequence[str]) -> None:
        """Register the proxy (the target fine-tuned on ``members``) in role probe-proxy."""
        from imprint.backends.hf import HFLogprobBackend

        if requests.has_role(PROXY_ROLE):
            return
        local = requests.local("target")
        key = hashlib.sha256(
            repr((requests.fingerprint("target"), members, self.ft_epochs, self.ft_lr)).encode()
        ).hexdigest()[:16]
        model = fine_tune(local, members, self.template, epochs=self.ft_epochs, lr=self.ft_lr)
        proxy = HFLogprobBackend(
            f"probe-proxy-{key}", name=PROXY_ROLE, model=model, tokenizer=local.tokenizer
        )
        requests.add_role(PROXY_ROLE, proxy)  # a model of this run only: no worker builds it


def fine_tune(local: Any, texts: Sequence[str], template: str, *, epochs: int, lr: float) -> Any:
    """A copy of ``local``'s model trained ``epochs`` full-batch AdamW steps at constant ``lr``
    on the causal-LM loss of the templated texts (after the start token; padding masked; a text
    too long for the context cut as :func:`context_ids` cuts it)."""
    import torch

    model = copy.deepcopy(local.model).float()
    rows = [context_ids(local, template, t) for t in texts]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device=local.device)
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=local.device)
    labels = ids.masked_fill(mask == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)  # Trainer's
    torch.manual_seed(0)
    model.train()
    for _ in range(epochs):
        optimizer.zero_grad()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
    model.eval()
    return model
