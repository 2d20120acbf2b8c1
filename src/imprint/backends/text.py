"""Black-box access: a backend that only returns generated text.

``Backend.sample(prompts, settings) -> list[list[str]]`` returns, for each prompt, ``settings.n``
continuations (the generated text only, without the prompt, cut at the first stop string; see
:class:`~imprint.backends.base.SamplingSettings`). Implementations: :class:`HFTextBackend`
(local transformers model, seeded top-k / temperature sampling), :class:`VLLMTextBackend`
(optional ``vllm`` extra) and :class:`imprint.backends.http.OpenAICompatibleBackend` (any
OpenAI-compatible server).

The settings' ``task`` tells chat endpoints what to ask for (``"continue"`` the text, or only
its ``"next_word"``, or ``"answer"``: the prompt is a whole instruction, sent as it is, e.g.
DE-COP's multiple-choice question); completion backends ignore it. ``usage()`` counts queries
and tokens for the run manifest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from imprint.backends.base import (
    SAMPLING,
    TASKS,
    Backend,
    LocalModel,
    SamplingSettings,
    Task,
    TextBackend,
)
from imprint.backends.sampling import Group, prompt_seed, sample_groups
from imprint.errors import ConfigError, MissingDependencyError

__all__ = [
    "TASKS",
    "HFTextBackend",
    "SamplingSettings",
    "Task",
    "TextBackend",
    "VLLMTextBackend",
    "as_text_backend",
]


def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to (not including) the earliest occurrence of any stop string."""
    if not stop:
        return text
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


class HFTextBackend(Backend):
    """Seeded sampling from a local transformers causal LM (one batched decode loop).

    Wraps a loaded local model, an :class:`imprint.backends.hf.HFLogprobBackend` (sharing its
    model, tokenizer and BOS policy: every prompt starts after one BOS token; its
    :meth:`~imprint.backends.hf.HFLogprobBackend.text_backend` builds one). Defaults follow
    SaMIA: top-k 50, temperature 1. ``max_rows`` bounds prompts x samples per decode loop; a
    prompt's draws are the same whatever ``max_rows`` (up to float noise from padding), and with
    one prompt per loop they equal ``generate``'s under ``torch.manual_seed(prompt_seed(...))``.
    """

    capabilities = frozenset({SAMPLING})
    seeds_per_prompt = True  # one generator per prompt (imprint.backends.sampling)

    def __init__(
        self,
        local: LocalModel,
        *,
        name: str = "target",
        temperature: float = 1.0,
        top_k: int = 50,
        max_rows: int = 256,
    ) -> None:
        if isinstance(local, str):
            raise ConfigError(
                f"HFTextBackend wraps a loaded local model, not a spec ({local!r}): pass "
                "HFLogprobBackend(spec).text_backend() or HFTextBackend(HFLogprobBackend(spec))"
            )
        self.hf = local
        self.name = name
        self.spec = self.hf.spec
        self.temperature, self.top_k, self.max_rows = temperature, top_k, max_rows
        SamplingSettings(1, 1, temperature=temperature, top_k=top_k)  # refuses bad defaults
        self._usage = {"prompts": 0, "samples": 0, "generate_calls": 0, "completion_tokens": 0}

    @property
    def fingerprint(self) -> str:
        parts = [self.hf.fingerprint, str(self.temperature), str(self.top_k)]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]

    def usage(self) -> dict[str, Any]:
        return dict(self._usage)

    def local_model(self) -> LocalModel:
        return self.hf

    def __repr__(self) -> str:
        return f"HFTextBackend({self.spec!r}, temperature={self.temperature}, top_k={self.top_k})"

    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        """``settings.n`` continuations per prompt, shape (len(prompts), n). Each prompt's draws
        come from its own generator seeded ``prompt_seed(seed, prompt)``, so they do not depend
        on the prompts sharing its batch (see :mod:`imprint.backends.sampling`)."""
        law = settings.with_defaults(self.temperature, self.top_k)
        assert law.temperature is not None and law.top_k is not None
        stops = tuple(s for s in law.stop if s)
        groups = [
            Group(
                ids=self._prompt_ids(p, law.task),
                n=law.n,
                max_tokens=law.max_tokens,
                seed=None if law.seed is None else prompt_seed(law.seed, p),
                temperature=law.temperature,
                top_k=law.top_k,
                stop=stops,
            )
            for p in prompts
        ]
        for i, g in enumerate(groups):
            self._check_length(prompts[i], g)
        self._run(groups)
        self._usage["prompts"] += len(prompts)
        self._usage["samples"] += len(prompts) * law.n
        return [[cut_at_stop(self._decode(ids), stops) for ids in g.out] for g in groups]

    def _prompt_ids(self, prompt: str, task: Task) -> list[int]:
        return prompt_ids(self.hf, prompt, task)

    def _check_length(self, prompt: str, group: Group) -> None:
        """Refuse a prompt whose continuation would run past learned position embeddings (an
        index error deep in the model otherwise); rotary models go on past their trained
        context, as ``generate`` does."""
        config = self.hf.model.config
        if getattr(config, "rope_parameters", None) or getattr(config, "rope_theta", None):
            return
        limit = getattr(config, "max_position_embeddings", None)
        if limit and len(group.ids) + group.max_tokens > limit:
            raise ConfigError(
                f"prompt {prompt[:40]!r}... has {len(group.ids)} tokens; with {group.max_tokens} "
                f"new tokens it exceeds the model's {limit} positions: shorten the texts "
                "(--truncate-words) or ask for fewer new tokens"
            )

    def _run(self, groups: list[Group]) -> None:
        """Decode every group, longest prompts first, at most ``max_rows`` rows per loop (rows
        of similar length share a loop, so little padding)."""
        import torch

        order = sorted(range(len(groups)), key=lambda i: -len(groups[i].ids))
        batches: list[list[Group]] = [[]]
        for i in order:
            rows = sum(g.n for g in batches[-1])
            if batches[-1] and rows + groups[i].n > self.max_rows:
                batches.append([])
            batches[-1].append(groups[i])
        decode = self.hf.tokenizer.decode
        with torch.no_grad(), self.hf.attention():
            for batch in batches:
                if batch:
                    sample_groups(self.hf, batch, decode=decode)
                    self._usage["generate_calls"] += 1

    def _decode(self, ids: list[int]) -> str:
        eos = self.hf.tokenizer.eos_token_id
        if eos is not None and eos in ids:
            ids = ids[: ids.index(eos)]
        self._usage["completion_tokens"] += len(ids)
        return self.hf.tokenizer.decode(ids, skip_special_tokens=True)


class VLLMTextBackend(Backend):
    """Sampling with vLLM (prefix caching on): ``pip install 'llm-imprint[vllm]'``.

    ``spec`` is a hub id or local folder vLLM can load. Imported lazily; a missing vllm raises
    :class:`MissingDependencyError` naming the extra. ``engine_args`` go to ``vllm.LLM``
    (tensor_parallel_size, gpu_memory_utilization, max_model_len, dtype ...);
    ``model_fingerprint`` identifies the weights (default: the spec).
    """

    capabilities = frozenset({SAMPLING})
    seeds_per_prompt = True  # vLLM seeds each request of a batch on its own

    def __init__(
        self,
        spec: str,
        *,
        name: str = "target",
        temperature: float = 1.0,
        top_k: int = 50,
        engine_args: dict[str, Any] | None = None,
        model_fingerprint: str | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as err:
            raise MissingDependencyError("vllm", "vllm") from err
        self._vllm = vllm
        self.spec, self.name = spec, name
        self.temperature, self.top_k = temperature, top_k
        self.engine_args = dict(engine_args or {})
        self._model_fingerprint = model_fingerprint or spec
        self.llm = vllm.LLM(model=spec, enable_prefix_caching=True, **self.engine_args)
        self._usage = {"prompts": 0, "samples": 0, "completion_tokens": 0}

    @property
    def fingerprint(self) -> str:
        parts = [self._model_fingerprint, "vllm", str(self.temperature), str(self.top_k)]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]

    def __repr__(self) -> str:
        return f"VLLMTextBackend({self.spec!r}, temperature={self.temperature}, top_k={self.top_k})"

    def usage(self) -> dict[str, Any]:
        return dict(self._usage)

    def sample(self, prompts: Sequence[str], settings: SamplingSettings) -> list[list[str]]:
        law = settings.with_defaults(self.temperature, self.top_k)
        assert law.temperature is not None
        params = self._vllm.SamplingParams(
            n=law.n,
            max_tokens=law.max_tokens,
            stop=list(law.stop) or None,
            seed=law.seed,
            temperature=law.temperature,
            top_k=law.top_k if law.top_k and law.temperature > 0 else -1,
        )
        results = self.llm.generate(list(prompts), params, use_tqdm=False)
        self._usage["prompts"] += len(prompts)
        self._usage["samples"] += len(prompts) * law.n
        out = []
        for result in results:
            self._usage["completion_tokens"] += sum(len(o.token_ids) for o in result.outputs)
            out.append([o.text for o in result.outputs])
        return out


def prompt_ids(hf: LocalModel, prompt: str, task: str) -> list[int]:
    """A prompt's token ids for the local backend ``hf``: one BOS and the text; an instruction
    (task ``answer``) goes through the tokenizer's chat template when it has one, as a chat
    endpoint would (generation and DE-COP's letter read-out share this)."""
    tokenizer = hf.tokenizer
    if task == "answer" and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        encoded = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True
        )
        return [int(i) for i in encoded["input_ids"]]
    return [hf.bos_id, *hf.encode(prompt)]


def as_text_backend(backend: Backend) -> Backend:
    """The backend that samples text for ``backend`` (:meth:`Backend.text_backend`: itself, or
    an :class:`HFTextBackend` over a local model), else :class:`CapabilityError` before any
    work."""
    return backend.text_backend()
