"""Typed options of the backend providers, from ``--model-arg KEY=VALUE`` or Python values.

Each provider's options are a frozen dataclass: the field annotations say what a key takes (an
integer, a number, true/false, a string, one of a few choices, any of these or none), and
``__post_init__`` checks ranges. Text from the command line is parsed to the field's type; a
Python value is checked against it. A wrong key or value fails before any model loads, naming
the provider, the key, the expected type and an example. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from imprint.backends.shared_options import SharedModelOptions
from imprint.coerce import Mismatch, TextRules, coerce, describe_type
from imprint.errors import ConfigError

# Options read text strictly: digits only for an integer ("1_000" is refused), true/false words
# for a bool (not a Python 0/1), and an empty value means none (``--model-arg top_k=`` unsets it).
OPTION_RULES = TextRules(none_words=frozenset({"none", "null", ""}))
_HIDDEN = "(not shown: it may be a secret)"

HF_DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
_VLLM_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
_VLLM_DTYPES |= {"float": "float32", **{v: v for v in ("auto", "bfloat16", "float16", "float32")}}


def _show(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a pasted document stays readable)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


class OptionError(ConfigError):
    """One option's value is outside what it accepts; the registry adds the provider's name."""

    def __init__(self, key: str, expected: str, value: Any, *, secret: bool = False) -> None:
        self.key, self.expected = key, expected
        self.shown = _HIDDEN if secret else _show(value)
        super().__init__(f"option {key!r}: expected {expected}, got {self.shown}")


def _shared(name: str) -> Any:
    """The shared model option ``name`` as a field of a provider that takes only some of the four
    (its default and help are :class:`SharedModelOptions`', not restated here)."""
    declared = {f.name: f for f in dataclasses.fields(SharedModelOptions)}[name]
    return dataclasses.field(default=declared.default, metadata=declared.metadata)


@dataclass(frozen=True)
class HFOptions(SharedModelOptions):
    """The local transformers backend (aliases, folders, ``hf:``, ``gguf:``, ``game:``).

    It takes the four shared options (:class:`SharedModelOptions`: device ``auto`` = cuda when
    available, else cpu; dtype ``auto`` = bfloat16 on CUDA, on CPU see backends/dtype_choice.py;
    max_length = tokens per scoring window, default the model's context; start_token) and a
    window stride of its own.
    """

    stride: int | None = None  # new tokens per window after the first (default: max_length // 2)

    EXAMPLES: ClassVar[dict[str, str]] = {
        "device": "cuda:0",
        "dtype": "bfloat16",
        "max_length": "2048",
        "stride": "512",
        "start_token": "bos",
    }

    def __post_init__(self) -> None:
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise OptionError("device", "auto, cpu, cuda or cuda:N", self.device)
        if self.dtype not in HF_DTYPES:
            raise OptionError("dtype", "one of " + ", ".join(HF_DTYPES), self.dtype)
        if self.max_length is not None and self.max_length < 2:
            raise OptionError("max_length", "an integer >= 2 or none", self.max_length)
        if self.stride is not None and not (0 < self.stride < (self.max_length or self.stride + 1)):
            raise OptionError("stride", "an integer in [1, max_length)", self.stride)
        if not self.start_token.strip():
            raise OptionError("start_token", "auto, bos, none or a literal token", self.start_token)


@dataclass(frozen=True)
class VLLMOptions:
    """vLLM's engine (text sampling on GPUs, prefix caching on; prompt log-probs)."""

    tensor_parallel_size: int = 1  # GPUs the model is split over
    gpu_memory_utilization: float = 0.9  # share of each GPU's memory vLLM may take
    max_model_len: int | None = None  # context length (default: the model's)
    dtype: str = _shared("dtype")
    enforce_eager: bool = False  # skip CUDA-graph capture (faster start, slower decoding)
    start_token: str = _shared("start_token")  # as for hf

    EXAMPLES: ClassVar[dict[str, str]] = {
        "tensor_parallel_size": "2",
        "gpu_memory_utilization": "0.8",
        "max_model_len": "4096",
        "dtype": "bfloat16",
        "enforce_eager": "true",
        "start_token": "bos",
    }

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1:
            raise OptionError("tensor_parallel_size", "an integer >= 1", self.tensor_parallel_size)
        if not 0 < self.gpu_memory_utilization <= 1:
            raise OptionError(
                "gpu_memory_utilization", "a number in (0, 1]", self.gpu_memory_utilization
            )
        if self.max_model_len is not None and self.max_model_len < 1:
            raise OptionError("max_model_len", "an integer >= 1 or none", self.max_model_len)
        if self.dtype not in _VLLM_DTYPES:
            raise OptionError("dtype", "one of " + ", ".join(sorted(_VLLM_DTYPES)), self.dtype)
        if not self.start_token.strip():
            raise OptionError("start_token", "auto, bos, none or a literal token", self.start_token)

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM`` (dtype in vLLM's spelling)."""
        args: dict[str, Any] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "dtype": _VLLM_DTYPES[self.dtype],
            "enforce_eager": self.enforce_eager,
        }
        if self.max_model_len is not None:
            args["max_model_len"] = self.max_model_len
        return args


@dataclass(frozen=True)
class OpenAIOptions:
    """An OpenAI-compatible HTTP API (text only); the API root comes from ``--api-base``."""

    mode: Literal["completions", "chat"] = "completions"
    key_env: str | None = "OPENAI_API_KEY"  # environment variable holding the key (never stored)
    concurrency: int = 8  # most requests in flight (fewer when the server shows it is slower)
    top_k: int | None = None  # top-k of calls that name none (an attack's own top-k wins)
    timeout: float = 60.0  # seconds per request attempt
    max_retries: int = 6  # per request (429, 5xx, timeouts); then the run stops
    max_n_per_request: int = 128  # most samples asked in one request (fewer when the server caps n)
    # the server's sampling fields (auto: read from GET /v1/models; see backends/http_sampling)
    server: Literal["auto", "openai", "vllm", "llama.cpp", "transformers"] = "auto"

    EXAMPLES: ClassVar[dict[str, str]] = {
        "mode": "chat",
        "key_env": "MY_API_KEY",
        "concurrency": "16",
        "top_k": "50",
        "timeout": "120",
        "max_retries": "3",
        "max_n_per_request": "16",
        "server": "llama.cpp",
    }

    def __post_init__(self) -> None:
        if self.key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.key_env):
            # never echoed: a key pasted here instead of a variable name would end up in a log
            raise OptionError(
                "key_env", "the NAME of an environment variable holding the key", None, secret=True
            )
        for key in ("concurrency", "max_n_per_request"):
            if getattr(self, key) < 1:
                raise OptionError(key, "an integer >= 1", getattr(self, key))
        if self.top_k is not None and self.top_k < 0:
            raise OptionError("top_k", "an integer >= 0 or none", self.top_k)
        if not self.timeout > 0:
            raise OptionError("timeout", "a number of seconds > 0", self.timeout)
        if self.max_retries < 0:
            raise OptionError("max_retries", "an integer >= 0", self.max_retries)


T = TypeVar("T")


def parse_options(
    provider: str,
    cls: type[T],
    values: Mapping[str, Any],
    *,
    sources: Mapping[str, str] | None = None,
) -> T:
    """``cls(**values)`` with each value coerced to its field's type and checked.

    ``sources`` says where a key's value came from when it was not ``--model-arg`` (e.g.
    ``{"device": "--device"}``), so the error points at what the user typed.
    """
    sources = sources or {}
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    examples: dict[str, str] = getattr(cls, "EXAMPLES", {})
    typed: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise BackendOptionError(_unknown_key(provider, key, sorted(fields), examples))
        try:
            typed[key] = coerce(value, hints[key], OPTION_RULES)
        except Mismatch:
            shown = _HIDDEN if key == "key_env" else _show(value)
            raise BackendOptionError(
                _bad_value(provider, key, describe_type(hints[key]), shown, examples, sources)
            ) from None
    try:
        return cls(**typed)
    except OptionError as err:
        raise BackendOptionError(
            _bad_value(provider, err.key, err.expected, err.shown, examples, sources)
        ) from None


class BackendOptionError(ConfigError):
    """A bad backend option: its message names the option as the backend spells it
    (``max_length``, as ``--model-arg`` takes it), so the command line shows it as it is rather
    than writing run-option names as flags."""


def _unknown_key(provider: str, key: str, known: list[str], examples: Mapping[str, str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    example = close[0] if close else known[0]
    return (
        f"backend {provider!r} has no option {key!r}; {hint}it takes {', '.join(known)} "
        f"(e.g. --model-arg {example}={examples.get(example, 'VALUE')})"
    )


def _bad_value(
    provider: str,
    key: str,
    expected: str,
    shown: str,
    examples: Mapping[str, str],
    sources: Mapping[str, str],
) -> str:
    example = examples.get(key, "VALUE")
    if key in sources:  # set by a flag: the example sets it the same way
        given, fix = f" (from {sources[key]})", f"{sources[key]} {example}"
    else:
        given, fix = "", f"--model-arg {key}={example}"
    return (
        f"backend {provider!r}, option {key!r}: expected {expected}, got {shown}{given}; e.g. {fix}"
    )
