"""Typed model requests: every call to a model is one of these, and its key is its content.

A request is a frozen dataclass of everything that determines its answer (text, prompt, sampling
settings, seed). ``key()`` hashes the kind and every field, so two requests with equal fields are
one request (deduplicated across attacks) and one cache row; a changed seed or setting is another.
The backend's content fingerprint completes the key in the store (see :mod:`.store`).

Results are plain data (texts, word weights, floats, float32 vectors), encoded without pickle.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.errors import ConfigError


@dataclass(frozen=True)
class Request:
    """Base class: ``kind`` names the request type (manifest counts are per kind)."""

    kind: ClassVar[str] = ""

    def key(self) -> str:
        payload = json.dumps([self.kind, asdict(self)], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def size(self) -> int:
        """A length to sort by (longest first, so batches pad little)."""
        return 0

    @staticmethod
    def encode(result: Any) -> bytes:
        return json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass")

    @staticmethod
    def decode(blob: bytes) -> Any:
        return json.loads(blob.decode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class SampleRequest(Request):
    """``n`` continuations of ``prompt`` (the generated text only, cut at the first stop string).

    ``temperature == 0`` asks for greedy decoding (kind ``greedy``). ``seed`` fixes the draws of
    this prompt whatever batch it lands in. Result: a list of ``n`` strings.
    """

    kind: ClassVar[str] = "sample"
    prompt: str
    n: int
    max_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    seed: int = 0
    stop: tuple[str, ...] = ()
    task: str = "continue"

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1 or self.temperature < 0:
            raise ConfigError(
                "a sample request needs n >= 1, max_tokens >= 1 and temperature >= 0; got "
                f"n={self.n}, max_tokens={self.max_tokens}, temperature={self.temperature}"
            )

    def size(self) -> int:
        return len(self.prompt)

    def params(self) -> tuple[Any, ...]:
        """Everything but the prompt: requests with equal params can share one backend call."""
        return (
            self.n,
            self.max_tokens,
            self.temperature,
            self.top_k,
            self.seed,
            self.stop,
            self.task,
        )


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
    task: str = "answer"


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

    def size(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class GradNormRequest(Request):
    """The norm of the parameter gradient of ``text``'s mean token loss. Result: a float."""

    kind: ClassVar[str] = "gradnorm"
    text: str
    norm: str = "l2"
    aggregate: str = "global"

    def size(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class NeighbourRequest(Request):
    """Masked-LM neighbours of ``text`` under a named configuration. Result: a list of texts."""

    kind: ClassVar[str] = "neighbours"
    text: str
    config: str  # the neighbour generator's settings, canonical JSON
    seed: int = 0

    def size(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class EmbedRequest(Request):
    """The unit-norm embedding of one (stripped) string. Result: a float32 vector."""

    kind: ClassVar[str] = "embed"
    text: str

    def size(self) -> int:
        return len(self.text)

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
