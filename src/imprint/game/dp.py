"""Differentially private fine-tuning of a game's model: DP-SGD with Opacus (LoRA adapters only).

Abadi et al. 2016's DP-SGD as Opacus implements it: Poisson sampling of the training sequences
(rate ``1 / ceil(n / batch_size)``, Opacus's ``1 / len(data_loader)``, so the expected batch is
about ``batch_size``), per-sample gradients clipped to ``max_grad_norm``, Gaussian noise of
``noise_multiplier * max_grad_norm`` added to their sum, the noise multiplier calibrated so the
RDP accountant's epsilon after all steps is at most ``dp_epsilon`` at ``dp_delta``. One training
sequence is the privacy unit, so a canary repeated ``r`` times is protected only by group
privacy: a DP game's one-run canaries are each seen once.

LoRA, not full fine-tuning: LoRA's trainable modules are plain ``nn.Linear`` layers, for which
Opacus has exact per-sample gradients; a full fine-tune of these models also trains their RMSNorm
layers (no Opacus grad sampler) and SmolLM2's embedding tied to its output layer (a shared
parameter Opacus's hooks would count twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imprint.errors import ConfigError
from imprint.game.config import GameConfig

__all__ = ["DP_ACCOUNTANT", "check_dp_available", "train_dp"]

#: Opacus's Renyi-DP accountant: a conservative upper bound (the PRV accountant is tighter but
#: its numerical error can put the reported epsilon slightly above the target).
DP_ACCOUNTANT = "rdp"


def check_dp_available() -> None:
    """Raise a teaching error when Opacus is not installed."""
    try:
        import opacus  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            "DP training (--dp-epsilon) needs Opacus: pip install 'llm-imprint[dp]' (or pip "
            "install opacus; install CPU torch first so it does not pull a CUDA build)"
        ) from err


def _loader(sequences: Sequence[list[int]], batch_size: int, pad: int) -> Any:
    """A plain DataLoader over the sequences; Opacus replaces its sampler by Poisson sampling.

    An item is ``(ids, mask)``, the batch's own layout: when the first Poisson batch is empty,
    Opacus's loader has no batch to copy and builds zero-row tensors from one item's fields, so
    the fields must be the batch's (one tensor per field), or ``ids, mask = batch`` fails.
    """
    import torch

    rows = [torch.tensor(s, dtype=torch.long) for s in sequences]

    class _Sequences(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(rows)

        def __getitem__(self, i: int) -> tuple[Any, Any]:
            return rows[i], torch.ones_like(rows[i])

    def collate(batch: list[tuple[Any, Any]]) -> tuple[Any, Any]:
        seqs = [b[0] for b in batch]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = s, 1
        return ids, mask

    return torch.utils.data.DataLoader(_Sequences(), batch_size=batch_size, collate_fn=collate)


def _sample_losses(model: Any, ids: Any, mask: Any) -> Any:
    """Mean next-token loss of each sequence (shape ``[batch]``): each sample weighs the same."""
    import torch

    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    target, keep = ids[:, 1:], mask[:, 1:].float()
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none"
    ).view(target.shape)
    return (nll * keep).sum(1) / keep.sum(1).clamp(min=1)


def train_dp(
    model: Any,
    sequences: Sequence[list[int]],
    config: GameConfig,
    *,
    pad_id: int,
    console: Any = None,
    progress: bool = True,
) -> tuple[list[float], dict[str, Any]]:
    """DP-SGD for ``config.epochs`` epochs on a LoRA-prepared ``model`` (trained in place).

    Returns the mean training loss of each epoch and the privacy record for ``game.json``:
    target and achieved epsilon (the accountant's, at ``dp_delta``), noise multiplier, sample
    rate, steps, clipping norm. An empty Poisson batch is a noise-only step, as the analysis
    assumes.
    """
    import torch
    from opacus import PrivacyEngine

    from imprint.backends.scoped import seeded_torch
    from imprint.game.train import _training_bar

    check_dp_available()
    assert config.dp_epsilon is not None
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=float(config.lr or 0), weight_decay=config.weight_decay
    )
    engine = PrivacyEngine(accountant=DP_ACCOUNTANT, secure_mode=False)
    noise_rng = torch.Generator(device=device).manual_seed(config.seed)
    private, optimizer, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=_loader(sequences, config.batch_size, pad_id),
        target_epsilon=float(config.dp_epsilon),
        target_delta=float(config.dp_delta),
        epochs=config.epochs,
        max_grad_norm=float(config.max_grad_norm),
        noise_generator=noise_rng,
    )
    losses: list[float] = []
    steps = 0
    bar = _training_bar(console, progress)
    with bar, seeded_torch(config.seed, device):
        task = bar.add_task("DP training", total=len(loader) * config.epochs)
        private.train()
        for epoch in range(1, config.epochs + 1):
            total, count = 0.0, 0
            for ids, mask in loader:
                if ids.shape[0] == 0:  # nobody sampled: the step still adds noise
                    for p in params:
                        p.grad_sample = torch.zeros((0, *p.shape), device=device)
                else:
                    loss = _sample_losses(private, ids.to(device), mask.to(device)).mean()
                    loss.backward()
                    total, count = total + float(loss.detach()), count + 1
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
                bar.update(task, advance=1, description=f"DP epoch {epoch}/{config.epochs}")
            losses.append(total / max(count, 1))
    private.remove_hooks()
    for p in params:
        p.grad_sample = None
    model.eval()
    return losses, {
        "mechanism": "DP-SGD (Opacus), LoRA adapters, Poisson sampling",
        "target_epsilon": float(config.dp_epsilon),
        "delta": float(config.dp_delta),
        "epsilon": float(engine.get_epsilon(float(config.dp_delta))),
        "accountant": DP_ACCOUNTANT,
        "noise_multiplier": float(optimizer.noise_multiplier),
        "max_grad_norm": float(config.max_grad_norm),
        "sample_rate": float(loader.sample_rate),
        "steps": steps,
        "privacy_unit": "one training sequence",
        "secure_rng": False,
    }
