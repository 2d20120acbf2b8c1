"""The gray-box backend's forced-token requests: a token's log p asked by its id.

:class:`ForcedTokens` is the part of :class:`imprint.backends.http_logprobs.HTTPLogprobBackend`
for tokens an echo answer cannot name by text: a token whose text several ids render to
(:mod:`.ambiguous_tokens`, decided from the local tokenizer before any request), and a first
token missing from its context's candidates. Each is asked as a completion of the text before it
with its one generated token forced to the token's id (``logit_bias``), after a probe (once, when
first needed) that the server honours a forced token and reports its unbiased log p.
``ambiguous=drop`` (or ``resolve_or_drop`` on a server that does not honour it) leaves such texts
out before scoring, counted (:meth:`ForcedTokens.unscorable`).
"""

from __future__ import annotations

from collections.abc import Sequence

from imprint.backends import ambiguous_tokens as amb
from imprint.backends.alignment import EchoAnswer, ambiguous_texts, server_text
from imprint.backends.http_answer_store import Once
from imprint.backends.http_checks import first_choice
from imprint.backends.http_logprob_probe import LogprobProbe
from imprint.backends.http_stored_post import ServerError
from imprint.errors import ConfigError


class ForcedTokens(LogprobProbe):
    """Ambiguous and missing tokens asked by id; see the module docstring."""

    _forcing: Once  # whether the server honours a forced token (probed once)

    def _local_tokens(self, text: str) -> amb.TextTokens | None:
        if self.tokenizer is None:
            return None
        return amb.text_tokens(self.tokenizer, text, ambiguous_texts(self.tokenizer))

    def _read_by_text(self, local: amb.TextTokens) -> tuple[int, ...]:
        """The ambiguous positions whose log p this server's answer gives by text: every token
        on a shifted server, only the first (its context's candidates) on an aligned one."""
        if self.mode != "echo":
            return ()
        if self._shift() == 1:
            return local.ambiguous
        return tuple(i for i in local.ambiguous if i == 0)

    def _blocked(self, local: amb.TextTokens) -> str | None:
        """Why this text cannot be scored whatever is asked (None: it can)."""
        if self.mode != "echo":
            return None
        if any(server_text(self.tokenizer, local.ids[i]) == "" for i in local.ambiguous):
            return amb.EMPTY_REASON  # the echo answer's tokens cannot spell the text
        if set(self._read_by_text(local)) & set(local.unsplit):
            return amb.UNSPLIT_REASON
        return None

    def _resolve_ambiguous(
        self, context: str, text: str, local: amb.TextTokens | None, where: str
    ) -> dict[int, float]:
        """Position -> log p asked by id, for this text's ambiguous tokens read by text."""
        if local is None or not (positions := self._read_by_text(local)):
            return {}
        blocked = self._blocked(local)
        if self.options.ambiguous == "drop" or blocked:
            shown = ", ".join(repr(local.texts[i]) for i in positions[:3])
            raise amb.TokenAmbiguous(
                f"{where}: {len(positions)} token(s) of this text ({shown}) render to a text "
                f"other token ids share; {blocked or 'ambiguous=drop'}: such texts are left out "
                "before scoring by imprint run (counted, ids in the manifest); here the text "
                "is refused. --model-arg ambiguous=resolve asks each such token by id"
            )
        note = self._forcing_note()
        if note is not None:
            raise amb.TokenAmbiguous(amb.cannot_force(where, note, len(positions)))
        return {i: self._forced(context, text, local, i, where) for i in positions}

    def _forced(self, context: str, text: str, local: amb.TextTokens, i: int, where: str) -> float:
        """Token ``i``'s log p by id: the text before it completed with that token forced."""
        token_id = local.ids[i]
        body = amb.forced_body(self.model, context + text[: local.starts[i]], token_id, 1)
        at = f"{where} token {i} {local.texts[i]!r} forced"
        answer = EchoAnswer.from_choice(first_choice(self._post("completions", body, at), at), at)
        self._count("forced_token_requests")
        return amb.forced_logprob(answer, server_text(self.tokenizer, token_id), at)

    def _forcing_note(self) -> str | None:
        """None when the server honours a forced token and reports its unbiased log p by id
        (probed once, before the first text that needs it); else why not."""
        return self._forcing.get("probe", self._probe_forcing)  # type: ignore[no-any-return]

    def _probe_forcing(self) -> str | None:
        if self.tokenizer is None:
            return "no local tokenizer to name token ids (--model-arg tokenizer=SPEC)"
        where = f"{self.base_url}/completions (forced-token probe)"
        prompt, expected, forced = amb.forcing_probe(self.tokenizer, self.start_text)
        body = amb.forced_body(self.model, prompt, forced, 5)
        try:
            data = self._post("completions", body, where)
            answer = EchoAnswer.from_choice(first_choice(data, where), where)
        except (ServerError, ConfigError) as err:
            return f"the probe was refused ({str(err)[:160]})"
        return amb.check_forcing(
            answer, server_text(self.tokenizer, forced), server_text(self.tokenizer, expected)
        )

    def unscorable(self, texts: Sequence[str]) -> dict[int, str]:
        """Before any text is asked (``imprint run`` calls it on the samples): index -> why,
        for the texts ``ambiguous=`` leaves out; a text that needs what ``ambiguous=resolve``
        cannot give is refused here, naming the option that leaves it out."""
        if self.tokenizer is None or self.mode != "echo":
            return {}
        table = ambiguous_texts(self.tokenizer)
        need: list[int] = []
        out: dict[int, str] = {}
        blocked: dict[int, str] = {}
        for n, text in enumerate(texts):
            local = amb.text_tokens(self.tokenizer, text, table)
            if not self._read_by_text(local) and self._blocked(local) is None:
                continue
            why = self._blocked(local)
            if self.options.ambiguous == "drop":
                out[n] = why or amb.DROP_REASON
            elif why is not None:
                blocked[n] = why
            else:
                need.append(n)
        note = self._forcing_note() if need else None
        if note is not None and self.options.ambiguous == "resolve_or_drop":
            out.update({n: amb.UNFORCED_REASON for n in need})
        elif note is not None:
            raise amb.TokenAmbiguous(amb.cannot_force(self.base_url, note, len(need), texts=True))
        if blocked and self.options.ambiguous == "resolve":
            first = min(blocked)
            raise amb.TokenAmbiguous(
                f"{self.base_url}: {len(blocked)} of {len(texts)} texts cannot be scored on this "
                f"server ({blocked[first]}, e.g. {texts[first][:60]!r}); nothing was asked. "
                "--model-arg ambiguous=resolve_or_drop leaves them out (counted, ids in the "
                "manifest) and asks the other ambiguous tokens by id"
            )
        out.update(blocked)
        return out

    def _ambiguous(self) -> dict[str, tuple[int, ...]] | None:
        """Token texts several ids render to (from the local tokenizer; None without one)."""
        return ambiguous_texts(self.tokenizer) if self.tokenizer is not None else None
