"""Token texts a text-keyed server cannot tell apart, found from the local tokenizer alone.

An echo + logprobs answer keys each position's candidates by token text (llama-cpp-python
decodes each id with ``errors="ignore"``), so ids that render alike share one key and the answer
keeps one value for all of them (:func:`imprint.backends.alignment.check_collisions`). SmolLM2
renders 38 ids as ``" "`` (the plain space and a space plus bytes of a split character); it
splits digits, so a ``" "`` token precedes most numbers after a space.

Which scored tokens of a text are ambiguous is decided here, before any request, from the local
tokenizer: the token ids, the text each renders to on such a server
(:func:`~imprint.backends.alignment.server_text`), and whether the text before the token
tokenises to exactly the tokens before it, so that the token can be asked alone: a completion of
that prefix whose one generated token is forced to the token's id (``logit_bias``), whose log p
the server reports by id (:func:`forced_body`). ``ambiguous=`` (model option) says what is done
with such texts: ``resolve`` (one forced request per ambiguous token), or ``drop`` (the text is
left out before scoring, counted by reason, its sample id in the manifest).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imprint.backends.alignment import (
    EchoAnswer,
    ambiguous_texts,
    local_token_texts,
    server_text,
)
from imprint.errors import ConfigError

log = logging.getLogger(__name__)

FORCE_BIAS = 100.0  # added to the forced id's logit: far above any logit gap of a real model
DROP_REASON = "ambiguous token text on a text-keyed server (--model-arg ambiguous=drop)"
UNSPLIT_REASON = "ambiguous token that cannot be asked alone (--model-arg ambiguous=drop)"


@dataclass(frozen=True)
class TextTokens:
    """One text as the local tokenizer splits it."""

    ids: tuple[int, ...]
    texts: tuple[str, ...]  # each token's text within the text (incremental decode)
    starts: tuple[int, ...]  # where each token starts in the text (characters)
    ambiguous: tuple[int, ...]  # positions whose server rendering several ids share
    unsplit: tuple[int, ...]  # ... of those, the ones whose prefix re-tokenises differently

    @property
    def clean(self) -> bool:
        return not self.ambiguous


def text_tokens(tokenizer: Any, text: str, table: Mapping[str, Sequence[int]]) -> TextTokens:
    """``text``'s tokens and which of them are ambiguous (``table``: :func:`ambiguous_texts`)."""
    ids = tuple(int(i) for i in tokenizer.encode(text, add_special_tokens=False))
    texts = tuple(local_token_texts(tokenizer, text))
    starts, pos = [], 0
    for piece in texts:
        starts.append(pos)
        pos += len(piece)
    ambiguous = tuple(i for i, t in enumerate(ids) if server_text(tokenizer, t) in table)
    unsplit = tuple(i for i in ambiguous if not _splits_at(tokenizer, text, ids, starts[i], i))
    return TextTokens(ids, texts, tuple(starts), ambiguous, unsplit)


def _splits_at(tokenizer: Any, text: str, ids: Sequence[int], start: int, i: int) -> bool:
    """Whether ``text[:start]`` tokenises to ``ids[:i]`` (then the token can be asked alone)."""
    if "".join(local_token_texts(tokenizer, text)[:i]) != text[:start]:
        return False
    return list(tokenizer.encode(text[:start], add_special_tokens=False)) == list(ids[:i])


def classify(tokenizer: Any, texts: Sequence[str]) -> list[TextTokens]:
    """:func:`text_tokens` of each text, with the tokenizer's ambiguity table computed once."""
    table = ambiguous_texts(tokenizer)
    return [text_tokens(tokenizer, t, table) for t in texts]


def forced_body(model: str, prompt: str, token_id: int, k: int) -> dict[str, Any]:
    """A completion of ``prompt`` whose one generated token is forced to ``token_id``.

    llama-cpp-python (0.3.x, ``Llama._create_completion``) applies ``logit_bias`` in the
    sampler only, on a copy of the logits, and reports the generated token's log p from the
    unbiased scores by id (``logprobs_token[int(token)]``), with ``echo: false`` read from the
    row that predicts it: the token's exact log p, whatever text other ids render to. The probe
    (:meth:`imprint.backends.http_forced_tokens.ForcedTokens._probe_forcing`) checks a server
    does so before it is relied on.
    """
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": False,
        "logprobs": k,
        "logit_bias": {str(int(token_id)): FORCE_BIAS},
    }


EMPTY_REASON = "a token the server renders as empty text (bytes of a split character)"
UNFORCED_REASON = "ambiguous token text; the server cannot be asked by token id"


class TokenAmbiguous(ConfigError):
    """A text whose ambiguous token texts ``ambiguous=`` does not let imprint score."""


def cannot_force(where: str, note: str, n: int, *, texts: bool = False) -> str:
    what = f"{n} text(s) hold" if texts else "this text holds"
    return (
        f"{where}: {what} token texts that several token ids render to, and their log p cannot "
        f"be asked by id here ({note}); nothing was scored. --model-arg ambiguous=drop (or "
        "resolve_or_drop) leaves such texts out, counted, their ids in the manifest"
    )


def forcing_probe(tokenizer: Any, start: str) -> tuple[str, int, int]:
    """(prompt, expected next id, forced id): the probe sentence twice then its first word,
    whose next token the model is near-sure of; forced instead: the sentence's last word."""
    from imprint.backends.alignment import PROBE_SENTENCE

    ids = tokenizer.encode(PROBE_SENTENCE, add_special_tokens=False)
    first_word = tokenizer.decode(ids[:1])
    forced = next(i for i in reversed(ids[:-1]) if i not in ids[:2])
    return start + PROBE_SENTENCE * 2 + first_word, int(ids[1]), int(forced)


def check_forcing(answer: EchoAnswer, forced_text: str, expected_text: str) -> str | None:
    """None when the forced answer generated the forced token and reports its unbiased log p
    (well below the best candidate's, which is the model's sure next token); else what the
    server did instead."""
    if not answer.tokens or answer.tokens[0] != forced_text:
        got = answer.tokens[0] if answer.tokens else None
        return f"it generated {got!r}, not the forced {forced_text!r}: logit_bias ignored"
    logp = answer.logprobs[0]
    top = answer.top[0] or {}
    if logp is None or not math.isfinite(logp) or not top:
        return "it gave the forced token no log p or no candidates"
    best = max(top, key=top.__getitem__)
    if best != expected_text:
        return f"its best candidate {best!r} is not the sure next token {expected_text!r}"
    if logp > top[best] - 1.0:
        return f"the forced token's log p {logp:.3f} is the biased one, not the model's"
    return None


def forced_logprob(answer: EchoAnswer, forced_text: str, where: str) -> float:
    """The forced token's log p, checked: the generated token is the forced one."""
    logp = answer.logprobs[0] if answer.logprobs else None
    if not answer.tokens or answer.tokens[0] != forced_text or logp is None:
        got = answer.tokens[:1]
        raise ConfigError(
            f"{where}: the server generated {got!r}, not the forced {forced_text!r}, or no log p "
            "for it; the forced token was not honoured (it was at the probe)"
        )
    if not math.isfinite(logp) or logp > 1e-6:
        raise ConfigError(f"{where}: the forced token's log p {logp!r} is not a log-probability")
    return float(logp)


def drop_unscorable(backend: Any, samples: Sequence[Any], dropped: dict[str, int]) -> list[Any]:
    """``samples`` without those ``backend.unscorable`` names (a backend without it: all kept),
    each left out counted in ``dropped`` by reason and its id kept in the backend's manifest
    entry (``dropped_ids``). Called before any text is scored."""
    find = getattr(backend, "unscorable", None)
    if find is None:
        return list(samples)
    out = find([s.text for s in samples])
    if not out:
        return list(samples)
    ids: dict[str, list[str]] = getattr(backend, "dropped_ids", {})
    left: dict[str, list[str]] = {}
    for n, reason in sorted(out.items()):
        dropped[reason] = dropped.get(reason, 0) + 1
        ids.setdefault(reason, []).append(str(samples[n].id))
        left.setdefault(reason, []).append(str(samples[n].id))
    # said on the terminal too: the plan line that follows counts only the texts kept
    for reason, which in left.items():
        shown = ", ".join(which[:5]) + (f", ... ({len(which) - 5} more)" if len(which) > 5 else "")
        log.warning(
            "left out %d of %d texts the server cannot score (%s): %s; all ids in the "
            "manifest's models.target.ambiguous.dropped_ids",
            len(which), len(samples), reason, shown,
        )  # fmt: skip
    return [s for n, s in enumerate(samples) if n not in out]
