"""``ModelRequests``: the typed face of the request layer that attacks call.

Attacks that need more than log-prob passes (sampling, greedy tokens, next-word weights, gradient
norms, embeddings, masked-LM neighbours) ask this object, never a backend directly. Each method
turns its arguments into typed requests (:mod:`.kinds`) and runs them through the
:class:`RequestRunner`, so every answer is deduplicated, stored under the backend's content
fingerprint and counted; a rerun executes nothing and a killed run resumes where it stopped.

Sampled continuations are seeded per prompt (the seed of a request fixes its draws whatever
batch it lands in): a local model draws each prompt's ``n`` samples in its own ``generate`` call
under a seed derived from (seed, prompt); an API gets the seed in each request; greedy requests,
which draw nothing, batch freely.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from imprint.errors import ConfigError
from imprint.requests.kinds import (
    ChoiceRequest,
    EmbedRequest,
    GradNormRequest,
    GreedyRequest,
    NeighbourRequest,
    NextWordRequest,
    ParaphraseRequest,
    SampleRequest,
    TokenCountsRequest,
)
from imprint.requests.runner import RequestRunner

WordDist = dict[str, float]


def prompt_seed(seed: int, prompt: str) -> int:
    """A 31-bit seed from a request seed and its prompt (batch-independent draws)."""
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class ModelRequests:
    """Model calls of one run, by role (``"target"``, reference names, ``"embedder"``).

    ``backends`` maps a role to its backend; ``runner`` executes and stores. Backends are used
    through duck-typed capabilities: ``sample`` (text), ``model``/``encode`` (local transformers),
    ``embed`` (embedder).
    """

    def __init__(
        self,
        backends: dict[str, Any],
        runner: RequestRunner,
        *,
        embedder: Any = None,
        local_models: Callable[[Any], Any] | None = None,
        logprobs: Callable[..., list[Any]] | None = None,  # (backend, role, texts, *, prefix=)
        loader: Callable[[str, str], Any] | None = None,
    ) -> None:
        self.backends = dict(backends)
        self.runner = runner
        self._embedder = embedder
        self._local_models = local_models
        # log-prob passes go through the signal planner and its cache (injected by the run, which
        # owns both); ``loader(role, spec)`` loads an auxiliary model such as PETAL's surrogate
        self._logprobs = logprobs
        self._loader = loader

    # -- plumbing ------------------------------------------------------------------------------
    def backend(self, role: str) -> Any:
        if role not in self.backends:
            raise ConfigError(f"no model in role {role!r}; the run has {sorted(self.backends)}")
        return self.backends[role]

    def fingerprint(self, role: str) -> str:
        return str(getattr(self.backend(role), "fingerprint", role))

    def local(self, role: str = "target") -> Any | None:
        """The local transformers backend behind ``role`` (fast paths), or None for an API."""
        return self._local_models(self.backend(role)) if self._local_models else None

    def load(self, role: str, spec: str) -> Any:
        """The backend in ``role``, loaded from ``spec`` on first use (e.g. a surrogate model)."""
        if role not in self.backends:
            if self._loader is None:
                raise ConfigError(f"no model in role {role!r} and no loader to load {spec!r}")
            self.backends[role] = self._loader(role, spec)
        return self.backends[role]

    def token_stats(
        self, role: str, texts: Sequence[str], *, prefix: str | None = None
    ) -> list[Any]:
        """Per-token statistics of each text under ``role`` (planned, batched and cached),
        after the literal ``prefix`` when given (its tokens are not scored; x is tokenised on
        its own, so the scored tokens are the same with and without it)."""
        if self._logprobs is None:
            raise ConfigError("this run has no log-prob planner for token statistics")
        if prefix:
            return self._logprobs(self.backend(role), role, texts, prefix=prefix)
        return self._logprobs(self.backend(role), role, texts)

    # -- text ----------------------------------------------------------------------------------
    def sample(
        self,
        role: str,
        prompts: Sequence[str],
        n: int,
        max_tokens: int,
        *,
        seed: int = 0,
        temperature: float = 1.0,
        top_k: int | None = None,
        stop: Sequence[str] = (),
        task: str = "continue",
    ) -> list[list[str]]:
        """``n`` continuations per prompt, shape (len(prompts), n); greedy when temperature 0."""
        cls = GreedyRequest if temperature == 0 and n == 1 else SampleRequest
        reqs = [
            cls(
                prompt=p,
                n=n,
                max_tokens=max_tokens,
                temperature=temperature,
                top_k=top_k,
                seed=seed,
                stop=tuple(stop),
                task=task,
            )
            for p in prompts
        ]
        sampler = self._text_backend(role)
        out = self.runner.run(
            role,
            self.fingerprint(role),
            reqs,
            lambda batch: _sample_batch(sampler, batch),
            remote=sample_on,  # a Ray worker samples with its own replica
        )
        return [list(texts) for texts in out]

    def choices(self, role: str, prompts: Sequence[str], *, max_tokens: int = 8) -> list[str]:
        """``role``'s greedy answer to each multiple-choice prompt (kind ``multiple_choice``),
        shape (len(prompts),); parsing the answer is the caller's."""
        reqs = [ChoiceRequest(prompt=p, max_tokens=max_tokens) for p in prompts]
        sampler = self._text_backend(role)
        out = self.runner.run(
            role, self.fingerprint(role), reqs, lambda batch: _sample_batch(sampler, batch)
        )
        return [str(texts[0]) for texts in out]

    def letter_logprobs(
        self, role: str, prompts: Sequence[str], *, letters: str = "ABCD"
    ) -> list[dict[str, Any]]:
        """Per multiple-choice prompt, the option letters' log-probabilities as ``role``'s next
        token (kind ``letter_logprobs``: one forward pass, no generation; a local model only).
        See :mod:`imprint.requests.letter_choice` for the result's layout."""
        from imprint.requests.letter_choice import LetterRequest, answer_letters, letters_on

        local = self.local(role)
        if local is None:
            raise ConfigError(f"letter log-probabilities need a local model in role {role!r}")
        reqs = [LetterRequest(prompt=p, letters=letters) for p in prompts]

        def execute(batch: list[LetterRequest]) -> list[dict[str, Any]]:
            return answer_letters(local, batch)

        return self.runner.run(
            role, self.fingerprint(role), reqs, execute, batch_size=4, remote=letters_on
        )

    def paraphrases(self, role: str, prompts: Sequence[str], *, max_tokens: int) -> list[str]:
        """``role``'s greedy answer to each paraphrase prompt (kind ``paraphrase``), through its
        text backend (an instruction sent as it is to chat endpoints), shape (len(prompts),)."""
        reqs = [ParaphraseRequest(prompt=p, max_tokens=max_tokens) for p in prompts]
        sampler = self._text_backend(role)

        def execute(batch: list[ParaphraseRequest]) -> list[str]:
            texts = sampler.sample(
                [r.prompt for r in batch],
                1,
                max_tokens,
                None,
                seed=0,
                temperature=0.0,
                task="answer",
            )
            return [str(t[0]) for t in texts]

        return [str(t) for t in self.runner.run(role, self.fingerprint(role), reqs, execute)]

    def _text_backend(self, role: str) -> Any:
        from imprint.backends.text import as_text_backend

        return as_text_backend(self.backend(role))

    # -- local fast paths ----------------------------------------------------------------------
    def next_words(
        self, role: str, texts: Sequence[str], prefix: str | None, config: Any, *, seed: int
    ) -> list[list[WordDist]]:
        """SimMIA's next-word weights per word position of each text, after ``prefix``."""
        local = self.local(role)
        if local is None:
            raise ConfigError(f"next-word weights need a local model in role {role!r}")
        reqs = [
            NextWordRequest(
                text=t,
                prefix=prefix,
                n=config.n,
                top_k=config.top_k,
                temperature=config.temperature,
                max_word_tokens=config.max_word_tokens,
                mode=str(config.mode),
                seed=seed,
            )
            for t in texts
        ]
        from imprint.requests.next_word import LocalNextWordSampler

        sampler = LocalNextWordSampler(local, config)

        def execute(batch: list[NextWordRequest]) -> list[list[WordDist]]:
            return [sampler.distributions(r.text, prefix=r.prefix, rng=_text_rng(r)) for r in batch]

        return self.runner.run(role, self.fingerprint(role), reqs, execute, batch_size=4)

    def next_tokens(
        self, role: str, texts: Sequence[str], prefix: str | None, settings: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Next-token laws at every token position of each text after ``prefix`` (SimMIA's
        token disclosure); ``settings`` holds n, top_k, temperature, mode, min_mass and seed.
        See :mod:`imprint.requests.next_token` for the result's layout."""
        from imprint.requests.next_token import NextTokenRequest, check_fits, token_laws

        local = self.local(role)
        if local is None:
            raise ConfigError(f"next-token laws need a local model in role {role!r}")
        check_fits(local, list(texts), prefix)
        reqs = [NextTokenRequest(text=t, prefix=prefix, **settings) for t in texts]

        def execute(batch: list[NextTokenRequest]) -> list[dict[str, Any]]:
            return [token_laws(local, r) for r in batch]

        return self.runner.run(
            role, self.fingerprint(role), reqs, execute, batch_size=4, remote=next_tokens_on
        )

    def gradient_norms(
        self, role: str, texts: Sequence[str], *, norm: str = "l2", aggregate: str = "global"
    ) -> np.ndarray:
        """Norm of d loss(x) / d theta per text, shape (len(texts),)."""
        from imprint.backends.gradients import gradient_norms

        backend = self.backend(role)
        reqs = [GradNormRequest(text=t, norm=norm, aggregate=aggregate) for t in texts]

        def execute(batch: list[GradNormRequest]) -> list[float]:
            values = gradient_norms(
                backend, [r.text for r in batch], norm=norm, aggregate=aggregate
            )
            return [float(v) for v in values]

        return np.asarray(self.runner.run(role, self.fingerprint(role), reqs, execute), float)

    def token_counts(
        self,
        role: str,
        corpus_digest: str,
        texts: Callable[[], Iterable[str]],
        count: Callable[[Iterable[list[int]]], np.ndarray],
    ) -> np.ndarray:
        """Token counts of a corpus (identified by its content digest) under ``role``'s
        tokenizer; ``texts()`` iterates the corpus, ``count`` tallies token id lists."""
        tokenize = self.backend(role).encode
        request = TokenCountsRequest(corpus=corpus_digest)

        def execute(batch: list[TokenCountsRequest]) -> list[np.ndarray]:
            return [count(tokenize(t) for t in texts()) for _ in batch]

        return np.asarray(self.runner.run(role, self.fingerprint(role), [request], execute)[0])

    def neighbours(
        self, spec: str, texts: Sequence[str], config: str, *, seed: int = 0
    ) -> list[tuple[str, ...]]:
        """Masked-LM neighbours of each text from the MLM at ``spec`` (role ``mlm``), under the
        generator settings ``config`` (canonical JSON: n, top_k, dropout, ranking)."""
        import json

        from imprint.requests.mlm_neighbours import MaskedLMNeighbours

        settings = json.loads(config)
        fingerprint = _model_fingerprint(spec)
        reqs = [NeighbourRequest(text=t, config=config, seed=seed) for t in texts]

        def execute(batch: list[NeighbourRequest]) -> list[list[str]]:
            if "mlm" not in self.backends:  # loaded only when a text is missing from the store
                self.backends["mlm"] = MaskedLMNeighbours(spec)
            mlm = self.backends["mlm"]
            return [
                list(
                    mlm.neighbours(
                        r.text,
                        n=settings["n"],
                        top_k=settings["top_k"],
                        dropout=settings["dropout"],
                        seed=r.seed,
                        ranking=settings["ranking"],
                    )
                )
                for r in batch
            ]

        out = self.runner.run("mlm", fingerprint, reqs, execute, batch_size=8)
        return [tuple(texts) for texts in out]

    # -- embeddings ----------------------------------------------------------------------------
    def embed(self, strings: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of the stripped strings, shape (len(strings), d), float32."""
        if not strings:
            return np.zeros((0, 0), dtype=np.float32)
        embedder = self._embedder_backend()
        reqs = [EmbedRequest(text=s.strip()) for s in strings]
        fingerprint = str(getattr(embedder, "fingerprint", type(embedder).__name__))

        def execute(batch: list[EmbedRequest]) -> list[np.ndarray]:
            return list(np.asarray(embedder.embed([r.text for r in batch]), dtype=np.float32))

        rows = self.runner.run("embedder", fingerprint, reqs, execute, batch_size=512)
        return np.stack(rows)

    def _embedder_backend(self) -> Any:
        if self._embedder is None:
            from imprint.requests.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder


def _model_fingerprint(spec: str) -> str:
    """The content fingerprint of a model spec (its name when it cannot be resolved locally)."""
    from imprint.backends.models import fingerprint_source, resolve_model

    try:
        return fingerprint_source(resolve_model(spec))
    except ConfigError:
        return spec


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
    runner = RequestRunner(store)
    fingerprint = _model_fingerprint(spec)
    built: list[Callable[[str], str]] = []

    def execute(batch: list[ParaphraseRequest]) -> list[str]:
        if not built:
            built.append(make())
        return [built[0](r.prompt) for r in batch]

    def generate(prompt: str) -> str:
        request = ParaphraseRequest(prompt=prompt, max_tokens=max_tokens)
        return str(runner.run("paraphraser", fingerprint, [request], execute)[0])

    generate.counts = runner.counts  # type: ignore[attr-defined]
    return generate


def standalone_requests() -> ModelRequests:
    """A client with no run behind it (in-memory store): for attack set-up in library use."""
    from imprint.requests.store import RequestStore

    return ModelRequests({}, RequestRunner(RequestStore(None)), local_models=local_transformers)


def _sample_batch(sampler: Any, batch: Sequence[SampleRequest]) -> list[list[str]]:
    """Answer a batch of sample requests; seeded draws get one call per prompt."""
    out: dict[SampleRequest, list[str]] = {}
    per_prompt_seed = bool(getattr(sampler, "seeds_per_prompt", False))
    groups: dict[tuple[Any, ...], list[SampleRequest]] = {}
    for r in batch:
        groups.setdefault(r.params(), []).append(r)
    for reqs in groups.values():
        head = reqs[0]
        # greedy decoding draws nothing, and some backends seed each prompt themselves: batch
        calls = [reqs] if head.temperature == 0 or per_prompt_seed else [[r] for r in reqs]
        for call in calls:
            seed = (
                head.seed
                if len(call) > 1 or per_prompt_seed
                else prompt_seed(head.seed, call[0].prompt)
            )
            texts = sampler.sample(
                [r.prompt for r in call],
                head.n,
                head.max_tokens,
                list(head.stop) or None,
                seed=seed,
                temperature=head.temperature,
                top_k=head.top_k,
                task=head.task,
            )
            out.update(zip(call, texts, strict=True))
    return [out[r] for r in batch]


def sample_on(backend: Any, batch: Sequence[SampleRequest]) -> list[list[str]]:
    """``_sample_batch`` on a worker's own backend replica (the Ray executor's remote form)."""
    from imprint.backends.text import as_text_backend

    return _sample_batch(as_text_backend(backend), batch)


def next_tokens_on(backend: Any, batch: Sequence[Any]) -> list[dict[str, Any]]:
    """SimMIA's next-token laws on a worker's own backend replica (remote form)."""
    from imprint.requests.next_token import token_laws

    local = local_transformers(backend)
    assert local is not None  # the driver checked its own replica of the same model
    return [token_laws(local, r) for r in batch]


def _text_rng(request: NextWordRequest) -> np.random.Generator:
    digest = hashlib.sha256(
        f"{request.seed}\x00{request.prefix or ''}\x00{request.text}".encode(
            "utf-8", "surrogatepass"
        )
    ).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def local_transformers(backend: Any) -> Any | None:
    """The local transformers backend behind ``backend`` (an HFLogprobBackend itself, or the one
    an HFTextBackend wraps), which fast paths can drive; None for text-only backends."""
    for candidate in (backend, getattr(backend, "hf", None)):
        attrs = ("model", "tokenizer", "encode", "bos_id", "_head")
        if candidate is not None and all(hasattr(candidate, a) for a in attrs):
            return candidate
    return None


def _score_directly(
    backend: Any, role: str, texts: Sequence[str], *, prefix: str | None = None
) -> list[Any]:
    from imprint.backends.base import ScoreRequest

    return list(backend.score([ScoreRequest(t, prefix) for t in texts]))


def load_local_model(role: str, spec: str) -> Any:
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
        logprobs=_score_directly,
        loader=load_local_model,
    )
