"""Which token a scored text follows: the one the model saw at document boundaries in pre-training.

A causal LM gives no log-probability to a text's first token unless something precedes it, so
every text is scored after one start token. Which token matters: an instruct tokenizer's BOS can be
a chat-turn marker (SmolLM2's ``<|im_start|>``), after which the model expects a role name, so the
first word gets a very low log p and lands in every Min-K % set. ``auto`` therefore takes the
tokenizer's BOS only when it is not a chat marker (Gemma's ``<bos>``, Llama's ``<s>``), else the
document separator of pre-training (``<|endoftext|>`` and kin), else a non-chat EOS.

Options: ``auto``; ``bos`` (the tokenizer's BOS, else EOS: imprint's behaviour before the choice
existed); ``none`` (no start token: the first text token is context only, never scored); or a
literal token string such as ``<|endoftext|>`` that is one token of the vocabulary.

A model folder imprint trained (a privacy game's model, its reference models) records the token
its texts were trained after in :data:`TRAINED_START_FILE`; ``auto`` on such a folder takes that
token (:func:`resolve_start_token`), so a member is scored in the context it was trained in.
Folders trained before the record existed are recognised by rules, entry points of the group
``imprint.start_token_rules`` (imprint's older games: the game declares its rule there, in
imprint's own pyproject.toml, imported when a folder without a record is first scored) or added
with :func:`register_start_token_rule`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError
from imprint.registry import Registry

START_TOKEN_CHOICES = ("auto", "bos", "none")
#: In a model folder imprint trained: the start token its texts were trained after.
TRAINED_START_FILE = "imprint-start-token.json"
#: ``rule(folder) -> (option, reason) | None`` for folders with no record (see the module doc)
StartTokenRule = Callable[[Path], "tuple[str, str] | None"]
#: the entry-point group of start-token rules (``NAME = "pkg.module:rule"``)
RULE_GROUP = "imprint.start_token_rules"
#: rules tried in the order added (those registered at run time by "module:name", then the entry
#: points); each is imported when a folder without a record is first scored
_RULES: Registry[StartTokenRule] = Registry("start-token rule", group=RULE_GROUP)
# end-of-document tokens of common pre-training corpora, most specific first
DOCUMENT_SEPARATORS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")
# chat-turn markers by name, for tokenizers that ship no chat template
_CHAT_MARKER = re.compile(
    r"im_start|im_end|start_of_turn|end_of_turn|header_id|eot_id|<\|(user|assistant|system)\|>"
)


@dataclass(frozen=True)
class StartToken:
    """The chosen start token (``id`` None: no start token) and why it was chosen."""

    id: int | None
    text: str | None
    reason: str

    @property
    def ids(self) -> tuple[int, ...]:
        """The tokens put before every scored text: one, or none."""
        return () if self.id is None else (self.id,)

    def key(self) -> str:
        """The part of a backend fingerprint that identifies this choice."""
        return "none" if self.id is None else str(self.id)

    def describe(self) -> dict[str, Any]:
        return {"token": self.text, "id": self.id, "reason": self.reason}


def is_chat_marker(tokenizer: Any, token: str) -> bool:
    """True when ``token`` opens or closes chat turns rather than documents.

    A token the chat template writes out more than once (once per message) is a turn marker; a
    document-level BOS appears at most once there, usually as ``{{ bos_token }}``.
    """
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates
        template = " ".join(str(t) for t in template.values())
    if isinstance(template, str) and template.count(token) >= 2:
        return True
    return bool(_CHAT_MARKER.search(token))


def choose_start_token(tokenizer: Any, option: str = "auto") -> StartToken:
    """Resolve a ``--start-token`` option against ``tokenizer``; see the module docstring."""
    option = option.strip()
    if not option:
        raise ConfigError(
            f"start token must be one of {', '.join(START_TOKEN_CHOICES)} or a token string; "
            "got an empty string"
        )
    keyword = option.lower()  # 'None' or 'AUTO' mean the keyword, never the word "None"
    if keyword == "none":
        return StartToken(None, None, "none: no start token; first text token is context only")
    if keyword == "bos":
        return _bos_or_eos(tokenizer, "bos: the tokenizer's BOS token")
    if keyword == "auto":
        return _auto(tokenizer)
    return _literal(tokenizer, option)


def register_start_token_rule(rule: StartTokenRule) -> None:
    """Add a rule naming the start token a model folder without a record was trained after."""
    name = f"{rule.__module__}:{rule.__qualname__}"
    if name not in _RULES:
        _RULES.add(name, rule)


def write_trained_start_token(folder: Path | str, start: StartToken) -> None:
    """Record in model ``folder`` that its texts were trained after ``start``."""
    record = {"token": start.text, "id": start.id, "reason": start.reason}
    (Path(folder) / TRAINED_START_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def resolve_start_token(
    tokenizer: Any, option: str = "auto", *, folder: Path | str | None = None
) -> StartToken:
    """:func:`choose_start_token`, except that ``auto`` on a model ``folder`` imprint trained
    takes the token that model was trained after (its record, else a registered rule)."""
    if folder is None or option.strip().lower() != "auto":
        return choose_start_token(tokenizer, option)
    folder = Path(folder)
    record = folder / TRAINED_START_FILE
    if record.is_file():
        return _recorded(tokenizer, record)
    for rule in _RULES.load_all(sort=False).values():
        found = rule(folder)
        if found is not None:
            chosen, reason = found
            return replace(choose_start_token(tokenizer, chosen), reason=reason)
    return choose_start_token(tokenizer, option)


def _recorded(tokenizer: Any, record: Path) -> StartToken:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        token_id, text = data["id"], data["token"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"{record} is unreadable ({err}); it names the start token this model was trained "
            "after: restore it, or pass --start-token explicitly"
        ) from err
    if token_id is None:
        return StartToken(None, None, f"auto: trained with no start token ({record})")
    valid = isinstance(token_id, int) and 0 <= token_id < len(tokenizer)
    if not valid or _token(tokenizer, token_id) != text:
        raise ConfigError(
            f"{record} names start token {text!r} (id {token_id}), which this model's tokenizer "
            "does not have at that id; pass --start-token explicitly"
        )
    return StartToken(token_id, text, f"auto: the token this model was trained after ({record})")


def context_token_id(tokenizer: Any, start: StartToken) -> int:
    """A token for contexts that need one even when texts have no start token (generation from
    an empty prompt, padding): the start token, else the automatic choice, else id 0."""
    if start.id is not None:
        return start.id
    try:
        chosen = _auto(tokenizer).id
    except ConfigError:  # a tokenizer without BOS or EOS: any id serves as masked padding
        chosen = None
    return 0 if chosen is None else chosen


def _token(tokenizer: Any, token_id: int) -> str:
    return str(tokenizer.convert_ids_to_tokens(int(token_id)))


def _bos_or_eos(tokenizer: Any, reason: str) -> StartToken:
    for attr, why in (("bos_token_id", reason), ("eos_token_id", "the tokenizer has no BOS; EOS")):
        token_id = getattr(tokenizer, attr, None)
        if token_id is not None:
            return StartToken(int(token_id), _token(tokenizer, token_id), why)
    raise ConfigError(
        "the tokenizer has neither a BOS nor an EOS token; pass a start token that is in its "
        "vocabulary (--start-token '<TOKEN>') or --start-token none"
    )


def _vocab_id(tokenizer: Any, token: str) -> int | None:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token):
        return None
    return int(token_id)


def _auto(tokenizer: Any) -> StartToken:
    bos = tokenizer.bos_token_id
    if bos is not None and not is_chat_marker(tokenizer, _token(tokenizer, bos)):
        return StartToken(int(bos), _token(tokenizer, bos), "auto: the tokenizer's BOS token")
    why = (
        f"auto: the BOS {_token(tokenizer, bos)!r} is a chat-turn marker"
        if bos is not None
        else "auto: the tokenizer has no BOS"
    )
    for token in DOCUMENT_SEPARATORS:
        token_id = _vocab_id(tokenizer, token)
        if token_id is not None and not is_chat_marker(tokenizer, token):
            return StartToken(token_id, token, f"{why}; the document separator {token!r}")
    eos = tokenizer.eos_token_id
    if eos is not None and not is_chat_marker(tokenizer, _token(tokenizer, eos)):
        return StartToken(int(eos), _token(tokenizer, eos), f"{why}; the EOS token")
    # nothing better exists: keep the tokenizer's own start token and say so in the manifest
    kept = _bos_or_eos(tokenizer, "")
    return StartToken(kept.id, kept.text, f"{why}; no document separator found, kept {kept.text!r}")


def _literal(tokenizer: Any, token: str) -> StartToken:
    specials = set(getattr(tokenizer, "all_special_tokens", [])) | set(
        getattr(tokenizer, "added_tokens_encoder", {}) or {}
    )
    if token not in specials:  # an ordinary word before every text would skew every score
        raise ConfigError(
            f"start token {token!r} is not a special token of this tokenizer; a start token marks "
            f"a document boundary: use auto, bos, none or one of {_known_specials(tokenizer)}"
        )
    token_id = _vocab_id(tokenizer, token)
    if token_id is None:
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ConfigError(
                f"start token {token!r} is not one token of this tokenizer (it encodes to "
                f"{len(ids)} tokens); use auto, bos, none or a special token of the vocabulary "
                f"such as {_known_specials(tokenizer)}"
            )
        token_id = int(ids[0])
    return StartToken(token_id, token, "given with --start-token")


def _known_specials(tokenizer: Any) -> str:
    specials = list(getattr(tokenizer, "all_special_tokens", []))[:6]
    return ", ".join(repr(s) for s in specials) or "'<|endoftext|>'"
