"""The whole sampling law, sent in each server's own words, so no server default applies.

An attack defines its sampling as temperature and top-k; everything else is the plain model
distribution: top-p 1, min-p 0, no repetition, frequency or presence penalty. Servers apply
their own defaults to any field not sent (llama.cpp: top-p 0.95, min-p 0.05, top-k 40, repeat
penalty 1.1; ``transformers serve``: the model's ``generation_config``, which for SmolLM2 has no
``do_sample`` and so decodes greedily at temperature 1), and they name the fields differently:

- ``openai`` (hosted APIs, and any server not recognised): the standard fields only
  (``temperature``, ``top_p``, ``frequency_penalty``, ``presence_penalty``, ``seed``). A top-k,
  min-p or repetition penalty cannot be said, so a request asking for one is refused.
- ``vllm``: the standard fields plus ``top_k`` (-1 = off), ``min_p``, ``repetition_penalty``.
- ``llama.cpp`` (llama.cpp's server and llama-cpp-python's): the standard fields plus ``top_k``
  (0 = off), ``min_p``, ``repeat_penalty``, ``typical_p``. llama-cpp-python's request model has
  no ``typical_p`` (it would be dropped unread), so it is not sent there and the manifest says
  so (:func:`known_ignored`); its sampler's default, 1.0, is off, the law's value.
- ``transformers`` (``transformers serve``, which refuses unknown fields with 422): the law as a
  ``generation_config`` JSON string (``do_sample``, ``temperature``, ``top_k``, ``top_p``,
  ``min_p``, ``repetition_penalty``), plus ``seed``.

:func:`detect_dialect` reads the server from its ``GET /v1/models`` answer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from imprint.errors import ConfigError

DIALECTS = ("openai", "vllm", "llama.cpp", "transformers")
SERVERS = ("auto", *DIALECTS)


@dataclass(frozen=True)
class SamplingSpec:
    """One request's sampling law. ``top_k`` 0 = no top-k filter; temperature 0 = greedy."""

    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # multiplicative (1 = none), as HF, vLLM and llama.cpp
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def sampling_fields(spec: SamplingSpec, dialect: str, seed: int | None) -> dict[str, Any]:
    """The request-body fields that state ``spec`` (and ``seed``) to a ``dialect`` server."""
    greedy = spec.temperature == 0
    fields: dict[str, Any] = {"temperature": spec.temperature}
    if seed is not None:
        fields["seed"] = seed
    if dialect == "transformers":
        law: dict[str, Any] = {"do_sample": not greedy}
        if not greedy:
            law |= {"temperature": spec.temperature, "top_k": spec.top_k, "top_p": spec.top_p}
            law["min_p"] = spec.min_p or None
        law["repetition_penalty"] = spec.repetition_penalty
        return fields | {"generation_config": json.dumps(law, sort_keys=True)}
    fields |= {
        "top_p": spec.top_p,
        "frequency_penalty": spec.frequency_penalty,
        "presence_penalty": spec.presence_penalty,
    }
    if dialect == "vllm":
        return fields | {
            "top_k": spec.top_k if spec.top_k > 0 else -1,
            "min_p": spec.min_p,
            "repetition_penalty": spec.repetition_penalty,
        }
    if dialect == "llama.cpp":
        return fields | {
            "top_k": spec.top_k,
            "min_p": spec.min_p,
            "repeat_penalty": spec.repetition_penalty,
            "typical_p": 1.0,
        }
    _check_standard(spec)
    return fields


def _check_standard(spec: SamplingSpec) -> None:
    """Refuse what the standard fields cannot say (rather than let the server's law apply)."""
    if spec.temperature > 0 and spec.top_k > 0:
        raise ConfigError(
            f"an attack asks for top-k {spec.top_k} sampling, but this server takes only the "
            "standard OpenAI fields (no top_k), so its own law would apply: set the attack's "
            "top_k to 0 (e.g. --param samia.top_k=0: the full distribution, a deviation from "
            "the paper), or, if the server takes vLLM's or llama.cpp's fields, say so with "
            "--model-arg server=vllm (or server=llama.cpp)"
        )
    if spec.min_p or spec.repetition_penalty != 1.0:
        raise ConfigError(
            "min_p / repetition_penalty cannot be sent with the standard OpenAI fields; use "
            "--model-arg server=vllm|llama.cpp|transformers if the server takes them"
        )


# fields a server's request model does not read, by its GET /v1/models ``owned_by``: not sent to
# it (a field sent but never read would be reported as stated), and said in the manifest
_IGNORED_BY_OWNER: dict[str, dict[str, str]] = {
    "me": {  # llama-cpp-python (llama_cpp/server/types.py, 0.3.36: CreateCompletionRequest)
        "typical_p": (
            "llama-cpp-python's request models have no typical_p field (an extra field is "
            "dropped unread), so it is not sent; its sampler's default typical_p is 1.0 (off), "
            "the law's value"
        )
    },
}


def known_ignored(models: Any, dialect: str) -> dict[str, str]:
    """Field -> why, for the sampling fields of ``dialect`` that the server listing ``models``
    (a ``GET /v1/models`` answer) is known not to read."""
    if dialect != "llama.cpp":
        return {}
    entries = models.get("data") if isinstance(models, dict) else None
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    owners = {str(e.get("owned_by", "")).lower() for e in entries}
    return {k: v for o in sorted(owners) for k, v in _IGNORED_BY_OWNER.get(o, {}).items()}


def detect_dialect(models: Any, base_url: str) -> tuple[str, str]:
    """(dialect, reason) from a ``GET /v1/models`` JSON answer (None when not served)."""
    entries = models.get("data") if isinstance(models, dict) else None
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    owners = {str(e.get("owned_by", "")).lower() for e in entries}
    if "vllm" in owners:
        return "vllm", "GET /v1/models: owned_by vllm"
    if owners & {"llamacpp", "me"}:
        return "llama.cpp", f"GET /v1/models: owned_by {sorted(owners & {'llamacpp', 'me'})[0]}"
    if entries and all(isinstance(e.get("status"), dict) for e in entries):
        return "transformers", "GET /v1/models: entries carry transformers serve's status field"
    if "api.openai.com" in base_url or owners & {"openai", "system", "openai-internal"}:
        return "openai", "OpenAI's API"
    return "openai", "server not recognised: standard OpenAI sampling fields only"
