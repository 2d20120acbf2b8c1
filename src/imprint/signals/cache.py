"""The signal cache: the run's one store (:class:`imprint.requests.store.RequestStore`) opened
by path, with the log-prob pass's key helpers.

Log-prob passes are ``logprobs`` requests (:mod:`imprint.requests.logprobs`) stored beside every
other kind; this module keeps the names older callers use: :func:`make_key` (backend
fingerprint, context hash, text hash; the context is the unscored prefix, "" for none) and
:class:`SignalCache`, a :class:`RequestStore` that also reads and writes passes by such keys.
Damage, versions and refused paths are the store's (see :mod:`imprint.requests.store`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from imprint.backends.base import TokenStats
from imprint.data.sample import text_hash
from imprint.requests.logprobs import LogprobRequest, decode_stats, encode_stats
from imprint.requests.store import RequestStore

__all__ = ["Key", "SignalCache", "decode_stats", "encode_stats", "make_key"]

Key = tuple[str, str, str]


def make_key(backend_fingerprint: str, text: str, prefix: str | None = None) -> Key:
    """Cache key of scoring ``text`` after ``prefix`` with a given backend."""
    return (backend_fingerprint, text_hash(prefix) if prefix else "", text_hash(text))


class SignalCache(RequestStore):
    """The one store, plus log-prob passes by :func:`make_key` keys; ``path=None``: in memory."""

    def stats_many(self, keys: Sequence[Key]) -> dict[Key, TokenStats]:
        """The stored passes among ``keys`` (missing or damaged keys are absent)."""
        out: dict[Key, TokenStats] = {}
        by_backend: dict[str, dict[str, Key]] = {}
        for key in keys:
            by_backend.setdefault(key[0], {})[f"{key[1]}:{key[2]}"] = key
        for backend, wanted in by_backend.items():
            found = self.get_keys(backend, LogprobRequest.kind, list(wanted), decode_stats)
            out.update((wanted[k], stats) for k, stats in found.items())
        return out

    def put_stats(self, items: Iterable[tuple[Key, TokenStats]]) -> None:
        """Store passes by key, one transaction per backend."""
        by_backend: dict[str, list[tuple[str, bytes]]] = {}
        for key, stats in items:
            by_backend.setdefault(key[0], []).append((f"{key[1]}:{key[2]}", encode_stats(stats)))
        for backend, rows in by_backend.items():
            self.put_keys(backend, LogprobRequest.kind, rows)

    def __len__(self) -> int:
        return self.count(LogprobRequest.kind)
