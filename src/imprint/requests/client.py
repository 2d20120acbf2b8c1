"""``ModelRequests``: the typed face of the request layer that attacks call.

Attacks that need more than their declared log-prob passes (more passes, sampling, greedy tokens,
next-word weights, gradient norms, embeddings, masked-LM neighbours) ask this object, never a
backend directly. Each method turns its arguments into typed requests (:mod:`.kinds`) and runs
them through the :class:`RequestRunner`, so every answer is deduplicated, stored under the
backend's content fingerprint and counted; a rerun executes nothing and a killed run resumes
where it stopped. Auxiliary models (a surrogate, a masked LM, the embedder) are roles like the
target: loading one registers with the executor how a Ray worker builds its own replica.

Sampled continuations are seeded per prompt (the seed of a request fixes its draws whatever
batch it lands in): a local model draws each prompt's ``n`` samples in its own ``generate`` call
under a seed derived from (seed, prompt); an API gets the seed in each request; greedy requests,
which draw nothing, batch freely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from imprint.backends.base import SAMPLING, Backend, SamplingSettings
from imprint.errors import ConfigError
from imprint.executors import CallFactory
from imprint.requests.embed import EmbeddingModel
from imprint.requests.kinds import (
    ChoiceRequest,
    EmbedRequest,
    GradNormRequest,
    NeighbourRequest,
    NextWordRequest,
    ParaphraseRequest,
    Request,
    TokenCountsRequest,
    local_transformers,
    prompt_seed,
    sample_request,
)
from imprint.requests.logprobs import LogprobRequest, check_logprobs
from imprint.requests.runner import Lazy, RequestRunner

__all__ = [
    "ModelRequests",
    "in_memory_requests",
    "load_local_model",
    "local_transformers",
    "prompt_seed",
    "standalone_requests",
    "stored_generator",
]

WordDist = dict[str, float]
#: ``factory_for(role, spec)``: how a Ray worker builds an auxiliary role loaded from ``spec``
FactoryFor = Callable[[str, str], Any]


class ModelRequests:
    """Model calls of one run, by role (``"target"``, reference names, ``"embedder"``, ...).

    ``backends`` maps a role to its backend; ``runner`` executes and stores. ``loader(role,
    spec)`` loads an auxiliary model on first use (e.g. PETAL's surrogate) and ``factory_for(role,
    spec)`` says how a worker builds it (default: as :func:`load_local_model` when that is the
    loader); ``local_models`` finds the local transformers model behind a backend (fast paths).
    """

    def __init__(
        self,
        backends: dict[str, Any],
        runner: RequestRunner,
        *,
        embedder: Any = None,
        local_models: Callable[[Any], Any] | None = None,
        loader: Callable[[str, str], Any] | None = None,
        factory_for: FactoryFor | None = None,
    ) -> None:
        self.backends = dict(backends)
        self.runner = runner
        self._embedder = embedder
        self._local_models = local_models
        self._loader = loader
        self._factory_for = factory_for

    # -- plumbing ------------------------------------------------------------------------------
    def backend(self, role: str) -> Any:
        if role not in self.backends:
            raise ConfigError(f"no model in role {role!r}; the run has {sorted(self.backends)}")
        backend = self.backends[role]
        return backend.get() if isinstance(backend, Lazy) else backend

    def fingerprint(self, role: str) -> str:
        return str(self.backend(role).fingerprint)

    def local(self, role: str = "target") -> Any | None:
        """The local transformers backend behind ``role`` (fast paths), or None for an API."""
        return self._local_models(self.backend(role)) if self._local_models else None

    def ask(self, role: str, reqs: Sequence[Request], backend: Any = None) -> list[Any]:
        """The answers to typed requests ``reqs`` in ``role`` (stored, counted like every other
        kind) from the role's backend, or from ``backend``: a model an attack composes for these
        requests only (InfoRMIA's target and references together), keyed by its fingerprint."""
        backend = self.backend(role) if backend is None else backend
        return self.runner.run(role, str(backend.fingerprint), list(reqs), backend)

    def has_role(self, role: str) -> bool:
        return role in self.backends

    def add_role(
        self,
        role: str,
        backend: Any,
        *,
        worker: Any = None,
        derive: Callable[[Any], Any] | None = None,
        of: str = "target",
    ) -> None:
        """Add model ``role`` to this client unless it has one (kept as it is): an
        auxiliary model an attack builds itself (a tempered view of the target, a fine-tuned
        proxy). ``backend`` answers here (a :class:`Lazy` loads on first use); ``worker`` is how
        a Ray worker builds its own copy (a picklable factory), or ``derive(base)`` makes that
        from the worker factory of role ``of`` when the executor has one (a view of a replica).
        Without either, the role's requests run here."""
        if role not in self.backends:
            self.backends[role] = backend
            if worker is None and derive is not None:
                base = self.runner.executor.factory(of)
                worker = derive(base) if base is not None else None
            if worker is not None:
                self.runner.executor.register(role, worker)

    def load(self, role: str, spec: str) -> Any:
        """The backend in ``role``, loaded from ``spec`` on first use (e.g. a surrogate model);
        the executor learns how a worker builds the same model."""
        if role not in self.backends:
            if self._loader is None:
                raise ConfigError(f"no model in role {role!r} and no loader to load {spec!r}")
            self.add_role(role, self._loader(role, spec), worker=self._factory(role, spec))
        return self.backend(role)

    def _factory(self, role: str, spec: str) -> Any:
        if self._factory_for is not None:
            return self._factory_for(role, spec)
        if self._loader is load_local_model:
            return CallFactory(load_local_model, (role, spec))
        return None

    def token_stats(
        self, role: str, texts: Sequence[str], *, prefix: str | None = None
    ) -> list[Any]:
        """Per-token statistics of each text under ``role`` (``logprobs`` requests: batched by
        tokens and stored like every other kind), after the literal ``prefix`` when given (its
        tokens are not scored; x is tokenised on its own, so the scored tokens are the same with
        and without it)."""
        backend = self.backend(role)
        check_logprobs(role, backend)
        reqs = [LogprobRequest(t, prefix or None) for t in texts]
        return self.runner.run(role, self.fingerprint(role), reqs, backend)

    # -- text ----------------------------------------------------------------------------------
    def sample(
        self, role: str, prompts: Sequence[str], n: int, max_tokens: int, **law: Any
    ) -> list[list[str]]:
        """``n`` continuations per prompt, shape (len(prompts), n); ``law``: the keywords of
        :func:`~imprint.requests.kinds.sample_request` (seed, temperature, top_k, stop, task),
        the one constructor of these requests (greedy when temperature 0)."""
        reqs = [sample_request(p, n, max_tokens, **law) for p in prompts]
        out = self.runner.run(role, self.fingerprint(role), reqs, self._text_backend(role))
        return [list(texts) for texts in out]

    def choices(self, role: str, prompts: Sequence[str], *, max_tokens: int = 8) -> list[str]:
        """``role``'s greedy answer to each multiple-choice prompt (kind ``multiple_choice``),
        shape (len(prompts),); parsing the answer is the caller's."""
        reqs = [ChoiceRequest(prompt=p, max_tokens=max_tokens) for p in prompts]
        out = self.runner.run(role, self.fingerprint(role), reqs, self._text_backend(role))
        return [str(texts[0]) for texts in out]

    def letter_logprobs(
        self, role: str, prompts: Sequence[str], *, letters: str = "ABCD"
    ) -> list[dict[str, Any]]:
        """Per multiple-choice prompt, the option letters' log-probabilities as ``role``'s next
        token (kind ``letter_logprobs``: one forward pass, no generation; a local model only).
        See :mod:`imprint.requests.letter_choice` for the result's layout."""
        from imprint.requests.letter_choice import LetterRequest

        if self.local(role) is None:
            raise ConfigError(f"letter log-probabilities need a local model in role {role!r}")
        reqs = [LetterRequest(prompt=p, letters=letters) for p in prompts]
        return self.runner.run(role, self.fingerprint(role), reqs, self.backend(role))

    def paraphrases(self, role: str, prompts: Sequence[str], *, max_tokens: int) -> list[str]:
        """``role``'s greedy answer to each paraphrase prompt (kind ``paraphrase``), through its
        text backend (an instruction sent as it is to chat endpoints), shape (len(prompts),)."""
        reqs = [ParaphraseRequest(prompt=p, max_tokens=max_tokens) for p in prompts]
        out = self.runner.run(role, self.fingerprint(role), reqs, self._text_backend(role))
        return [str(t) for t in out]

    def _text_backend(self, role: str) -> Any:
        from imprint.backends.text import as_text_backend

        return as_text_backend(self.backend(role))  # CapabilityError before any work

    # -- local fast paths ----------------------------------------------------------------------
    def next_words(
        self, role: str, texts: Sequence[str], prefix: str | None, config: Any, *, seed: int
    ) -> list[list[WordDist]]:
        """SimMIA's next-word weights per word position of each text, after ``prefix``."""
        if self.local(role) is None:
            raise ConfigError(f"next-word weights need a local model in role {role!r}")
        reqs = [NextWordRequest.of(t, prefix, config, seed) for t in texts]
        return self.runner.run(role, self.fingerprint(role), reqs, self.backend(role))

    def next_tokens(
        self, role: str, texts: Sequence[str], prefix: str | None, settings: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Next-token laws at every token position of each text after ``prefix`` (SimMIA's
        token disclosure); ``settings`` holds n, top_k, temperature, mode, min_mass and seed.
        See :mod:`imprint.requests.next_token` for the result's layout."""
        from imprint.requests.next_token import NextTokenRequest, check_fits

        local = self.local(role)
        if local is None:
            raise ConfigError(f"next-token laws need a local model in role {role!r}")
        check_fits(local, list(texts), prefix)
        reqs = [NextTokenRequest(text=t, prefix=prefix, **settings) for t in texts]
        return self.runner.run(role, self.fingerprint(role), reqs, self.backend(role))

    def gradient_norms(
        self, role: str, texts: Sequence[str], *, norm: str = "l2", aggregate: str = "global"
    ) -> np.ndarray:
        """Norm of d loss(x) / d theta per text, shape (len(texts),)."""
        reqs = [GradNormRequest(text=t, norm=norm, aggregate=aggregate) for t in texts]
        out = self.runner.run(role, self.fingerprint(role), reqs, self.backend(role))
        return np.asarray(out, float)

    def token_counts(
        self,
        role: str,
        corpus_digest: str,
        texts: Callable[[], Iterable[str]],
        count: Callable[[Iterable[list[int]]], np.ndarray],
    ) -> np.ndarray:
        """Token counts of a corpus (identified by its content digest) under ``role``'s
        tokenizer; ``texts()`` iterates the corpus, ``count`` tallies token id lists (both
        travel to a Ray worker with the request: module-level functions or closures over
        plain data, such as the corpus path)."""
        request = TokenCountsRequest(corpus=corpus_digest, texts=texts, count=count)
        out = self.runner.run(role, self.fingerprint(role), [request], self.backend(role))
        return np.asarray(out[0])

    def neighbours(
        self, spec: str, texts: Sequence[str], config: str, *, seed: int = 0
    ) -> list[tuple[str, ...]]:
        """Masked-LM neighbours of each text from the MLM at ``spec`` (role ``mlm``), under the
        generator settings ``config`` (canonical JSON: n, top_k, dropout, ranking); the MLM is
        loaded only when a text is missing from the store."""
        from imprint.requests.mlm_neighbours import MaskedLMNeighbours, model_fingerprint

        self.add_role("mlm", Lazy(lambda: MaskedLMNeighbours(spec)),
                      worker=CallFactory(MaskedLMNeighbours, (spec,)))  # fmt: skip
        reqs = [NeighbourRequest(text=t, config=config, seed=seed) for t in texts]
        out = self.runner.run("mlm", model_fingerprint(spec), reqs, self.backends["mlm"])
        return [tuple(texts) for texts in out]

    # -- embeddings ----------------------------------------------------------------------------
    def embed(self, strings: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of the stripped strings, shape (len(strings), d), float32
        (role ``embedder``)."""
        if not strings:
            return np.zeros((0, 0), dtype=np.float32)
        embedder = self._embedder_backend()
        reqs = [EmbedRequest(text=s.strip()) for s in strings]
        if not isinstance(embedder, EmbeddingModel):  # a library caller's own embedder
            raise ConfigError(
                f"embedder {type(embedder).__name__} needs a `fingerprint` (a string naming the "
                "model, which keys its embeddings in the request store) beside embed(strings)"
            )
        return np.stack(self.runner.run("embedder", embedder.fingerprint, reqs, embedder))

    def _embedder_backend(self) -> Any:
        if self._embedder is None:
            from imprint.requests import embed

            self._embedder = embed.default_embedder()
            if type(self._embedder) is embed.MiniLMEmbedder:  # a worker builds its own
                self.runner.executor.register("embedder", CallFactory(embed.MiniLMEmbedder))
        return self._embedder


class _PromptModel(Backend):
    """A text backend over ``generate(prompt) -> str`` (greedy answers, one prompt at a time)."""

    capabilities = frozenset({SAMPLING})

    def __init__(self, generate: Callable[[str], str], fingerprint: str) -> None:
        self.generate = generate
        self._fingerprint = fingerprint

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        return [[self.generate(p)] for p in prompts]


def stored_generator(
    make: Callable[[], Callable[[str], str]],
    *,
    spec: str,
    store: Any,
    max_tokens: int,
) -> Callable[[str], str]:
    """``generate(prompt) -> str`` whose answers are ``paraphrase`` requests in ``store`` (a
    :class:`RequestStore`), keyed by the model's content fingerprint: a rerun, or a run resumed
    after a kill, asks the model only for prompts it has not answered. ``make()`` builds the real
    generator, on the first prompt that is not stored."""
    from imprint.requests.mlm_neighbours import model_fingerprint

    runner = RequestRunner(store)
    fingerprint = model_fingerprint(spec)
    model = Lazy(lambda: _PromptModel(make(), fingerprint))

    def generate(prompt: str) -> str:
        request = ParaphraseRequest(prompt=prompt, max_tokens=max_tokens)
        return str(runner.run("paraphraser", fingerprint, [request], model)[0])

    generate.counts = runner.counts  # type: ignore[attr-defined]
    return generate


def standalone_requests() -> ModelRequests:
    """A client with no run behind it (in-memory store): for attack set-up in library use."""
    from imprint.requests.store import RequestStore

    return ModelRequests({}, RequestRunner(RequestStore(None)), local_models=local_transformers)


def load_local_model(role: str, spec: str) -> Any:
    """A local Hugging Face model in ``role`` (the default loader of auxiliary models)."""
    from imprint.backends.hf import HFLogprobBackend

    return HFLogprobBackend(spec, name=role)


def in_memory_requests(
    backend: Any, *, embedder: Any = None, roles: dict[str, Any] | None = None
) -> ModelRequests:
    """A client over ``backend`` (role ``target``) with an in-memory store: for library calls
    and tests that score a handful of texts without a run (nothing persists)."""
    from imprint.requests.store import RequestStore

    return ModelRequests(
        {"target": backend, **(roles or {})},
        RequestRunner(RequestStore(None)),
        embedder=embedder,
        local_models=local_transformers,
        loader=load_local_model,
    )
