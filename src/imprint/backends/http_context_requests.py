"""The gray-box backend's scoring requests: a text's echo answer, its context's first token.

:class:`ContextRequests` is the part of
:class:`imprint.backends.http_logprobs.HTTPLogprobBackend` that builds and sends the requests a
text is scored from: ``echo: true`` with ``logprobs: k`` (or vLLM's ``prompt_logprobs``) for the
whole prompt, and, for the first scored token (whose entry servers leave null), one request per
distinct context asking the candidates for the token after it (``echo: false``), asked once
however many texts share the context.
"""

from __future__ import annotations

from typing import Any

from imprint.backends import http_prompt_logprobs as plp
from imprint.backends.alignment import EchoAnswer, TokenRow
from imprint.backends.http_answer_store import Once
from imprint.backends.http_checks import first_choice
from imprint.backends.http_stored_post import StoredPost
from imprint.errors import ConfigError


class ContextRequests(StoredPost):
    """The echo, prompt_logprobs and first-token requests; see the module docstring."""

    model: str
    tokenizer: Any  # a local tokenizer of the served model, or None
    _first: Once  # context -> its next-token candidates, asked once

    def _prompt_logprob_rows(self, prompt: str, context: str, where: str) -> list[TokenRow]:
        body = plp.body(self.model, prompt, self.options.top_logprobs)
        data = self._post("completions", body, where)
        choice = (data.get("choices") or [None])[0]
        entries = plp.entries_of(choice)
        if entries is None:
            raise ConfigError(f"{where}: the answer has no prompt_logprobs (it had at the probe)")
        ids = plp.prompt_ids(choice, self.tokenizer, prompt, len(entries), where)
        return plp.rows(entries, ids, plp.first_scored(self.tokenizer, ids, context, where), where)

    def _first_candidates(self, context: str, k: int) -> dict[str, float]:
        """The candidates for the token after ``context``: asked once per context and k, however
        many texts ask at once (they wait for the one answer)."""
        found = self._first.get(f"{k}|{context}", lambda: self._ask_first(context, k))
        return dict(found)

    def _ask_first(self, context: str, k: int) -> dict[str, float]:
        where = f"{self.base_url}/completions (context {context[-30:]!r})"
        body = {**self._body(context, k), "echo": False}
        answer = EchoAnswer.from_choice(
            first_choice(self._post("completions", body, where), where), where
        )
        found = answer.top[0] if answer.top else None
        if not found:
            raise ConfigError(f"{where}: no candidates for the first generated token")
        return dict(found)

    def _echo(self, prompt: str, k: int, where: str) -> EchoAnswer:
        data = self._post("completions", self._body(prompt, k), where)
        return EchoAnswer.from_choice(first_choice(data, where), where)

    def _body(self, prompt: str, k: int) -> dict[str, Any]:
        # max_tokens 1, not 0: llama-cpp-python reads 0 as "until the context is full"
        return {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": k,
        }
