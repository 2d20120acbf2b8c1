"""Backend contracts: what a model can be asked, per access level.

A backend declares its capabilities; an attack declares what it needs. The planner compares the two
before any work starts, so a mismatch is a clear error and never a crash half-way through a run.

Every backend subclasses :class:`Backend`. Identity and bookkeeping (``fingerprint``,
``describe()``, ``usage()``, ``close()``) and the token facts callers plan with (``max_length``,
``token_budget``, ``batch_tokens``, ``vocab_size``, ``reports_progress``) are declared members
with defaults, so no caller probes attributes; the optional capabilities (``score``, ``sample``,
``encode``, ``gradient_norms``, ...) are methods whose default raises a
:class:`~imprint.errors.CapabilityError` naming the backend and the capability;
:meth:`Backend.supports` asks first.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from imprint.errors import CapabilityError, ConfigError


class Capability(StrEnum):
    """What a backend can be asked (its ``.value`` is the string manifests record)."""

    LOGPROBS = "logprobs"  # per-token statistics of the next-token distribution (gray-box)
    GRADIENTS = "gradients"  # parameter gradients of the loss (white-box)
    SAMPLING = "sampling"  # text generation (black-box)
    # the prompt's own per-token log p, rank and top-1, without full-vocabulary statistics (what
    # serving engines such as vLLM return): serves attacks with ``vocab_stats = False``
    TOKEN_LOGPROBS = "token_logprobs"
    TOKENS = "tokens"  # a visible tokenizer: encode(), count_tokens(), vocab_size


LOGPROBS = Capability.LOGPROBS
GRADIENTS = Capability.GRADIENTS
SAMPLING = Capability.SAMPLING
TOKEN_LOGPROBS = Capability.TOKEN_LOGPROBS
TOKENS = Capability.TOKENS

# what each capability serves and what serves it, for the one-line CapabilityError
_WHAT = {
    LOGPROBS: ("per-token log-probabilities over the vocabulary", "a local model (the hf backend)"),
    GRADIENTS: ("parameter gradients", "a local Hugging Face model (the hf backend)"),
    SAMPLING: ("text generation", "a local model, vLLM or an OpenAI-compatible API"),
    TOKEN_LOGPROBS: ("the prompt's per-token log-probabilities", "a local model or vLLM"),
    TOKENS: ("a visible tokenizer", "a local model or vLLM"),
}


class Access(StrEnum):
    """What a target gives attacks, and what an attack needs (``.value``: the manifest's and the
    CLI's string, e.g. ``"gray-box"``)."""

    GRAY_BOX = "gray-box"  # a local model: full-vocabulary log-prob statistics, text by sampling
    TOKEN_LOGPROBS = "token-logprobs"  # only its prompt's per-token log p (vLLM)
    BLACK_BOX = "black-box"  # generated text only (an API)
    WHITE_BOX = "white-box"  # parameter gradients as well (a local model, named explicitly)

    @classmethod
    def of(cls, capabilities: Iterable[str]) -> Access:
        """The access a target with these capabilities gives: gray-box with full log-probs,
        token-logprobs with the prompt's per-token log p only, else black-box."""
        caps = set(capabilities)
        if LOGPROBS in caps:
            return cls.GRAY_BOX
        return cls.TOKEN_LOGPROBS if TOKEN_LOGPROBS in caps else cls.BLACK_BOX


Task = Literal["continue", "next_word", "answer"]
TASKS: tuple[Task, ...] = ("continue", "next_word", "answer")


@dataclass(frozen=True)
class SamplingSettings:
    """What one :meth:`Backend.sample` call asks of every prompt: ``n`` continuations of at most
    ``max_tokens`` new tokens each, cut at the first of the ``stop`` strings. ``seed`` fixes the
    draws (None: unseeded); ``temperature`` and ``top_k`` left None take the backend's defaults
    (:meth:`with_defaults`; ``temperature=0`` is greedy, ``top_k=0`` no top-k filter). ``task``
    tells chat endpoints what to ask for (see :mod:`imprint.backends.text`); completion backends
    ignore it. Invalid values are refused when the settings are made, before any work."""

    n: int
    max_tokens: int
    stop: tuple[str, ...] = ()
    seed: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    task: Task = "continue"

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop or ()))  # a list or None as well
        if self.n < 1:
            raise ConfigError(f"n (samples per prompt) must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature is not None and self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.top_k is not None and self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 = no top-k filter), got {self.top_k}")
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {TASKS}, got {self.task!r}")

    def with_defaults(self, temperature: float, top_k: int | None) -> SamplingSettings:
        """These settings with a backend's default ``temperature`` and ``top_k`` where they name
        none."""
        return replace(
            self,
            temperature=temperature if self.temperature is None else self.temperature,
            top_k=top_k if self.top_k is None else self.top_k,
        )


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``text``'s tokens, optionally after a fixed ``prefix`` whose tokens are not scored.

    The text is tokenised on its own and appended to the prefix tokens, so the scored tokens are
    identical with and without a prefix (ReCaLL-style ratios compare like with like).
    """

    text: str
    prefix: str | None = None


@dataclass(frozen=True, eq=False)
class TokenStats:
    """Per-token statistics of one scored text; every array has shape (T,), T = scored tokens.

    ``logp[t]`` is log p(x_t | x_<t); ``mean_logp[t]`` and ``var_logp[t]`` are the mean and
    variance of log p(v) for v drawn from the model's own next-token distribution at t (Min-K%++);
    ``rank[t]`` is 1 when x_t was the model's top choice; ``argmax[t]`` is that top choice and
    ``top1_logp[t]`` its log-probability, max_v log p(v) (Gap-K%); NaN where not recorded.
    """

    token_ids: np.ndarray  # int32
    logp: np.ndarray  # float32
    mean_logp: np.ndarray  # float32
    var_logp: np.ndarray  # float32
    rank: np.ndarray  # int32
    argmax: np.ndarray  # int32
    top1_logp: np.ndarray | None = None  # float32; None given = not recorded (NaN)

    FIELDS = ("token_ids", "logp", "mean_logp", "var_logp", "rank", "argmax", "top1_logp")

    def __post_init__(self) -> None:
        if self.top1_logp is None:
            object.__setattr__(self, "top1_logp", np.full(self.logp.shape, np.nan, np.float32))

    @property
    def entropy(self) -> np.ndarray:
        """Shannon entropy (nats) of the next-token distribution: -E_p[log p]."""
        return -self.mean_logp

    def __len__(self) -> int:
        return int(self.logp.shape[0])

    @staticmethod
    def concat(parts: Sequence[TokenStats]) -> TokenStats:
        """Join the statistics of consecutive windows of one text."""
        return TokenStats(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in TokenStats.FIELDS)
        )


class Backend:
    """Base class of every backend: identity, bookkeeping and optional capabilities.

    Subclasses set ``name``, ``spec`` and ``capabilities`` and define ``fingerprint`` (what
    identifies the weights and settings: part of every cache key) and the methods of the
    capabilities they declare. Everything else has a default: a capability a backend lacks
    raises :class:`CapabilityError` naming the backend and the capability, before any work.
    """

    name: str = "target"  # the model's role in a run ("target" or a reference's name)
    spec: str = ""  # the model as the user named it
    capabilities: ClassVar[frozenset[str]] = frozenset()
    # score() accepts ``progress=`` and calls it per forward (a long text shows progress)
    reports_progress: ClassVar[bool] = False
    # sample() seeds each prompt on its own, so a prompt's draws never depend on its batch
    seeds_per_prompt: ClassVar[bool] = False
    max_length: int | None = None  # context in tokens (start token included); None = unknown
    token_budget: int | None = None  # tokens per forward the backend was sized for

    # -- identity and bookkeeping ---------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """Identifies weights and scoring settings; part of every cache key."""
        raise NotImplementedError(
            f"backend {type(self).__name__} defines no fingerprint; define the property (a "
            "string that changes whenever its weights or settings change what it returns)"
        )

    def describe(self) -> dict[str, Any]:
        """The manifest entry: what was loaded (subclasses add their settings)."""
        return {"spec": self.spec, "fingerprint": self.fingerprint}

    def usage(self) -> dict[str, Any]:
        """Query and token counters for the manifest; empty when the backend counts nothing."""
        return {}

    def close(self) -> None:
        """Release connections or engines (a no-op for most backends)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a ``sample`` written for the flat signature that came before
        :class:`SamplingSettings` (it would fail at its first call, inside a run)."""
        super().__init_subclass__(**kwargs)
        sample = cls.__dict__.get("sample")
        if sample is not None and "max_tokens" in inspect.signature(sample).parameters:
            raise TypeError(
                f"{cls.__qualname__}.sample takes (prompts, n, max_tokens, ...), the signature "
                "before SamplingSettings: define sample(self, prompts, settings) and read "
                "settings.n, settings.max_tokens, settings.stop, settings.seed, ..."
            )

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- capabilities ---------------------------------------------------------------------------
    def supports(self, capability: str) -> bool:
        """Whether this backend declares ``capability`` (a :class:`Capability`)."""
        return capability in self.capabilities

    def require(self, capability: str, purpose: str = "") -> None:
        """Raise :class:`CapabilityError` naming this backend and ``capability`` unless it
        declares it; ``purpose`` says what needed it (e.g. ``"attack gradnorm"``)."""
        if self.supports(capability):
            return
        what, fix = _WHAT.get(Capability(capability), (str(capability), "another backend"))
        needed = f", which {purpose} needs" if purpose else ""
        raise CapabilityError(
            f"backend {self.name!r} ({type(self).__name__}) cannot serve {capability!s} "
            f"({what}){needed}; use {fix}"
        )

    def local_model(self) -> LocalModel | None:
        """The local transformers model behind this one (fast paths drive its model and
        tokenizer directly: :class:`~imprint.backends.hf.HFLogprobBackend`); None for engines
        and APIs."""
        return None

    # -- tokens (Capability.TOKENS) -------------------------------------------------------------
    @property
    def vocab_size(self) -> int | None:
        """Entries of the next-token distribution (DC-PDD's V); None when the backend hides it."""
        return None

    @property
    def batch_tokens(self) -> int | None:
        """Tokens the planner should hand :meth:`score` at once (default: ``token_budget``)."""
        return self.token_budget

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""
        self.require(TOKENS)
        raise NotImplementedError(f"{type(self).__name__} declares {TOKENS} but no encode()")

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Number of tokens each text has (used to sort and batch by a token budget)."""
        return [len(self.encode(t)) for t in texts]

    # -- gray-box (Capability.LOGPROBS / TOKEN_LOGPROBS) ----------------------------------------
    def score(self, requests: Sequence[ScoreRequest], *, progress: Any = None) -> list[TokenStats]:
        """One ``TokenStats`` per request, in order (``progress(n)`` per forward when
        ``reports_progress``)."""
        if not self.supports(TOKEN_LOGPROBS):
            self.require(LOGPROBS)
        raise NotImplementedError(f"{type(self).__name__} declares log-probs but no score()")

    # -- black-box (Capability.SAMPLING) --------------------------------------------------------
    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        """``settings.n`` continuations per prompt: a list of shape (len(prompts), n) of strings
        (see :class:`SamplingSettings`)."""
        self.require(SAMPLING)
        raise NotImplementedError(f"{type(self).__name__} declares {SAMPLING} but no sample()")

    def text_backend(self) -> Backend:
        """The backend that samples text for this one: itself (an API, vLLM) or, for a local
        model, a sampler over the same weights; CapabilityError when it cannot sample."""
        self.require(SAMPLING)
        return self

    # -- white-box (Capability.GRADIENTS) -------------------------------------------------------
    def gradient_norms(
        self, texts: Sequence[str], *, norm: str = "l2", aggregate: str = "global"
    ) -> np.ndarray:
        """Norm of d loss(x) / d theta per text, shape (len(texts),)."""
        self.require(GRADIENTS)
        raise NotImplementedError(f"{type(self).__name__} declares {GRADIENTS} but no gradients")


class LocalModel(Protocol):
    """What fast paths read of a local transformers model (the Hugging Face backend, returned by
    :meth:`Backend.local_model`): the loaded model and tokenizer, its start-token policy, its
    context and window, its output head and attention scope."""

    name: str
    spec: str
    model: Any  # a transformers causal LM
    tokenizer: Any
    device: Any  # a torch.device
    bos_id: int  # the token every generation and gradient starts after
    pad_id: int
    max_length: int
    stride: int

    @property
    def fingerprint(self) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def head(self, hidden: Any) -> Any:
        """Hidden states (..., d) -> logits (..., vocabulary rows)."""
        ...

    def attention(self) -> AbstractContextManager[None]:
        """Wraps a forward of the model (shared K/V heads on CPU)."""
        ...


# the gray-box and black-box roles of the one base class, for signatures that say which is meant
LogprobBackend = Backend
TextBackend = Backend
