"""Training members into a model: plain torch loop, AdamW, causal LM loss, seeded.

Each training sequence is ``[start] + tokens(text) + [end]``, ``start`` the token scoring puts
before a text (``--start-token auto``'s choice, see :mod:`imprint.game.start`), so a member is
trained in exactly the context it is later scored in; ``end`` is EOS unless EOS is a chat-turn
marker, then ``start`` (the document separator). The learning rate is
constant and epoch ``e`` shuffles with the seed ``(seed, e)`` alone, so stopping after ``e``
epochs gives the same weights as a run asked for ``e`` epochs: snapshots are real games.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imprint.backends.layers import find_layers
from imprint.backends.scoped import seeded_torch
from imprint.errors import ConfigError, DataError
from imprint.game.config import GameConfig

__all__ = [
    "check_trainable",
    "encode_sequences",
    "find_layers",
    "prepare_model",
    "save_model",
    "train",
]

EpochHook = Callable[[int, float, Any], None]


def _linear_names(model: Any) -> list[str]:
    import torch

    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear)
        }
    )


def check_trainable(model: Any, config: GameConfig, spec: str) -> None:
    """Raise :class:`ConfigError` when ``config.method`` cannot train ``model`` (no work done)."""
    if not any(p.is_floating_point() for p in model.parameters()):
        raise ConfigError(f"model {spec!r} has no floating-point parameters to train")
    if config.method == "lora":
        names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        missing = [t for t in config.lora_targets if t not in names]
        if missing:
            raise ConfigError(
                f"LoRA target module(s) {missing} not found in model {spec!r}; its linear "
                f"modules are {_linear_names(model)}. Fix: pass lora_targets from that list."
            )
    if config.method == "top":
        layers = find_layers(model)
        if layers is None:
            raise ConfigError(
                f"model {spec!r}: no list of transformer blocks found, so 'top' training cannot "
                "pick the top layers; use method 'full' or 'lora'"
            )
        if config.top_layers > len(layers):
            raise ConfigError(
                f"top_layers={config.top_layers} but model {spec!r} has only {len(layers)} "
                "transformer blocks; lower top_layers or use method 'full'"
            )


def prepare_model(model: Any, config: GameConfig, spec: str) -> Any:
    """Make the parameters ``config.method`` trains require grad; return the model to train."""
    if config.method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            target_modules=list(config.lora_targets),
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        # LoRA's initialisation is random: seeded, in a fork of torch's RNGs (the caller's
        # random state is left as it was)
        with seeded_torch(config.seed, next(model.parameters()).device):
            model = get_peft_model(model, lora)
    else:
        for p in model.parameters():
            p.requires_grad_(config.method == "full" and p.is_floating_point())
        if config.method == "top":
            layers = find_layers(model)
            for p in layers[-config.top_layers :].parameters():
                p.requires_grad_(True)
            norm = getattr(getattr(model, "model", None), "norm", None)
            if norm is not None:
                for p in norm.parameters():
                    p.requires_grad_(True)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if n_train == 0:
        raise ConfigError(
            f"model {spec!r} has no trainable parameters under method {config.method!r}"
        )
    return model


def encode_sequences(
    tokenizer: Any, texts: dict[str, str], *, max_length: int, start_id: int, end_id: int
) -> dict[str, list[int]]:
    """``[start] + tokens + [end]`` per text id; a text over ``max_length`` tokens is a
    DataError. ``start`` is the token scoring puts before the text (see game/start.py)."""
    out: dict[str, list[int]] = {}
    too_long: list[tuple[str, int]] = []
    for key, text in texts.items():
        ids = [start_id, *tokenizer(text, add_special_tokens=False)["input_ids"], end_id]
        if len(ids) > max_length:
            too_long.append((key, len(ids)))
        out[key] = ids
    if too_long:
        worst = max(n for _, n in too_long)
        raise DataError(
            f"{len(too_long)} text(s) are longer than max_length={max_length} tokens (with the "
            f"start and end tokens), e.g. {too_long[0][0]!r} with {too_long[0][1]} tokens, "
            f"longest {worst}. "
            "Texts are never cut silently. Fix: fewer words per text (words / canary_words) "
            f"or max_length >= {worst} (within the model's context)."
        )
    return out


def _batches(
    sequences: Sequence[list[int]], order: np.ndarray, batch_size: int, pad: int
) -> list[tuple[Any, Any, Any]]:
    import torch

    out = []
    for start in range(0, len(order), batch_size):
        rows = [sequences[i] for i in order[start : start + batch_size]]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        labels = ids.masked_fill(mask == 0, -100)
        out.append((ids, mask, labels))
    return out


def train(
    model: Any,
    sequences: Sequence[list[int]],
    config: GameConfig,
    *,
    pad_id: int,
    epochs: int,
    on_epoch_end: EpochHook | None = None,
    console: Any = None,
    progress: bool = True,
) -> list[float]:
    """Train for ``epochs`` epochs; returns the mean training loss of each epoch.

    ``on_epoch_end(epoch, loss, model)`` runs after each epoch (1-based), e.g. to save snapshots.
    """
    import torch

    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=float(config.lr or 0), weight_decay=config.weight_decay
    )
    n_batches = math_ceil(len(sequences), config.batch_size)
    losses: list[float] = []
    bar = _training_bar(console, progress)
    # dropout, where a model has any, draws from torch's RNG: seeded, in a fork (the caller's
    # random state is left as it was)
    with bar, seeded_torch(config.seed, device):
        task = bar.add_task("training", total=n_batches * epochs)
        model.train()
        for epoch in range(1, epochs + 1):
            order = np.random.default_rng([config.seed, epoch]).permutation(len(sequences))
            batches = _batches(sequences, order, config.batch_size, pad_id)
            losses.append(_one_epoch(model, optimizer, batches, device, bar, task, epoch, epochs))
            if on_epoch_end is not None:
                model.eval()
                on_epoch_end(epoch, losses[-1], model)
                model.train()
    model.eval()
    return losses


def _training_bar(console: Any, progress: bool) -> Any:
    from imprint.report.progress import rich_bars

    return rich_bars(console, unit="batches", disable=not progress)


def _one_epoch(
    model: Any,
    optimizer: Any,
    batches: Sequence[tuple[Any, Any, Any]],
    device: Any,
    bar: Any,
    task: Any,
    epoch: int,
    epochs: int,
) -> float:
    """One pass over the batches; the epoch's mean training loss."""
    total, count = 0.0, 0
    for ids, mask, labels in batches:
        loss = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)
        ).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        total += float(loss.detach())
        count += 1
        description = f"training epoch {epoch}/{epochs} loss {total / count:.3f}"
        bar.update(task, advance=1, description=description)
    return total / max(count, 1)


def math_ceil(n: int, d: int) -> int:
    return -(-n // d)


def save_model(model: Any, tokenizer: Any, folder: Path, *, lora: bool) -> None:
    """``save_pretrained`` the weights (LoRA merged into a copy) and the tokenizer."""
    if lora:
        model = copy.deepcopy(model).merge_and_unload()
    if getattr(model, "hf_quantizer", None) is not None:  # e.g. a model loaded from GGUF
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
