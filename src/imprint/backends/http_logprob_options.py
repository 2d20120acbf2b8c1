"""The options of the gray-box HTTP backend (``--model openai-logprobs:MODEL``, ``--model-arg``).

:class:`LogprobOptions` is what :class:`imprint.backends.http_logprobs.HTTPLogprobBackend` is
configured with; each field is checked here, before any request, naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

FORMS = ("auto", "echo", "prompt_logprobs")
AMBIGUOUS = ("resolve", "drop", "resolve_or_drop")


@dataclass(frozen=True)
class LogprobOptions:
    """``openai-logprobs``: prompt log-probs from an OpenAI-compatible completions server."""

    top_logprobs: int = 5  # candidates asked per position (OpenAI caps it at 5)
    # a shifted answer missing a token's log p is asked once more with this many candidates
    # (llama-cpp-python needs the vocabulary size, e.g. 49152, for exact scores)
    max_top_logprobs: int = 200
    tokenizer: str | None = None  # a local tokenizer of the served model (alias, folder, hub id)
    start_token: str = "auto"  # auto (the tokenizer's; none without one), none, or literal text
    topk_moments: bool = False  # fill mean/var of log p from the top-k (min_k_pp_topk)
    # auto: vLLM's prompt_logprobs when the server answers it, else echo + logprobs
    form: str = "auto"
    # a token read by text whose text several ids render to (needs tokenizer): resolve (asked
    # by id, one forced request each), drop (the text is left out, counted), or resolve_or_drop
    ambiguous: str = "resolve"
    key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout: float = 600.0
    max_retries: int = 6

    EXAMPLES: ClassVar[dict[str, str]] = {
        "top_logprobs": "20",
        "max_top_logprobs": "49152",
        "tokenizer": "smollm2-135m",
        "start_token": "<|endoftext|>",
        "topk_moments": "true",
        "form": "prompt_logprobs",
        "ambiguous": "resolve_or_drop",
        "key_env": "MY_API_KEY",
        "concurrency": "1",
        "timeout": "300",
        "max_retries": "3",
    }

    def __post_init__(self) -> None:
        from imprint.backends.options import OptionError

        if self.top_logprobs < 1:
            raise OptionError("top_logprobs", "an integer >= 1", self.top_logprobs)
        if self.max_top_logprobs < self.top_logprobs:
            raise OptionError(
                "max_top_logprobs", "an integer >= top_logprobs", self.max_top_logprobs
            )
        if self.form not in FORMS:
            raise OptionError("form", " | ".join(FORMS), self.form)
        if self.ambiguous not in AMBIGUOUS:
            raise OptionError("ambiguous", " | ".join(AMBIGUOUS), self.ambiguous)
        if self.concurrency < 1:
            raise OptionError("concurrency", "an integer >= 1", self.concurrency)
        if not self.timeout > 0:
            raise OptionError("timeout", "seconds > 0", self.timeout)
        if self.max_retries < 0:
            raise OptionError("max_retries", "an integer >= 0", self.max_retries)
