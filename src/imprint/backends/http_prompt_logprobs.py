"""vLLM's ``prompt_logprobs`` in an OpenAI-compatible completions answer, read and checked.

vLLM's OpenAI-compatible server takes ``prompt_logprobs: k`` on ``POST /v1/completions`` (an
extension of the OpenAI API) and answers, in each choice, ``prompt_logprobs``: one entry per
prompt token, ``null`` for the first, else an object keyed by token id (JSON: the id as a
string) whose values are ``{"logprob": float, "rank": int, "decoded_token": str}`` for the actual
token and the ``k`` best (vLLM's ``CompletionResponseChoice.prompt_logprobs`` and ``Logprob``
models). Entry ``t`` holds the distribution that predicts token ``t`` (no shift), keyed by id, so
neither the shift nor the text collisions of echo answers (:mod:`.alignment`) can occur; the rank
is the server's, over the whole vocabulary. Newer vLLM versions also return the prompt's token ids
(``prompt_token_ids``, asked with ``return_token_ids``); otherwise the local tokenizer's are used
and their count is checked against the entries.

NOT verified against a live vLLM: vLLM's server needs a CUDA build that cannot run here. The
reader is tested on answers shaped exactly as vLLM's protocol models define them
(``tests/test_http_prompt_logprobs.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from imprint.backends.alignment import _DECIDE, _OTHER, TokenRow
from imprint.errors import ConfigError


def body(model: str, prompt: str, k: int) -> dict[str, Any]:
    """A score-only request in vLLM's form: the prompt's log-probs, one generated token."""
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": k,
        "return_token_ids": True,  # newer vLLM: the prompt's ids in the answer
    }


def entries_of(choice: Any) -> list[dict[int, dict[str, Any]] | None] | None:
    """The choice's ``prompt_logprobs`` with int keys (None when the answer has none)."""
    raw = choice.get("prompt_logprobs") if isinstance(choice, dict) else None
    if not isinstance(raw, list):
        return None
    out: list[dict[int, dict[str, Any]] | None] = []
    for entry in raw:
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, dict):
            raise ConfigError(f"prompt_logprobs entry {len(out)} is not an object: {entry!r:.80}")
        out.append({int(k): _logprob(v, len(out)) for k, v in entry.items()})
    return out


def _logprob(value: Any, pos: int) -> dict[str, Any]:
    if isinstance(value, (int, float)):  # a bare number: no rank, no text
        return {"logprob": float(value), "rank": None, "decoded_token": None}
    if not isinstance(value, dict) or not isinstance(value.get("logprob"), (int, float)):
        raise ConfigError(f"prompt_logprobs entry {pos}: no logprob in {value!r:.80}")
    return value


def prompt_ids(choice: Any, tokenizer: Any, prompt: str, n: int, where: str) -> list[int]:
    """The prompt's token ids: the answer's own, else the local tokenizer's (with or without
    the special tokens the server added), checked against the ``n`` entries."""
    given = choice.get("prompt_token_ids") if isinstance(choice, dict) else None
    if isinstance(given, list) and all(isinstance(i, int) for i in given):
        if len(given) != n:
            raise ConfigError(f"{where}: {len(given)} prompt_token_ids for {n} prompt_logprobs")
        return list(given)
    if tokenizer is None:
        raise ConfigError(
            f"{where}: the server answers prompt_logprobs keyed by token id but not the prompt's "
            "ids; give the served model's tokenizer (--model-arg tokenizer=SPEC)"
        )
    for special in (True, False):
        ids = list(tokenizer(prompt, add_special_tokens=special)["input_ids"])
        if len(ids) == n:
            return ids
    raise ConfigError(
        f"{where}: the server returned {n} prompt log-probs but the local tokenizer makes "
        f"{len(ids)} tokens of the prompt: is it the served model's tokenizer?"
    )


def first_scored(tokenizer: Any, ids: Sequence[int], context: str, where: str) -> int:
    """Index of the first token of the scored text (after the context's tokens)."""
    if not context:
        return 1  # the first token has no log p: context only
    if tokenizer is None:
        raise ConfigError(f"{where}: a context needs the local tokenizer to find its tokens")
    for special in (True, False):
        ctx = list(tokenizer(context, add_special_tokens=special)["input_ids"])
        if list(ids[: len(ctx)]) == ctx and len(ctx) < len(ids):
            return len(ctx)
    raise ConfigError(
        f"{where}: the prompt's tokens do not start with the context's: a token spans the end "
        "of the context and the start of the text; end the prefix with whitespace or a newline"
    )


def rows(
    entries: Sequence[Mapping[int, Mapping[str, Any]] | None],
    ids: Sequence[int],
    first: int,
    where: str,
) -> list[TokenRow]:
    """Rows for tokens ``ids[first:]``: the actual token's log p and rank, the best candidate."""
    out = []
    for t in range(first, len(ids)):
        entry = entries[t]
        actual = entry.get(ids[t]) if entry else None
        if actual is None or not math.isfinite(float(actual["logprob"])):
            raise ConfigError(
                f"{where}: prompt_logprobs entry {t} has no log p for the prompt's token id "
                f"{ids[t]} (ids read from the wrong tokenizer?)"
            )
        assert entry is not None
        best_id, best = min(entry.items(), key=lambda kv: _rank(kv[1], kv[1]["logprob"]))
        cands = {str(i): float(v["logprob"]) for i, v in entry.items()}
        rank = actual.get("rank")
        out.append(
            TokenRow(
                text=str(actual.get("decoded_token") or ""),
                logp=float(actual["logprob"]),
                candidates=cands,
                token_id=int(ids[t]),
                rank=int(rank) if isinstance(rank, int) else 0,
                best_id=int(best_id),
                best_logp=float(best["logprob"]),
            )
        )
    return out


def _rank(value: Mapping[str, Any], logp: float) -> tuple[float, float]:
    rank = value.get("rank")
    return (float(rank) if isinstance(rank, int) else math.inf, -float(logp))


def check_aligned(
    entries: Sequence[Mapping[int, Mapping[str, Any]] | None],
    ids: Sequence[int],
    tokenizer: Any,
    context: str,
    where: str,
) -> dict[str, Any]:
    """On the probe (context + :data:`PROBE_TEXT`): the best id at the predictable positions
    (the sentence's repeats) must be the token at that position; the evidence, else refused."""
    start = first_scored(tokenizer, ids, context, where) if context else 1
    # the repeats: the last two of the sentence's three copies
    same = nxt = n = 0
    for t in range(start + (len(ids) - start) // 3 + 1, len(ids) - 1):
        entry = entries[t]
        if not entry:
            continue
        best_id = min(entry.items(), key=lambda kv: _rank(kv[1], kv[1]["logprob"]))[0]
        n += 1
        same += best_id == ids[t]
        nxt += best_id == ids[t + 1]
    evidence = {"probe_positions": n, "argmax_is_this_token": same, "argmax_is_next_token": nxt}
    if n >= 10 and same >= _DECIDE * n and nxt <= _OTHER * n:
        return {"shift": 0, **evidence, "example": ""}
    raise ConfigError(
        f"{where}: the server's prompt_logprobs do not predict the prompt's tokens (of {n} "
        f"predictable probe positions the best id was that position's token at {same}, the "
        f"next token's at {nxt}); scoring would be wrong, so nothing is scored"
    )
