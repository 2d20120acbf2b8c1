"""Typed model requests: every call to a model is one of these, and its key is its content.

A request is a frozen dataclass of everything that determines its answer (text, prompt, sampling
settings, seed). ``key()`` hashes the kind and every field, so two requests with equal fields are
one request (deduplicated across attacks) and one cache row; a changed seed or setting is another.
The backend's content fingerprint completes the key in the store (see :mod:`.store`).

A kind declares everything the engine needs (:mod:`.runner` says how to add one): its key, its
store encoding (plain data: JSON or raw arrays, never pickle), its batching policy (``count``:
``batch_size`` requests per batch; ``tokens``: one :meth:`Request.group` per batch within a token
budget, longest first) and ``execute(backend, batch)``, a static or class method (picklable by
reference, never a closure over a loaded model) that the local executor and a Ray worker both
call with their own backend of the request's role.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from imprint.backends.base import SamplingSettings, Task
from imprint.backends.seeds import prompt_seed as prompt_seed  # re-exported for callers
from imprint.errors import ConfigError


@dataclass(frozen=True)
class Request:
    """Base class: ``kind`` names the request type (manifest counts are per kind)."""

    kind: ClassVar[str] = ""
    #: ``count``: ``batch_size`` requests per batch; ``tokens``: by a token budget (see runner)
    batching: ClassVar[str] = "count"
    batch_size: ClassVar[int] = 16
    #: ``execute`` takes ``progress=`` (a callback of units done) for long batches
    streams_progress: ClassVar[bool] = False

    def key(self) -> str:
        payload = json.dumps([self.kind, asdict(self)], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def size(self) -> int:
        """A length to sort by (longest first, so batches pad little)."""
        return 0

    def group(self) -> Any:
        """Requests of one ``tokens`` batch share this (a prefix: its KV cache is reused)."""
        return None

    def token_text(self) -> str:
        """The text whose tokens a ``tokens`` batch counts against its budget."""
        return ""

    @staticmethod
    def encode(result: Any) -> bytes:
        return json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass")

    @staticmethod
    def decode(blob: bytes) -> Any:
        return json.loads(blob.decode("utf-8", "surrogatepass"))

    @classmethod
    def check(cls, role: str, backend: Any, requests: Sequence[Request]) -> None:
        """Refuse, before any work, requests ``backend`` cannot answer (default: none)."""

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        """One result per request of ``batch``, computed with ``backend`` (the role's model)."""
        raise NotImplementedError(f"request kind {cls.kind!r} defines no execute()")


def local_transformers(backend: Any) -> Any | None:
    """The local transformers model behind ``backend`` (:meth:`Backend.local_model`: an
    HFLogprobBackend itself, or the one an HFTextBackend wraps), which fast paths can drive;
    None for engines and APIs."""
    return backend.local_model()


def require_local(backend: Any, what: str) -> Any:
    """:func:`local_transformers` of ``backend``, or a ConfigError naming ``what`` needs it."""
    local = local_transformers(backend)
    if local is None:
        raise ConfigError(f"{what} need a local (Hugging Face) model; got {type(backend).__name__}")
    return local


def _text_sampler(backend: Any) -> Any:
    from imprint.backends.text import as_text_backend

    return as_text_backend(backend)


@dataclass(frozen=True)
class SampleRequest(Request):
    """``n`` continuations of ``prompt`` (the generated text only, cut at the first stop string).

    ``temperature == 0`` asks for greedy decoding (kind ``greedy``). ``seed`` fixes the draws of
    this prompt whatever batch it lands in (a generator per prompt; a local model's padded batch
    can still flip a near-tied draw by float noise, see :mod:`imprint.backends.sampling`).
    Result: a list of ``n`` strings.
    """

    kind: ClassVar[str] = "sample"
    prompt: str
    n: int
    max_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    seed: int = 0
    stop: tuple[str, ...] = ()
    task: Task = "continue"

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1 or self.temperature < 0:
            raise ConfigError(
                "a sample request needs n >= 1, max_tokens >= 1 and temperature >= 0; got "
                f"n={self.n}, max_tokens={self.max_tokens}, temperature={self.temperature}"
            )

    def size(self) -> int:
        return len(self.prompt)

    def settings(self) -> SamplingSettings:
        """Everything but the prompt: requests with equal settings can share one backend call."""
        return SamplingSettings(
            self.n, self.max_tokens, self.stop, self.seed, self.temperature, self.top_k, self.task
        )

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        return sample_batch(_text_sampler(backend), batch)


def sample_batch(sampler: Any, batch: Sequence[SampleRequest]) -> list[list[str]]:
    """Answer a batch of sample requests. A backend that seeds each prompt itself
    (``seeds_per_prompt``: the local HF sampler, vLLM, HTTP) gets every prompt of equal settings
    in one call; any other gets one call per prompt, seeded ``prompt_seed(seed, prompt)``, so a
    prompt's draws never depend on its batch either way."""
    out: dict[SampleRequest, list[str]] = {}
    per_prompt_seed = bool(sampler.seeds_per_prompt)
    groups: dict[SamplingSettings, list[SampleRequest]] = {}
    for r in batch:
        groups.setdefault(r.settings(), []).append(r)
    for settings, reqs in groups.items():
        # greedy decoding draws nothing, and some backends seed each prompt themselves: batch
        calls = [reqs] if settings.temperature == 0 or per_prompt_seed else [[r] for r in reqs]
        for call in calls:
            law = settings
            if len(call) == 1 and not per_prompt_seed:  # one call per prompt: its own seed
                law = replace(settings, seed=prompt_seed(call[0].seed, call[0].prompt))
            texts = sampler.sample([r.prompt for r in call], law)
            out.update(zip(call, texts, strict=True))
    return [out[r] for r in batch]


@dataclass(frozen=True)
class GreedyRequest(SampleRequest):
    """A greedy continuation (temperature 0, one sample): PETAL's next tokens."""

    kind: ClassVar[str] = "greedy"
    n: int = 1
    max_tokens: int = 1
    temperature: float = 0.0


@dataclass(frozen=True)
class ChoiceRequest(GreedyRequest):
    """A greedy answer to a multiple-choice question (DE-COP): ``prompt`` is the whole question
    with its lettered options, sent as it is (task ``answer``); the attack parses the letter.
    Result: a list of one string."""

    kind: ClassVar[str] = "multiple_choice"
    max_tokens: int = 8
    task: Task = "answer"


def sample_request(
    prompt: str,
    n: int,
    max_tokens: int,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    stop: Sequence[str] = (),
    task: Task = "continue",
) -> SampleRequest:
    """The request for ``n`` continuations of ``prompt``: a :class:`GreedyRequest` when it draws
    nothing (temperature 0, one sample), else a :class:`SampleRequest`. The one constructor that
    :meth:`ModelRequests.sample` executes and the attacks' call plans count."""
    cls = GreedyRequest if temperature == 0 and n == 1 else SampleRequest
    return cls(prompt=prompt, n=n, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
               seed=seed, stop=tuple(stop), task=task)  # fmt: skip


@dataclass(frozen=True)
class NextWordRequest(Request):
    """SimMIA's next-word weights at every word position of ``text`` after ``prefix``.

    Result: one ``{word: weight}`` dict per word position 1 .. L-1.
    """

    kind: ClassVar[str] = "next_word"
    text: str
    prefix: str | None
    n: int
    top_k: int
    temperature: float
    max_word_tokens: int
    mode: str
    seed: int
    min_mass: float = 1e-4  # in the key only when set otherwise (older keys stay valid)
    batch_size: ClassVar[int] = 4

    @classmethod
    def of(cls, text: str, prefix: str | None, config: Any, seed: int) -> NextWordRequest:
        """The request for ``text`` after ``prefix`` under a sampling ``config`` (a
        :class:`~imprint.requests.next_word.NextWordConfig`)."""
        return cls(
            text=text,
            prefix=prefix,
            n=config.n,
            top_k=config.top_k,
            temperature=config.temperature,
            max_word_tokens=config.max_word_tokens,
            mode=str(config.mode),
            seed=seed,
            min_mass=config.min_mass,
        )

    def config(self, **overrides: Any) -> Any:
        """The request's sampling settings as a :class:`~imprint.requests.next_word.
        NextWordConfig` (``overrides``: settings that do not change the answer's law)."""
        from imprint.requests.next_word import NextWordConfig

        return NextWordConfig(
            n=self.n,
            top_k=self.top_k,
            temperature=self.temperature,
            max_word_tokens=self.max_word_tokens,
            mode=self.mode,
            min_mass=self.min_mass,
            **overrides,
        )

    def key(self) -> str:
        fields = asdict(self)
        if fields["min_mass"] == 1e-4:
            del fields["min_mass"]
        payload = json.dumps([self.kind, fields], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def size(self) -> int:
        return len(self.text)

    def rng(self) -> np.random.Generator:
        """The draws of this request, fixed by its seed, prefix and text (batch-independent)."""
        key = f"{self.seed}\x00{self.prefix or ''}\x00{self.text}"
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        # The per-text sampler, not next_word_batch's shared tree: at the full benchmark setting
        # (bench_simmia.py, 8 texts, N = 100, AMX Xeon) the tree took 158.8 s against 79.9 s
        # and 5 of 564 word distributions differed from this reference; benchmark only.
        from imprint.requests.next_word import LocalNextWordSampler

        local = require_local(backend, "next-word weights")
        out = []
        for r in batch:
            sampler = LocalNextWordSampler(local, r.config())
            out.append(sampler.distributions(r.text, prefix=r.prefix, rng=r.rng()))
        return out


@dataclass(frozen=True)
class GradNormRequest(Request):
    """The norm of the parameter gradient of ``text``'s mean token loss. Result: a float."""

    kind: ClassVar[str] = "gradnorm"
    text: str
    norm: str = "l2"
    aggregate: str = "global"

    def size(self) -> int:
        return len(self.text)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        from imprint.backends.gradients import gradient_norms

        out: dict[str, float] = {}
        for norm, aggregate in dict.fromkeys((r.norm, r.aggregate) for r in batch):
            part = [r for r in batch if (r.norm, r.aggregate) == (norm, aggregate)]
            values = gradient_norms(backend, [r.text for r in part], norm=norm, aggregate=aggregate)
            out.update((r.key(), float(v)) for r, v in zip(part, values, strict=True))
        return [out[r.key()] for r in batch]


@dataclass(frozen=True)
class NeighbourRequest(Request):
    """Masked-LM neighbours of ``text`` under a named configuration. Result: a list of texts."""

    kind: ClassVar[str] = "neighbours"
    text: str
    config: str  # the neighbour generator's settings, canonical JSON
    seed: int = 0
    batch_size: ClassVar[int] = 8

    def size(self) -> int:
        return len(self.text)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        """``backend``: the role's masked-LM neighbour generator (MaskedLMNeighbours)."""
        out = []
        for r in batch:
            settings = json.loads(r.config)
            found = backend.neighbours(
                r.text,
                n=settings["n"],
                top_k=settings["top_k"],
                dropout=settings["dropout"],
                seed=r.seed,
                ranking=settings["ranking"],
            )
            out.append(list(found))
        return out


@dataclass(frozen=True)
class EmbedRequest(Request):
    """The unit-norm embedding of one (stripped) string. Result: a float32 vector."""

    kind: ClassVar[str] = "embed"
    text: str
    batch_size: ClassVar[int] = 512

    def size(self) -> int:
        return len(self.text)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        """``backend``: the ``embedder`` role's embedder (``embed(strings) -> (n, d)``)."""
        return list(np.asarray(backend.embed([r.text for r in batch]), dtype=np.float32))

    @staticmethod
    def encode(result: Any) -> bytes:
        return np.asarray(result, dtype="<f4").tobytes()

    @staticmethod
    def decode(blob: bytes) -> Any:
        return np.frombuffer(blob, dtype="<f4").copy()


@dataclass(frozen=True)
class TokenCountsRequest(Request):
    """Token counts of a whole corpus under the backend's tokenizer (DC-PDD's reference
    frequencies). ``corpus`` is the corpus's content digest. Result: an int64 vector."""

    kind: ClassVar[str] = "token_counts"
    corpus: str
    version: str = "1"
    # how to read and tally the corpus (picklable; not part of the key: the digest names it)
    texts: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    count: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)

    def key(self) -> str:
        fields = {"corpus": self.corpus, "version": self.version}
        payload = json.dumps([self.kind, fields], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        out = []
        for r in batch:
            if r.texts is None or r.count is None:
                raise ConfigError(f"token_counts of corpus {r.corpus}: no corpus reader given")
            out.append(r.count(backend.encode(t) for t in r.texts()))
        return out

    @staticmethod
    def encode(result: Any) -> bytes:
        return np.asarray(result, dtype="<i8").tobytes()

    @staticmethod
    def decode(blob: bytes) -> Any:
        return np.frombuffer(blob, dtype="<i8").copy()


@dataclass(frozen=True)
class ParaphraseRequest(Request):
    """A greedy answer of a paraphrasing model to ``prompt`` (the paraphrase prompt with the text
    filled in), at most ``max_tokens`` new tokens. Result: a string."""

    kind: ClassVar[str] = "paraphrase"
    prompt: str
    max_tokens: int = 256

    def size(self) -> int:
        return len(self.prompt)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        """Greedy answers of the role's text backend (an instruction, sent as it is)."""
        sampler = _text_sampler(backend)
        out: dict[str, str] = {}
        for budget in dict.fromkeys(r.max_tokens for r in batch):
            part = [r for r in batch if r.max_tokens == budget]
            greedy = SamplingSettings(1, budget, seed=0, temperature=0.0, task="answer")
            texts = sampler.sample([r.prompt for r in part], greedy)
            out.update((r.key(), str(t[0])) for r, t in zip(part, texts, strict=True))
        return [out[r.key()] for r in batch]
