"""The log-prob pass as a request kind: per-token statistics of ``text`` after ``prefix``.

A :class:`LogprobRequest` is what every gray-box attack's forward pass becomes (the planner,
:mod:`imprint.signals.plan`, maps the attacks' needs to these). Its key is the pair of content
hashes the signal cache has always used (context hash, text hash), so caches written before the
request layer absorbed the planner are served as they are (see :mod:`.store` for the migration).
Batches are planned by tokens (one prefix per batch, longest first, within the token budget) and
stored as raw little-endian arrays (:func:`encode_stats`), never pickled.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.backends.base import LOGPROBS, TOKEN_LOGPROBS, ScoreRequest, TokenStats
from imprint.data.sample import text_hash
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.kinds import Request


@dataclass(frozen=True)
class LogprobRequest(Request):
    """Score ``text``'s tokens after the literal ``prefix`` (its tokens are not scored).

    Result: a :class:`~imprint.backends.base.TokenStats`, arrays of shape (T,), T = scored tokens.
    """

    kind: ClassVar[str] = "logprobs"
    batching: ClassVar[str] = "tokens"
    streams_progress: ClassVar[bool] = True
    text: str
    prefix: str | None = None

    def key(self) -> str:
        """``context:text`` content hashes (the v1 signal cache's key, so its rows stay valid)."""
        return logprob_key(self.text, self.prefix)

    def size(self) -> int:
        return len(self.text)

    def group(self) -> Any:
        return self.prefix

    def token_text(self) -> str:
        return self.text

    @staticmethod
    def encode(result: Any) -> bytes:
        return encode_stats(result)

    @staticmethod
    def decode(blob: bytes) -> Any:
        return decode_stats(blob)

    @classmethod
    def check(cls, role: str, backend: Any, requests: Sequence[Request]) -> None:
        check_logprobs(role, backend)
        check_context(backend, role, [ScoreRequest(r.text, r.prefix) for r in requests])  # type: ignore[attr-defined]

    @classmethod
    def execute(
        cls,
        backend: Any,
        batch: Sequence[Any],
        progress: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """``backend.score`` of the batch; a backend that streams (``reports_progress``) calls
        ``progress(tokens)`` per forward, so one long text shows progress."""
        requests = [ScoreRequest(r.text, r.prefix) for r in batch]
        if progress is not None and backend.reports_progress:
            return list(backend.score(requests, progress=progress))
        return list(backend.score(requests))


def logprob_key(text: str, prefix: str | None = None) -> str:
    """The store key of a log-prob pass: context hash ("" without a prefix), ``:``, text hash."""
    return f"{text_hash(prefix) if prefix else ''}:{text_hash(text)}"


def check_logprobs(role: str, backend: Any) -> None:
    """Fail before any work when the model in ``role`` cannot return log-probabilities."""
    if not (backend.supports(LOGPROBS) or backend.supports(TOKEN_LOGPROBS)):
        raise CapabilityError(
            f"model {role!r} cannot return log-probabilities; use a gray-box backend"
        )


def check_context(backend: Any, model: str, requests: Sequence[ScoreRequest]) -> None:
    """Fail before any forward pass when a prefix plus a text cannot fit the context.

    (Texts alone never fail: the backend scores them with a sliding window.)
    """
    max_length = backend.max_length
    by_prefix: dict[str, list[str]] = {}
    for req in requests:
        if req.prefix is not None:
            by_prefix.setdefault(req.prefix, []).append(req.text)
    if not max_length:
        return
    for prefix, texts in by_prefix.items():
        prefix_len = backend.count_tokens([prefix])[0]  # BOS + prefix
        longest = max(backend.count_tokens(texts)) - 1
        if prefix_len + longest > max_length:
            raise ConfigError(
                f"model {model!r}: a prefix of {prefix_len} tokens plus texts of up to {longest} "
                f"tokens exceeds its context of {max_length}; use fewer shots (lower the prefix "
                "attack's n_shots below its current value, e.g. --param recall.n_shots=N or "
                "con_recall.n_shots=N), truncate texts (--truncate N) or leave prefix attacks out"
            )


# Entries are the TokenStats fields as raw little-endian arrays after a small header: ~50x faster
# to write than an npz archive (a zip per text), which cost a GPU run ~1 s per 2,000 texts while
# the device waited. Entries written as npz by earlier versions are still read.
_MAGIC = b"IMTS\x01"
_DTYPES = {f: "<i4" if f in ("token_ids", "rank", "argmax") else "<f4" for f in TokenStats.FIELDS}
_HEADER = struct.Struct("<5sI")  # magic, number of tokens


def encode_stats(stats: TokenStats) -> bytes:
    arrays = [np.ascontiguousarray(getattr(stats, f), dtype=_DTYPES[f]) for f in TokenStats.FIELDS]
    return b"".join([_HEADER.pack(_MAGIC, len(stats)), *(a.tobytes() for a in arrays)])


def decode_stats(blob: bytes) -> TokenStats:
    """The stats stored by :func:`encode_stats`; ValueError when ``blob`` is not such an entry."""
    if not blob.startswith(_MAGIC):
        return _decode_npz(blob)
    if len(blob) < _HEADER.size:
        raise ValueError(f"not an encoded TokenStats: {len(blob)} bytes, shorter than a header")
    (_, n) = _HEADER.unpack_from(blob)
    if len(blob) != _HEADER.size + 4 * n * len(TokenStats.FIELDS):
        raise ValueError(f"not an encoded TokenStats: {len(blob)} bytes for {n} tokens")
    fields, offset = {}, _HEADER.size
    for f in TokenStats.FIELDS:
        fields[f] = np.frombuffer(blob, dtype=_DTYPES[f], count=n, offset=offset).astype(
            _DTYPES[f][1:]
        )
        offset += 4 * n
    return TokenStats(**fields)


def _decode_npz(blob: bytes) -> TokenStats:
    """An entry written by imprint <= 0.1 (an npz archive per text)."""
    try:
        with np.load(io.BytesIO(blob)) as arrays:
            stats = TokenStats(**{f: arrays[f] for f in TokenStats.FIELDS})
    except Exception as err:  # np.load raises many types on bad bytes (BadZipFile, EOFError...)
        raise ValueError(f"not an encoded TokenStats ({type(err).__name__}: {err})") from err
    shapes = {getattr(stats, f).shape for f in TokenStats.FIELDS}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"not an encoded TokenStats: field shapes {sorted(shapes)} differ")
    return stats
