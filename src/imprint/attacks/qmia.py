"""Quantile-regression MIA (Bertran et al. 2023, "Scalable Membership Inference Attacks via
Quantile Regression", NeurIPS 2023).

No reference model is trained: a regressor q learns, from non-member texts only, the
(1 - alpha)-quantile of the target's score on a text of that kind, and x is called a member at
false-positive rate alpha when its score exceeds it (Section 3, Eq. 2: minimise the pinball loss
l_tau(y, q) = max(tau (y - q), (tau - 1)(y - q)), tau = 1 - alpha, over non-members; Eq. 3:
member iff s(x) > q(x)). Score = s(x) - q(x), higher = member, with s(x) = LL(x), the target's
mean token log-likelihood.

The regressor, as in LeakPro's ``qmia.py`` (``QuantileRegressor``, ``PinballLoss``, trained with
Adam at weight decay 1e-4, batches of 64) and MIMIR's ``quantile.py`` (a pre-trained text model
with a regression head): a linear head on a pre-trained encoder's features, here the frozen
all-MiniLM-L6-v2 sentence embedding of x (``embed`` requests, stored like every model call),
trained by Adam (batches of 64) on the pinball loss, on the first k principal components of the
training embeddings only, with 10 training texts per fitted parameter (more parameters than that
interpolate). The non-members are the first ``n_train`` (default 20) of the run's held-out
non-members (``--shot-holdout``; out of every attack's evaluation; or a ``nonmembers`` pool): no
evaluated text is ever a training text.

Minimum fit size: k + 1 = n_train // texts_per_parameter, so below 2 x texts_per_parameter
training texts (20 at the default) k = 0 and the head is a constant, the empirical quantile:
LL(x) - q is then LL(x) shifted, ranking every text exactly as ``loss`` (same AUC, interval and
TPR). Such a configuration is refused, naming the flags to raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, ScoringInputs, register
from imprint.attacks.contract import prepared_field
from imprint.attacks.shots import nonmember_shots, too_few_held_out
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.requests.kinds import EmbedRequest
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet

__all__ = ["QMIA", "fit_quantile_head", "pinball_loss", "principal_components"]


def pinball_loss(y: np.ndarray, q: np.ndarray, tau: float) -> float:
    """Mean pinball loss max(tau (y - q), (tau - 1)(y - q)) (Bertran et al., Eq. 2)."""
    e = np.asarray(y, np.float64) - np.asarray(q, np.float64)
    return float(np.mean(np.maximum(tau * e, (tau - 1.0) * e)))


def fit_quantile_head(
    features: np.ndarray,
    targets: np.ndarray,
    tau: float,
    *,
    epochs: int,
    lr: float,
    weight_decay: float,
    batch_size: int = 64,
    seed: int = 0,
) -> Any:
    """A linear map features (n, d) -> tau-quantile of ``targets`` (n,), trained by Adam on the
    pinball loss over batches of ``batch_size`` in order (LeakPro's loop: no shuffling). Targets
    are standardised by their mean and sd first (undone in the returned predictor)."""
    import torch

    y = np.asarray(targets, np.float64)
    centre, scale = float(y.mean()), float(y.std()) or 1.0
    x_t = torch.tensor(np.asarray(features), dtype=torch.float32)
    y_t = torch.tensor((y - centre) / scale, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(x_t.shape[1], 1)
    with torch.no_grad():  # nn.Linear's default init, drawn from a seeded generator
        bound = 1.0 / np.sqrt(x_t.shape[1])
        head.weight.uniform_(-bound, bound, generator=generator)
        head.bias.uniform_(-bound, bound, generator=generator)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        for start in range(0, len(y_t), batch_size):
            xb, yb = x_t[start : start + batch_size], y_t[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            err = yb - head(xb).squeeze(-1)
            loss = torch.mean(torch.maximum(tau * err, (tau - 1.0) * err))
            loss.backward()
            optimizer.step()

    def predict(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = head(torch.tensor(np.asarray(x), dtype=torch.float32)).squeeze(-1)
        return out.double().numpy() * scale + centre

    return predict


def principal_components(x: np.ndarray, k: int) -> Any:
    """A map onto the first ``k`` principal components of ``x`` (n, d) (centred by its mean);
    k <= 0 maps every row to one zero column (a head on it is a constant)."""
    x = np.asarray(x, np.float64)
    k = min(k, x.shape[1], x.shape[0] - 1)
    if k <= 0:
        return lambda rows: np.zeros((len(rows), 1))
    centre = x.mean(axis=0)
    _, _, vt = np.linalg.svd(x - centre, full_matrices=False)
    basis = vt[:k].T

    def project(rows: np.ndarray) -> np.ndarray:
        return (np.asarray(rows, np.float64) - centre) @ basis

    return project


@register("qmia")
@dataclass(frozen=True)
class QMIA(Attack):
    takes_held_out: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    alpha: float = 0.1
    n_train: int = 20  # the least that fits a head reading the text (k = 1 component)
    epochs: int = 1000
    lr: float = 1e-2
    weight_decay: float = 1e-4
    texts_per_parameter: int = 10
    _train: tuple[str, ...] | None = prepared_field()

    summary = (
        "LL(x) minus a regressor's (1 - alpha)-quantile of non-member LL given x (linear head on "
        "MiniLM embeddings, pinball loss, fitted on held-out non-members)"
    )
    paper = "Bertran et al. 2023, Scalable Membership Inference Attacks via Quantile Regression"
    deviations: ClassVar[tuple[str, ...]] = (
        "The regressor is a linear head on frozen all-MiniLM-L6-v2 embeddings (MIMIR fine-tunes "
        "funnel-transformer-small, LeakPro the target's backbone): nothing is fine-tuned.",
        "The head reads only the first k principal components of the training embeddings, with "
        "10 training texts per fitted parameter (k + 1 = n_train // 10; at least 20 texts, "
        "k = 1): a 385-parameter head on 10 texts interpolates, and its 0.9-quantile was "
        "exceeded by 33-67 % of fresh non-members instead of 10 %.",
        "Targets are standardised and the head trained 1,000 Adam epochs (batches of 64) at lr "
        "1e-2 (LeakPro: 100 epochs at 1e-3, with many batches per epoch on image data).",
        "LeakPro casts the regression targets to integers (target.long()) and keeps only the "
        "last batch of its training data; imprint does neither.",
        "MIMIR's pinball term max(alpha (q - y), (1 - alpha)(y - q)) fits the (1 - alpha)-"
        "quantile of the loss, the wrong tail for a loss, and returns q - loss under a 'higher "
        "= non-member' comment; imprint fits the (1 - alpha)-quantile of LL and scores LL - q.",
        "alpha = 0.1 by default (MIMIR sets none; LeakPro fits the levels 0.05, 0.25, 0.5, "
        "0.75, 0.95), fitted on 20 held-out non-members (LeakPro: half the population data), "
        "so it needs --shot-holdout 20; fewer than 2 x texts_per_parameter training texts "
        "(k = 0: a constant head that ranks texts exactly as loss) are refused.",
    )

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ConfigError(f"qmia.alpha (the target FPR) must be in (0, 1), got {self.alpha}")
        if (
            self.n_train < 2
            or self.epochs < 1
            or self.lr <= 0
            or self.weight_decay < 0
            or self.texts_per_parameter < 1
        ):
            raise ConfigError(
                "qmia needs n_train >= 2, epochs >= 1, lr > 0, weight_decay >= 0 and "
                "texts_per_parameter >= 1; got "
                f"n_train={self.n_train}, epochs={self.epochs}, lr={self.lr}, "
                f"weight_decay={self.weight_decay}, texts_per_parameter={self.texts_per_parameter}"
            )
        least = 2 * self.texts_per_parameter
        if self.n_train < least:  # k = 0: a constant head, so qmia would rank texts as loss does
            raise ConfigError(
                f"qmia.n_train={self.n_train} training texts at texts_per_parameter="
                f"{self.texts_per_parameter} fit only a constant quantile head (k = 0 principal "
                f"components), so qmia would rank every text exactly as loss; give it at least "
                f"{least}: --param qmia.n_train={least} with --shot-holdout {least} (or a "
                "nonmembers pool), or lower --param qmia.texts_per_parameter"
            )

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return too_few_held_out("qmia", run, cls.n_train)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        shots = nonmember_shots(samples, run, self.n_train, attack="qmia")
        return Preparation(
            removed_ids=shots.removed_ids,
            reason=f"qmia: {len(shots.samples)} training non-members from {shots.source}",
            attack=replace(self, _train=tuple(s.text for s in shots.samples)),
        )

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """A pass per training text, an embedding per training and evaluated text."""
        train = tuple(self._train or ())
        passes = [("target", LogprobRequest(t)) for t in train]
        embeds = [("embedder", EmbedRequest(text=s.strip())) for s in (*train, *texts)]
        return AttackCalls.of([*passes, *embeds])

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score(self, inputs: ScoringInputs | SignalSet) -> dict[str, np.ndarray]:
        inputs = ScoringInputs.of(inputs)
        if inputs.signals is None or inputs.requests is None or self._train is None:
            raise ConfigError(
                "qmia fits on held-out non-members: call prepare(samples, run) first and pass "
                "ScoringInputs(texts, signals=..., requests=...) (a run does both)"
            )
        ll = np.array([float(np.mean(s.logp)) for s in inputs.signals.get()])
        train_ll = np.array(
            [float(np.mean(s.logp)) for s in inputs.requests.token_stats("target", self._train)]
        )
        features = inputs.requests.embed([*self._train, *inputs.texts])
        return {
            self.name: self.scores(
                features[: len(self._train)], train_ll, features[len(self._train) :], ll
            )
        }

    def scores(
        self, train_x: np.ndarray, train_ll: np.ndarray, x: np.ndarray, ll: np.ndarray
    ) -> np.ndarray:
        """LL(x) - q(x), q fitted on (train_x, train_ll); shape (len(ll),). The head reads the
        first k principal components of the training embeddings, k + 1 = n_train //
        texts_per_parameter (k = 0: a constant, the empirical quantile)."""
        project = principal_components(train_x, len(train_ll) // self.texts_per_parameter - 1)
        q = fit_quantile_head(
            project(train_x),
            train_ll,
            1.0 - self.alpha,
            epochs=self.epochs,
            lr=self.lr,
            weight_decay=self.weight_decay,
        )
        return np.asarray(ll, np.float64) - q(project(x))
