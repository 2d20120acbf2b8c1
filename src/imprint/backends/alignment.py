"""Reading a server's prompt log-probs: which entry holds which token's distribution, checked.

An OpenAI-style ``echo`` + ``logprobs`` answer has, per prompt token ``t``, the token's text
(``tokens[t]``), where it starts in the prompt (``text_offset[t]``), a log-probability
(``token_logprobs[t]``) and the ``k`` best candidates (``top_logprobs[t]``, token text -> log p).
Correct servers (OpenAI's legacy completions, vLLM) put at entry ``t`` the distribution that
predicts token ``t`` (shift 0). llama-cpp-python's server, for a model that adds no BOS (SmolLM2),
puts at entry ``t`` the distribution that predicts token ``t + 1`` (shift 1): at " Boston" it
returns {" Mar": -0.63, " Boston": -10.61}, the candidates for the next token, and
``token_logprobs[t]`` is the log p of token ``t`` under that wrong distribution. It also sets
entry 0 to null in every case (the OpenAI convention for the first token).

:func:`detect_shift` tells the two apart on a probe text that repeats one sentence: in its
repeats the model is near-certain of every next token, so the argmax of entry ``t`` equals token
``t`` under shift 0 and token ``t + 1`` under shift 1. Anything else is refused with the counts.
:func:`token_rows` then reads, for each scored token, its log p and its candidates from the right
entry: under shift 1 a token's log p is only known when it is among the previous entry's
candidates (the value the server put in ``token_logprobs`` is not it), so a token that is not is
reported, never guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imprint.errors import ConfigError

# one sentence, three times: its 2nd and 3rd copies are predictable token by token (induction)
PROBE_SENTENCE = "The Boston Marathon is run every April from Hopkinton to Copley Square. "
PROBE_TEXT = PROBE_SENTENCE * 3
_DECIDE = 0.6  # share of predictable positions whose argmax must agree with one reading
_OTHER = 0.25  # ... while agreeing with the other reading at most this often


class _Repeated(dict[str, Any]):
    """A JSON object whose text repeated keys (``repeated``); the dict kept the last value."""

    repeated: frozenset[str] = frozenset()


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for key, _ in pairs:
        (repeated if key in seen else seen).add(key)
    if not repeated:
        return dict(pairs)
    out = _Repeated(pairs)
    out.repeated = frozenset(repeated)
    return out


def decode_answer(raw: str | bytes) -> Any:
    """A server's JSON answer, noting in each object the keys its text repeats (plain
    ``json.loads`` keeps the last value silently: a candidate list keyed by token text)."""
    return json.loads(raw, object_pairs_hook=_pairs)


@dataclass(frozen=True)
class EchoAnswer:
    """The ``logprobs`` object of one completions choice, checked for shape."""

    tokens: tuple[str, ...]
    offsets: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    top: tuple[Mapping[str, float] | None, ...]
    repeated: frozenset[str] = frozenset()  # candidate texts the answer's JSON repeats

    @classmethod
    def from_choice(cls, choice: Any, where: str) -> EchoAnswer:
        """From ``choices[0]``; ConfigError naming ``where`` when the shape is not OpenAI's."""
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        keys = ("tokens", "text_offset", "token_logprobs", "top_logprobs")
        if not isinstance(lp, dict) or not all(isinstance(lp.get(k), list) for k in keys):
            raise ConfigError(
                f"{where}: the answer has no logprobs object with {', '.join(keys)} (got "
                f"{_short(lp)}); the server does not return prompt log-probs with echo"
            )
        n = len(lp["tokens"])
        if any(len(lp[k]) != n for k in keys):
            lengths = {k: len(lp[k]) for k in keys}
            raise ConfigError(f"{where}: logprobs lists of different lengths {lengths}")
        try:
            top = tuple(
                None if t is None else {str(k): float(v) for k, v in dict(t).items()}
                for t in lp["top_logprobs"]
            )
            offsets = tuple(int(o) for o in lp["text_offset"])
            logprobs = tuple(None if v is None else float(v) for v in lp["token_logprobs"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"{where}: the answer's logprobs hold a value that is not a number ({exc}; "
                f"text_offset {_short(lp['text_offset'])}, token_logprobs "
                f"{_short(lp['token_logprobs'])}); the server's answer cannot be read"
            ) from None
        repeated = frozenset().union(*(getattr(t, "repeated", ()) for t in lp["top_logprobs"]))
        return cls(tuple(str(t) for t in lp["tokens"]), offsets, logprobs, top, repeated)

    def prompt_entries(self, prompt: str) -> int:
        """How many entries belong to the prompt (the rest are generated tokens)."""
        return sum(1 for o in self.offsets if o < len(prompt))


@dataclass(frozen=True)
class Alignment:
    """Which entry holds which token's distribution, and the evidence from the probe."""

    shift: int  # 0: entry t predicts token t; 1: entry t predicts token t + 1
    positions: int  # predictable probe positions counted
    same: int  # ... whose argmax is the token at that entry
    next: int  # ... whose argmax is the following token
    example: str  # one position, as the server answered it

    def describe(self) -> dict[str, Any]:
        return {
            "shift": self.shift,
            "probe_positions": self.positions,
            "argmax_is_this_token": self.same,
            "argmax_is_next_token": self.next,
            "example": self.example,
        }


def detect_shift(
    answer: EchoAnswer, prompt: str, context: str, where: str, start: str = ""
) -> Alignment:
    """The shift of ``answer`` to the probe ``prompt`` (= ``context`` + :data:`PROBE_TEXT`)."""
    prompt, context, skip = spelled(answer, prompt, context, start)
    check_tokens_cover(answer, prompt, where, skip)
    m = answer.prompt_entries(prompt)
    repeats = len(context) + len(PROBE_SENTENCE)  # the predictable repeats
    same = nxt = n = 0
    example = ""
    for i in range(m - 1):
        top = answer.top[i]
        if answer.offsets[i] < repeats or not top:
            continue
        best = max(top, key=top.__getitem__)
        n += 1
        same += best == answer.tokens[i]
        nxt += best == answer.tokens[i + 1]
        if not example and answer.tokens[i].strip() == "Boston":
            cands = dict(sorted(top.items(), key=lambda kv: -kv[1])[:3])
            example = f"at {answer.tokens[i]!r}: {_short(cands)}"
    evidence = (
        f"of {n} predictable probe positions, the argmax was the token at that entry at {same} "
        f"and the following token at {nxt}"
    )
    if n >= 10 and same >= _DECIDE * n and nxt <= _OTHER * n:
        return Alignment(0, n, same, nxt, example)
    if n >= 10 and nxt >= _DECIDE * n and same <= _OTHER * n:
        return Alignment(1, n, same, nxt, example)
    raise ConfigError(
        f"{where}: cannot tell which token the server's prompt log-probs belong to ({evidence}; "
        f"{example or 'no example'}); scoring would be wrong, so nothing is scored. Check that "
        "the server echoes the prompt with logprobs, or score the model locally (hf backend)"
    )


def spelled(answer: EchoAnswer, prompt: str, context: str, start: str) -> tuple[str, str, int]:
    """The prompt and context as the server's tokens spell them, and how many leading entries
    stand for the start token: llama-cpp-python renders a special start token as ``""`` (or
    drops its entry when it is the model's BOS), and its offsets count from the text after it."""
    joined = "".join(answer.tokens)
    if not start or joined.startswith(start) or not prompt.startswith(start):
        return prompt, context, 0
    skip = 1 if answer.tokens and answer.tokens[0] == "" and answer.offsets[0] == 0 else 0
    return prompt[len(start) :], context[len(start) :], skip


def check_tokens_cover(answer: EchoAnswer, prompt: str, where: str, skip: int = 0) -> None:
    """The server's tokens (after ``skip`` start-token entries) must spell the prompt at their
    offsets, in order, from 0; an empty token (bytes of a split character) is refused."""
    m = answer.prompt_entries(prompt)
    if m <= skip:
        raise ConfigError(f"{where}: the server returned no prompt tokens (echo ignored?)")
    empty = [i for i in range(skip, m) if answer.tokens[i] == ""]
    if empty:
        raise ConfigError(
            f"{where}: {len(empty)} of the server's {m - skip} prompt tokens have empty text "
            f"(first at token {empty[0] - skip}, offset {answer.offsets[empty[0]]}: bytes of a "
            "multi-byte character decoded lossily), and its candidates are keyed by that text, "
            "so log-probs cannot be assigned to tokens; this server cannot score this text "
            "(non-Latin scripts split into bytes): score it locally (hf) or with vLLM"
        )
    pos = 0
    for i in range(skip, m):
        tok, off = answer.tokens[i], answer.offsets[i]
        if off != pos or prompt[off : off + len(tok)] != tok:
            raise ConfigError(
                f"{where}: the server's token {i} {tok!r} at offset {off} does not match the "
                f"prompt there ({prompt[pos : pos + 12]!r} at {pos}); its tokens do not spell "
                "the prompt (tokens decoded lossily, e.g. bytes of a multi-byte character, or a "
                "missing first token), so log-probs cannot be assigned to tokens safely"
            )
        pos += len(tok)
    if pos != len(prompt):
        raise ConfigError(
            f"{where}: the server's tokens spell {pos} of the prompt's {len(prompt)} characters"
        )


@dataclass(frozen=True)
class TokenRow:
    """One scored token: its text, log p, and the candidates of its own distribution."""

    text: str
    logp: float
    candidates: Mapping[str, float]
    # vLLM's prompt_logprobs (keyed by token id): the ids, the server's rank and its best
    token_id: int | None = None
    rank: int | None = None
    best_id: int | None = None
    best_logp: float | None = None


def token_rows(
    answer: EchoAnswer,
    prompt: str,
    context: str,
    shift: int,
    first_candidates: Mapping[str, float] | None,
    where: str,
    start: str = "",
    ambiguous: Mapping[str, Sequence[int]] | None = None,
    asked: int | None = None,
    known: Mapping[int, float] | None = None,
) -> list[TokenRow]:
    """Rows for the tokens of ``prompt`` after ``context`` (the scored text).

    ``first_candidates`` are the candidates of the distribution after ``context`` alone (a
    separate request), used for the first scored token when the answer has no entry for it
    (entry 0 is null, or under shift 1 the entry before is the null one). A log p read from
    candidates by token text is refused when that text is ambiguous (:func:`check_collisions`:
    ``ambiguous`` from the local tokenizer, else the evidence in the answer, ``asked`` being
    the candidates asked per position). ``known`` maps a scored token's index among the
    text's tokens to its log p asked by id (a forced request,
    :func:`imprint.backends.ambiguous_tokens.forced_body`): read from there, never by text."""
    known = known or {}
    scored_first = bool(start or context)  # without any start token the first is context only
    prompt, context, skip = spelled(answer, prompt, context, start)
    check_tokens_cover(answer, prompt, where, skip)
    m = answer.prompt_entries(prompt)
    first = next((i for i in range(skip, m) if answer.offsets[i] >= len(context)), m)
    if skip < first < m and answer.offsets[first] != len(context):
        raise ConfigError(f"{where}: a server token spans the context/text boundary")
    if first > skip and answer.offsets[first - 1] + len(answer.tokens[first - 1]) > len(context):
        tok = answer.tokens[first - 1]
        raise ConfigError(
            f"{where}: the server's token {tok!r} spans the end of the context and the start of "
            "the text; end the prefix with whitespace or a newline"
        )
    rows, by_text = [], []
    missing: MissingLogprob | None = None
    for t in range(first, m):
        tok = answer.tokens[t]
        if t == first and not scored_first:  # no start token: the first is context only
            continue
        own = answer.top[t - shift] if t - shift >= 0 else None
        if t == first and (own is None or (shift == 0 and answer.logprobs[t] is None)):
            own = first_candidates
        if not own:  # None, or an empty top_logprobs entry: no rank, no best candidate
            raise ConfigError(
                f"{where}: the server's answer lists no candidates for token {t} {tok!r} "
                f"(got {own!r}); is logprobs >= 1 honoured?"
            )
        # aligned servers give each token's own log p (by id); else it is read by text
        from_server = shift == 0 and (t != first or answer.logprobs[t] is not None)
        logp = answer.logprobs[t] if from_server else own.get(tok)
        if t - first in known and not from_server:
            logp = known[t - first]  # asked by id: no text collision, never missing
        elif not from_server:
            by_text.append((t, own))
        if logp is None:
            if missing is None:
                missing = MissingLogprob(t, tok, len(own), where)
                missing.position = t - first
            continue
        check_logprob(logp, t, tok, own if from_server else None, ambiguous, where)
        rows.append(TokenRow(tok, float(logp), own))
    if shift == 0 and answer.repeated:  # rank, best candidate and moments read every entry
        raise ConfigError(
            f"{where}: the server's candidates repeat the text(s) {sorted(answer.repeated)[:5]!r} "
            "in one entry (token ids that decode alike, keyed by text): the rank, best candidate "
            "and top-k moments cannot be read; use the hf backend or a server keyed by token id"
        )
    # an ambiguous text is refused before more candidates are asked for the missing one
    check_collisions(answer, by_text, shift, ambiguous, asked, where, skip)
    if missing is not None:
        raise missing
    return rows


def check_logprob(
    logp: float,
    t: int,
    tok: str,
    own: Mapping[str, float] | None,
    ambiguous: Mapping[str, Sequence[int]] | None,
    where: str,
) -> None:
    """Refuse a log p no model gives: non-finite, above 0, or (``own``: an aligned server's own
    candidates, the token's text not shared by other ids) contradicting its candidate entry."""
    if not math.isfinite(logp) or logp > 1e-6:
        raise ConfigError(
            f"{where}: the server gave token {t} {tok!r} the log-probability {logp!r}, which no "
            "model gives (it must be finite and <= 0); the server's answer is wrong"
        )
    listed = None if own is None or (ambiguous and tok in ambiguous) else own.get(tok)
    if listed is not None and abs(listed - logp) > 1e-2:
        raise ConfigError(
            f"{where}: the server gave token {t} {tok!r} the log-probability {logp:.4f} but lists "
            f"it among its candidates at {listed:.4f}; the answer contradicts itself"
        )


def check_collisions(
    answer: EchoAnswer,
    read: Sequence[tuple[int, Mapping[str, float]]],
    shift: int,
    ambiguous: Mapping[str, Sequence[int]] | None,
    asked: int | None,
    where: str,
    skip: int = 0,
) -> None:
    """Refuse when a log p read by token text (entry ``t``, from candidates ``own``) may be
    another token's: candidates are keyed by text, and a server that renders several ids to one
    text keeps one value for all of them (llama-cpp-python keeps the LAST, least likely one,
    then overwrites the entry's own token's key with that token's log p).

    With a local tokenizer (``ambiguous``: text -> the ids rendering to it) the token's text
    is checked. Without one, the answer's own evidence: an entry holding fewer distinct
    candidates than ``asked`` (texts merged), or, under shift 1, a token whose text equals the
    previous token's (its key holds the previous token's log p, right only for the same id)."""
    bad = []
    for t, own in read:
        tok = answer.tokens[t]
        if tok in answer.repeated:
            bad.append(f"token {t - skip} {tok!r} (a key the answer repeats)")
            continue
        if ambiguous is not None:
            if tok in ambiguous:
                bad.append(f"token {t - skip} {tok!r} (rendered so by {len(ambiguous[tok])} ids)")
            continue
        if asked is not None and len(own) < asked:
            bad.append(f"token {t - skip} {tok!r} ({len(own)} distinct candidates of {asked})")
        elif shift == 1 and t > skip and answer.tokens[t - 1] == tok:
            bad.append(f"token {t - skip} {tok!r} (same text as the token before it)")
    if bad:
        how = "" if ambiguous is not None else " (give --model-arg tokenizer=SPEC to tell ids)"
        raise TokenCollision(
            f"{where}: the server keys candidates by token text, and the text of "
            f"{len(bad)} scored token(s) is ambiguous: {', '.join(bad[:3])}"
            f"{' ...' if len(bad) > 3 else ''}; their log p may be another token's, so this "
            f"text is refused{how}. Score it where log-probs come by token id: locally (hf) or "
            "through vLLM's prompt_logprobs"
        )


class TokenCollision(ConfigError):
    """A log p read by token text whose text several token ids share."""


class MissingLogprob(ConfigError):
    """A token's log p is not among the candidates the server returned for its position."""

    position = -1  # the token's index among the scored text's tokens (token_rows sets it)

    def __init__(self, index: int, token: str, k: int, where: str) -> None:
        self.index, self.token, self.k = index, token, k
        super().__init__(
            f"{where}: token {index} {token!r} is not among the {k} candidates the server gave "
            "for its position (its answer is shifted by one, so its own token_logprobs cannot be "
            "used); raise --model-arg max_top_logprobs or use a server that aligns prompt "
            "log-probs (vLLM)"
        )


def rank_of(logp: float, candidates: Mapping[str, float], token: str) -> int:
    """1 + candidates more likely than the token, when it is among them; else 0 (unknown)."""
    if token not in candidates:
        return 0
    return 1 + sum(1 for v in candidates.values() if v > logp)


def topk_moments(candidates: Mapping[str, float]) -> tuple[float, float]:
    """Mean and variance of log p over the candidates, weighted by p renormalised over them.

    An approximation of Min-K%++'s mu and sigma^2 (Zhang et al. 2025, Eq. 2), which are taken
    over the whole vocabulary: the tail beyond the top-k is left out."""
    values = [v for v in candidates.values() if math.isfinite(v)]
    if not values:
        return math.nan, math.nan
    top = max(values)
    weights = [math.exp(v - top) for v in values]
    total = sum(weights)
    mean = sum(w * v for w, v in zip(weights, values, strict=True)) / total
    var = sum(w * (v - mean) ** 2 for w, v in zip(weights, values, strict=True)) / total
    return mean, var


def server_text(tokenizer: Any, token_id: int) -> str:
    """A token's text as llama-cpp-python's server renders it: its bytes decoded with
    ``errors="ignore"`` (bytes of a split character vanish; HF's decode marks them U+FFFD)."""
    return str(tokenizer.decode([token_id])).replace("\ufffd", "")


def ambiguous_texts(tokenizer: Any) -> dict[str, tuple[int, ...]]:
    """Token texts that two or more ids render to (SmolLM2: " " for 38 ids, "" for 260): a
    server keying candidates by text keeps one value for all of them."""
    found = getattr(tokenizer, "_imprint_ambiguous", None)
    if found is None:
        by: dict[str, list[int]] = {}
        for i in range(len(tokenizer)):
            by.setdefault(server_text(tokenizer, i), []).append(i)
        found = {t: tuple(ids) for t, ids in by.items() if len(ids) > 1}
        tokenizer._imprint_ambiguous = found
    return dict(found)


def local_token_texts(tokenizer: Any, text: str) -> list[str]:
    """The text of each of ``text``'s tokens under the local tokenizer (no special tokens)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return [
        tokenizer.decode(ids[: i + 1])[len(tokenizer.decode(ids[:i])) :] for i in range(len(ids))
    ]


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
