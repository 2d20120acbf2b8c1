"""A known-fraction game for DUCI (:mod:`imprint.documents.duci`): targets fine-tuned on 0, 25,
50 or 100 % of a document set, and K reference models on paired random halves of it, so the
estimate can be checked against the truth.

Built from the privacy game's parts (:mod:`imprint.game`): the same start and end tokens around
each trained text, the same training loop (:func:`imprint.game.train.train`, full fine-tune,
AdamW, seeded shuffles) and the same paired reference halves
(:func:`imprint.game.reference.reference_halves`). Models stay in memory (nothing is written):
this is a measurement, not a game folder to share. Each document is one text; a target trained
on a fraction f trains on a seeded random ``round(f * n)`` of the documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.documents.duci import duci_from_signals
from imprint.errors import ConfigError

__all__ = ["fraction_game", "random_documents"]

_WORDS = tuple(
    [
        "amber",
        "basalt",
        "cobalt",
        "delta",
        "ember",
        "fjord",
        "garnet",
        "harbor",
        "indigo",
        "jasper",
        "kelp",
        "lagoon",
        "marble",
        "nickel",
        "onyx",
        "prairie",
        "quartz",
        "river",
        "saffron",
        "tundra",
        "umber",
        "violet",
        "walnut",
        "xenon",
        "yarrow",
        "zephyr",
    ]
)


def random_documents(n: int, words: int, *, seed: int = 0) -> list[str]:
    """``n`` seeded texts of ``words`` words drawn from a small fixed vocabulary: texts a model
    can only predict well by having trained on them."""
    rng = np.random.default_rng([seed, 31])
    return [" ".join(rng.choice(_WORDS, size=words)) for _ in range(n)]


def _train(spec: str, texts: list[str], *, epochs: int, lr: float, seed: int) -> Any:
    """A copy of the model at ``spec`` fine-tuned on ``texts`` (in memory); the base itself
    when ``texts`` is empty."""
    from imprint.backends.models import load_causal_lm
    from imprint.backends.start_token import choose_start_token
    from imprint.game.config import GameConfig
    from imprint.game.start import end_token_id
    from imprint.game.train import encode_sequences, prepare_model, train

    model, tokenizer = load_causal_lm(spec, device="cpu")
    if not texts:
        return model, tokenizer
    config = GameConfig(
        model=spec, pool="given", method="full", lr=lr, epochs=epochs, batch_size=8, seed=seed
    )
    start = choose_start_token(tokenizer, "bos")
    assert start.id is not None
    seqs = encode_sequences(
        tokenizer,
        {str(i): t for i, t in enumerate(texts)},
        max_length=config.max_length,
        start_id=start.id,
        end_id=end_token_id(tokenizer, start),
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start.id
    model = prepare_model(model, config, spec)
    train(model, list(seqs.values()), config, pad_id=int(pad), epochs=epochs, progress=False)
    return model, tokenizer


def _signals(spec: str, model: Any, tokenizer: Any, texts: Sequence[str]) -> np.ndarray:
    """Mean token log-likelihood of each text (one log-prob pass, start token bos)."""
    from imprint.backends.base import ScoreRequest
    from imprint.backends.hf import HFLogprobBackend

    backend = HFLogprobBackend(spec, model=model, tokenizer=tokenizer, start_token="bos")
    return np.array([float(s.logp.mean()) for s in backend.score([ScoreRequest(t) for t in texts])])


def fraction_game(
    spec: str,
    *,
    documents: Sequence[str] | None = None,
    population: Sequence[str] | None = None,
    fillers: Sequence[str] | None = None,
    n_documents: int = 40,
    words: int = 12,
    fractions: Sequence[float] = (0.0, 0.25, 0.5, 1.0),
    k: int = 4,
    epochs: int = 10,
    lr: float = 3e-3,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> list[dict[str, Any]]:
    """Train the reference models once and a target per fraction; DUCI on each target.

    ``documents`` (default: ``n_documents`` random texts) are the set whose usage is inferred;
    ``population`` (default: half as many more random texts) are texts no model trains on, the
    population of RMIA; ``fillers`` (default: random texts) top every model's training up to
    ``len(documents)`` texts. Returns one row per fraction: ``fraction``, ``truth`` (the share
    trained on), ``estimate``, ``interval``, ``naive`` (undebiased share guessed member),
    ``tpr``, ``fpr``, ``a``, ``degenerate_share`` (resamples without TPR > FPR), and
    ``signals`` (every model's mean log-likelihood of the documents then the population, and
    the reference memberships) to re-estimate from."""
    from imprint.game.reference import reference_halves

    if documents is None or population is None:
        pool = random_documents(n_documents + max(4, n_documents // 2), words, seed=seed)
        documents = pool[:n_documents] if documents is None else documents
        population = pool[n_documents:] if population is None else population
    docs, pop = list(documents), list(population)
    texts = docs + pop
    n = len(docs)
    # every model trains on n texts: its documents, topped up with filler texts of the same
    # kind that are neither documents nor population (so a target that used 0 % of the
    # documents is still trained like the others, as a real model is trained on other data)
    filler = list(fillers) if fillers is not None else random_documents(n, words, seed=seed + 7919)
    if len(filler) < n or set(filler) & set(texts):
        raise ConfigError(
            f"fraction_game needs >= {n} filler texts that are neither documents nor population"
        )
    ids = [str(i) for i in range(n)]
    halves = reference_halves(ids, k, seed)
    member = np.array([[int(i in h) for i in ids] for h in halves])

    def scored(trained: list[int], train_seed: int) -> np.ndarray:
        chosen = [docs[i] for i in trained] + filler[: n - len(trained)]
        model, tokenizer = _train(spec, chosen, epochs=epochs, lr=lr, seed=train_seed)
        return _signals(spec, model, tokenizer, texts)

    refs = np.stack([scored(sorted(int(i) for i in h), seed + 1 + j) for j, h in enumerate(halves)])
    rows = []
    for f in fractions:
        chosen = np.random.default_rng([seed, 53, int(round(f * 1000))]).permutation(n)
        trained = sorted(chosen[: int(round(f * n))].tolist())
        target = scored(trained, seed + 100)
        r = duci_from_signals(
            target[:n], refs[:, :n], member, target[n:], refs[:, n:],
            n_bootstrap=n_bootstrap, seed=seed,
        )  # fmt: skip
        keys = ("estimate", "interval", "naive", "tpr", "fpr", "a", "degenerate_share")
        signals = {"target": target.tolist(), "refs": refs.tolist(), "member": member.tolist()}
        rows.append(
            {
                "fraction": float(f),
                "truth": len(trained) / n,
                **{x: r.to_dict()[x] for x in keys},
                "signals": signals,  # to recompute the interval without retraining
            }
        )
    return rows
