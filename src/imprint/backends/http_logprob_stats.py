"""The gray-box backend's token rows as :class:`~imprint.backends.base.TokenStats`.

:class:`TokenRowStats` is the part of :class:`imprint.backends.http_logprobs.HTTPLogprobBackend`
that turns the rows read from a server's answer into per-token statistics: log p, rank, the
candidates' best (argmax, top-1 log p), top-k moments when ``topk_moments=true`` (NaN otherwise),
and token ids (the local tokenizer's, else stable hashes of token texts); with a local tokenizer
it also checks that the server tokenised the text as it does.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from imprint.backends.alignment import TokenRow, local_token_texts, rank_of, topk_moments
from imprint.backends.base import TokenStats
from imprint.backends.http_logprob_options import LogprobOptions
from imprint.errors import ConfigError


class TokenRowStats:
    """Token rows -> TokenStats; see the module docstring."""

    options: LogprobOptions
    tokenizer: Any  # a local tokenizer of the served model, or None
    _ids: dict[str, int]  # token text -> the local tokenizer's id (filled on first use)

    def _stats(self, rows: Sequence[TokenRow]) -> TokenStats:
        n = len(rows)
        logp = np.array([r.logp for r in rows], np.float32)
        rank = np.array(
            [r.rank if r.rank is not None else rank_of(r.logp, r.candidates, r.text) for r in rows],
            np.int32,
        )
        best = [max(r.candidates, key=r.candidates.__getitem__) for r in rows]
        top1 = np.array(
            [
                r.best_logp if r.best_logp is not None else r.candidates[b]
                for r, b in zip(rows, best, strict=True)
            ],
            np.float32,
        )
        mean = np.full(n, np.nan, np.float32)
        var = np.full(n, np.nan, np.float32)
        if self.options.topk_moments:
            moments = [topk_moments(r.candidates) for r in rows]
            mean[:] = [m for m, _ in moments]
            var[:] = [v for _, v in moments]
        ids = [r.token_id if r.token_id is not None else self._token_id(r.text) for r in rows]
        argmax = [
            r.best_id if r.best_id is not None else self._token_id(b)
            for r, b in zip(rows, best, strict=True)
        ]
        return TokenStats(
            token_ids=np.array(ids, np.int32),
            logp=logp,
            mean_logp=mean,
            var_logp=var,
            rank=rank,
            argmax=np.array(argmax, np.int32),
            top1_logp=top1,
        )

    def _token_id(self, text: str) -> int:
        """The local tokenizer's id of a token text, else a stable hash of it (never -1)."""
        if self.tokenizer is not None:
            if not self._ids:
                vocab = range(len(self.tokenizer))
                self._ids = {self.tokenizer.decode([i]): i for i in reversed(vocab)}
            found = self._ids.get(text)
            if found is not None:
                return found
        return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF

    def _check_local_tokens(self, text: str, rows: Sequence[TokenRow], where: str) -> None:
        """With a local tokenizer: the server must tokenise the text as it does."""
        if self.tokenizer is None:
            return
        local = local_token_texts(self.tokenizer, text)
        server = [r.text for r in rows]
        if local != server:
            i = next(
                (j for j, (a, b) in enumerate(zip(local, server, strict=False)) if a != b),
                min(len(local), len(server)),
            )
            raise ConfigError(
                f"{where}: the server tokenises the text differently from the local tokenizer "
                f"{self.options.tokenizer!r} from token {i} (local {local[i : i + 3]!r}, server "
                f"{server[i : i + 3]!r}; {len(local)} vs {len(server)} tokens): is it the same "
                "model? Drop --model-arg tokenizer or give the served model's tokenizer"
            )
