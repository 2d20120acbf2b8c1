"""The built-in backend providers (see :mod:`imprint.backends.registry` for the schemes).

Each is a :class:`~imprint.backends.registry.BackendProvider` that the registry names lazily
(``imprint.backends.providers:HF`` ...): this module is imported on the first provider lookup.
Each loader imports its heavy dependency (torch and transformers, vLLM, httpx) in its body.
"""

from __future__ import annotations

import hashlib
from typing import Any

from imprint.backends.base import GRADIENTS, LOGPROBS, SAMPLING, TOKEN_LOGPROBS
from imprint.backends.http_logprobs import LogprobOptions
from imprint.backends.options import HFOptions, OpenAIOptions, VLLMOptions
from imprint.backends.registry import BackendChoice, BackendProvider, LoadContext, make_provider
from imprint.backends.shared_options import settings_for

__all__ = [
    "GGUF",
    "HF",
    "OPENAI",
    "OPENAI_LOGPROBS",
    "VLLM",
    "load_hf",
    "load_openai",
    "load_openai_logprobs",
    "load_vllm",
]

#: the run's shared model options that feed the local transformers options (references too)
_HF_SETTINGS = settings_for(HFOptions)


def load_hf(choice: BackendChoice, context: LoadContext) -> Any:
    """A local transformers model (alias, folder, hub id, GGUF file, game folder)."""
    from imprint.backends.hf import HFLogprobBackend

    options: HFOptions = choice.options
    return HFLogprobBackend(
        choice.target,
        name=context.name,
        device=options.device,
        dtype=options.dtype,
        max_length=options.max_length,
        stride=options.stride,
        start_token=options.start_token,
        token_budget=context.token_budget,
    )


def load_vllm(choice: BackendChoice, context: LoadContext) -> Any:
    """vLLM over a hub id or folder; an alias, ``gguf:PATH`` or ``game:DIR`` is first resolved
    to a folder of safetensors (GGUF de-quantised once, as for hf) that vLLM can load."""
    from imprint.backends.models import fingerprint_source, materialize, resolve_model
    from imprint.backends.vllm_logprobs import VLLMBackend

    source = resolve_model(choice.target)
    options: VLLMOptions = choice.options
    engine = options.engine_args()
    identity = [fingerprint_source(source), "vllm", engine["dtype"], str(options.max_model_len)]
    return VLLMBackend(
        materialize(source).location,
        name=context.name,
        start_token=options.start_token,
        engine_args=engine,
        model_fingerprint=hashlib.sha256("|".join(identity).encode()).hexdigest()[:20],
    )


def load_openai(choice: BackendChoice, context: LoadContext) -> Any:
    """The API at ``choice.api_base`` serving the model ``choice.target``; answers are cached
    in ``context.cache`` as they arrive."""
    from imprint.backends.http import OpenAICompatibleBackend

    assert choice.api_base is not None  # choose_backend refuses openai without one
    return OpenAICompatibleBackend.from_choice(choice, context)


def load_openai_logprobs(choice: BackendChoice, context: LoadContext) -> Any:
    """Prompt log-probs from the completions server at ``choice.api_base`` (probed on load);
    every answer is stored in ``context.cache`` as it arrives."""
    from imprint.backends.http_logprobs import HTTPLogprobBackend

    assert choice.api_base is not None  # choose_backend refuses it without one
    return HTTPLogprobBackend(
        choice.api_base, choice.target, choice.options, name=context.name, cache=context.cache
    )


def _hf_like(name: str, summary: str, example: str) -> BackendProvider:
    return make_provider(
        name,
        load_hf,
        options=HFOptions,
        capabilities=frozenset({LOGPROBS, GRADIENTS, SAMPLING}),
        summary=summary,
        example=example,
        settings=_HF_SETTINGS,
        whole_spec=True,  # resolve_model reads hf:, gguf:, game:, aliases and folders itself
    )


HF = _hf_like(
    "hf", "Hugging Face transformers: per-token log-probs, gradients, sampling", "hf:owner/name"
)
GGUF = _hf_like("gguf", "a GGUF file, de-quantised once, run as hf", "gguf:/models/model.Q4_1.gguf")
VLLM = make_provider(
    "vllm",
    load_vllm,
    options=VLLMOptions,
    capabilities=frozenset({SAMPLING, TOKEN_LOGPROBS}),
    summary="vLLM engine: sampling with prefix caching (black-box attacks) and prompt log-probs "
    "(attacks on per-token log p: loss, zlib, min_k, recall ...; not min_k_pp/surp/dc_pdd)",
    example="vllm:meta-llama/Llama-3.2-1B",
    settings=settings_for(VLLMOptions, max_model_len="max_length"),
    requires=(("vllm", "vllm"),),
)
OPENAI = make_provider(
    "openai",
    load_openai,
    options=OpenAIOptions,
    capabilities=frozenset({SAMPLING}),
    summary="an OpenAI-compatible HTTP API (completions or chat): text only",
    example="openai:gpt-4o-mini --api-base https://api.openai.com/v1",
    settings={
        "mode": "api_mode",
        "key_env": "api_key_env",
        "concurrency": "api_concurrency",
        "top_k": "api_top_k",
        "timeout": "api_timeout",
        "max_retries": "api_max_retries",
    },
    requires=(("httpx", "api"),),
)
OPENAI_LOGPROBS = make_provider(
    "openai-logprobs",
    load_openai_logprobs,
    options=LogprobOptions,
    capabilities=frozenset({TOKEN_LOGPROBS}),
    summary="an OpenAI-compatible completions server's prompt log-probs (echo + logprobs; "
    "vLLM, llama-cpp-python): attacks on per-token log p (loss, zlib, min_k, recall ...)",
    example="openai-logprobs:MODEL --api-base http://127.0.0.1:8000/v1",
    requires=(("httpx", "api"),),
)
