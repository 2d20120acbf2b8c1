"""The start token a game trains its texts after: the one scoring uses (``--start-token auto``).

Since game format 5 every training sequence (and every sampled pool text or canary) starts with
``auto``'s choice for the base tokenizer (SmolLM2-Instruct: ``<|endoftext|>``, not its chat-turn
BOS ``<|im_start|>``), the game's ``game.json`` and each trained model folder record it, and
``auto`` scores the game's models after the recorded token. Games of format 4 and older trained
after the tokenizer's BOS (else EOS) and recorded nothing: :func:`legacy_rule` recognises their
model folders, so they are still scored after the token they were trained after, with a note in
the run manifest (``models.<name>.start_token.reason``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from imprint.backends.start_token import (
    TRAINED_START_FILE,
    StartToken,
    choose_start_token,
    is_chat_marker,
)

__all__ = ["end_token_id", "game_tokens", "legacy_rule", "training_start_token"]

GAME_JSON = "game.json"  # build.MANIFEST (not imported: build imports this module)
REFERENCE_JSON = "reference.json"
LEGACY_NOTE = (
    "auto: an imprint game of format 4 or older, trained after the tokenizer's BOS (else EOS), "
    "so scored after it; rebuild the game (--force) to train and score after auto's choice"
)


def training_start_token(tokenizer: Any) -> StartToken:
    """The token a new game's texts follow: ``auto``'s choice, as scoring makes it."""
    start = choose_start_token(tokenizer, "auto")
    assert start.id is not None  # auto always names a token (or raises ConfigError)
    return start


def end_token_id(tokenizer: Any, start: StartToken) -> int:
    """The token after a training text: EOS, unless EOS is a chat-turn marker (SmolLM2-Instruct's
    ``<|im_end|>``); then the document separator the text started after."""
    eos = tokenizer.eos_token_id
    if eos is not None and not is_chat_marker(tokenizer, tokenizer.convert_ids_to_tokens(eos)):
        return int(eos)
    assert start.id is not None
    return start.id


def game_tokens(manifest: dict[str, Any], tokenizer: Any) -> tuple[StartToken, int]:
    """The start token and the end token id game ``manifest``'s texts were trained with: its
    record, else (a game of format 4 or older) the tokenizer's BOS (else EOS) and EOS (else BOS)."""
    start, end = manifest.get("start_token"), manifest.get("end_token")
    if isinstance(start, dict) and isinstance(start.get("id"), int):
        chosen = StartToken(start["id"], start.get("token"), "the game's training start token")
        end_id = end.get("id") if isinstance(end, dict) else None
        return chosen, end_id if isinstance(end_id, int) else end_token_id(tokenizer, chosen)
    old = choose_start_token(tokenizer, "bos")
    assert old.id is not None
    eos = tokenizer.eos_token_id
    return StartToken(old.id, old.text, LEGACY_NOTE), int(eos) if eos is not None else old.id


def legacy_rule(folder: Path) -> tuple[str, str] | None:
    """``bos`` for the model folder of a game or reference model built before format 5 (no
    record in the folder, a ``game.json`` or ``reference.json`` beside it), else None."""
    if (folder / TRAINED_START_FILE).exists() or folder.name != "model":
        return None
    beside = folder.parent
    if (beside / REFERENCE_JSON).is_file() or _is_game(beside / GAME_JSON):
        return "bos", LEGACY_NOTE
    return None


def _is_game(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "imprint_game" in data and "start_token" not in data
