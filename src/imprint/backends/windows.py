"""Sliding windows over a long text's token ids: the scoring policy the Hugging Face backend and
the gradient norms share (every token scored exactly once, with ``max_length - stride`` tokens of
context after the first window)."""

from __future__ import annotations

from imprint.errors import ConfigError


def sliding_windows(ids: list[int], max_length: int, stride: int) -> list[tuple[list[int], int]]:
    """Split ``ids`` (BOS included) into windows (ids, first scored index).

    Every position >= 1 is scored exactly once; windows after the first keep
    ``max_length - stride`` tokens of context.
    """
    if len(ids) <= max_length:
        return [(ids, 1)]
    if not 0 < stride < max_length:
        raise ConfigError(f"stride must be in (0, max_length={max_length}), got {stride}")
    windows = [(ids[:max_length], 1)]
    context = max_length - stride
    next_pos = max_length
    while next_pos < len(ids):
        start = next_pos - context
        windows.append((ids[start : start + max_length], context))
        next_pos = start + max_length
    return windows
