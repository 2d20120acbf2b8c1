"""The gray-box backend's probe: once, before any text, what the server answers and how.

:class:`LogprobProbe` is the part of :class:`imprint.backends.http_logprobs.HTTPLogprobBackend`
that checks the model name against ``GET /models``, tries vLLM's ``prompt_logprobs`` form (kept
when it answers aligned entries), else asks an echo answer to a probe text and decides from it
which entry holds which token's distribution (:mod:`.alignment`; llama-cpp-python's is shifted by
one for models without a BOS).
"""

from __future__ import annotations

import logging

from imprint.backends import http_prompt_logprobs as plp
from imprint.backends.alignment import PROBE_TEXT, Alignment, EchoAnswer, detect_shift
from imprint.backends.http_checks import check_model, list_models, snippet
from imprint.backends.http_context_requests import ContextRequests
from imprint.backends.http_stored_post import ServerError
from imprint.errors import ConfigError, ImprintError

log = logging.getLogger(__name__)


class LogprobProbe(ContextRequests):
    """Which form the server answers and its alignment; see the module docstring."""

    start_text: str
    mode: str  # the form read: echo or prompt_logprobs (vLLM)
    forms_probed: dict[str, str]  # form -> what the probe found
    served_models: list[str]
    alignment: Alignment | None
    server_version: str

    def _probe(self) -> None:
        """Once, before any text: the model name, which form of prompt log-probs the server
        answers (vLLM's prompt_logprobs, else echo + logprobs), and how it is aligned."""
        self._check_model()
        context = self.start_text
        prompt = context + PROBE_TEXT
        if self.options.form in ("auto", "prompt_logprobs") and self._probe_prompt_logprobs(
            prompt, context
        ):
            return
        where = f"{self.base_url}/completions (alignment probe)"
        try:
            data = self._post("completions", self._body(prompt, self.options.top_logprobs), where)
            answer = EchoAnswer.from_choice((data.get("choices") or [None])[0], where)
        except (ServerError, ConfigError) as err:
            tried = "; ".join(f"{k}: {v}" for k, v in self.forms_probed.items())
            raise ConfigError(f"{err}{f' ({tried})' if tried else ''}") from None
        self.forms_probed["echo"] = "answered"
        self.server_version = str(data.get("system_fingerprint") or "")
        self.alignment = detect_shift(answer, prompt, context, where, self.start_text)
        if self.alignment.shift:
            log.warning(
                "%s: the server's prompt log-probs are shifted by one token (%s); correcting",
                self.base_url,
                self.alignment.example or "see the manifest",
            )

    def _check_model(self) -> None:
        """``GET /v1/models``: a model the server does not list is refused before any work
        (llama-cpp-python answers any name with the model it serves)."""
        try:
            listed = list_models(self._client, self.base_url, snippet, self.options.key_env)
        except ImprintError as err:
            raise ConfigError(str(err)) from None
        self.served_models = check_model(listed, self.model, self.base_url)

    def _probe_prompt_logprobs(self, prompt: str, context: str) -> bool:
        """Ask in vLLM's form; True (mode prompt_logprobs) when it answers aligned entries."""
        where = f"{self.base_url}/completions (prompt_logprobs probe)"
        body = plp.body(self.model, prompt, self.options.top_logprobs)
        try:
            data = self._post("completions", body, where)
            choice = (data.get("choices") or [None])[0]
            entries = plp.entries_of(choice)
        except (ServerError, ConfigError) as err:
            entries, found = None, f"refused ({str(err)[:120]})"
        else:
            found = "answered" if entries is not None else "no prompt_logprobs in the answer"
        self.forms_probed["prompt_logprobs"] = found
        if entries is None:
            if self.options.form == "prompt_logprobs":
                raise ConfigError(
                    f"{where}: form=prompt_logprobs asked, but the server {found}; drop "
                    "--model-arg form to read echo + logprobs"
                )
            return False
        ids = plp.prompt_ids(choice, self.tokenizer, prompt, len(entries), where)
        evidence = plp.check_aligned(entries, ids, self.tokenizer, context, where)
        self.alignment = Alignment(
            0, evidence["probe_positions"], evidence["argmax_is_this_token"],
            evidence["argmax_is_next_token"], "",
        )  # fmt: skip
        self.mode = "prompt_logprobs"
        self.server_version = str(data.get("system_fingerprint") or "")
        return True

    def _shift(self) -> int:
        assert self.alignment is not None, "probe() first"
        return self.alignment.shift
