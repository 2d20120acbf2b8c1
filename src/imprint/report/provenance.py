"""What produced a run, for the manifest's ``provenance`` and the report's Provenance block.

imprint's version, the exact command line (URL credentials and queries and ``key=`` style
secrets masked), every model as resolved (what an alias is: base or instruct, quantisation, as
its backend recorded them in the manifest; content fingerprint; a privacy game's base model and
training), the data's source and content fingerprint, and every seed the run used (the run's, a
game's, an attack's). Computed from the manifest the run stage wrote and the process's command
line; nothing is loaded and no backend is imported.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["model_provenance", "provenance", "provenance_rows", "safe_command"]

_URL_SECRET = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)
_QUERY = re.compile(r"(://[^\s?]*)\?\S*")
_KEY_VALUE = re.compile(r"((?:api[_-]?key|token|password|secret)=)\S+", re.IGNORECASE)
NOT_RECORDED = "not recorded by its backend"


def safe_command(argv: list[str]) -> str:
    """``argv`` as one shell line, with credentials in URLs, URL queries and ``key=``-style
    secrets replaced by ``***`` (a manifest is shared; a key in it would leak)."""
    masked = []
    for arg in argv:
        arg = _URL_SECRET.sub(r"\g<scheme>***@", arg)
        arg = _QUERY.sub(r"\1?***", arg)
        masked.append(_KEY_VALUE.sub(r"\1***", arg))
    return shlex.join(masked)


def _version() -> str:
    try:
        return metadata.version("llm-imprint")
    except metadata.PackageNotFoundError:
        from imprint import __version__

        return __version__


def _game(folder: str) -> dict[str, str]:
    """A privacy game's model: fine-tuned from the base model its game.json records."""
    try:
        game = json.loads((Path(folder) / "game.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"resolved": f"the fine-tuned model of the game {folder}", "kind": "fine-tuned"}
    base = game.get("base_model") or {}
    cfg = game.get("config") or {}
    training = f"{cfg.get('method', '?')} fine-tuning, {cfg.get('epochs', '?')} epoch(s)"
    return {
        "resolved": f"{base.get('spec', '?')} (fingerprint {base.get('fingerprint', '?')}) after "
        f"{training} in the privacy game {folder}",
        "kind": f"fine-tuned from {base.get('spec', '?')} (see that model in `imprint backends`)",
    }


def model_provenance(entry: dict[str, Any]) -> dict[str, Any]:
    """One manifest model entry as resolved: spec, provider, what it is, base or instruct,
    quantisation (as its backend recorded them, ``resolved_model``) and the content
    fingerprint the cache keys on."""
    spec = str(entry.get("model") or entry.get("spec") or "?")
    scheme, _, arg = spec.partition(":")
    found: dict[str, Any] = {"resolved": spec, "kind": NOT_RECORDED, "quantisation": NOT_RECORDED}
    found.update(entry.get("resolved_model") or {})
    if scheme == "game" and arg:
        found.update(_game(arg))
    elif scheme in ("openai", "vllm") and arg and not entry.get("resolved_model"):
        found["resolved"] = f"{arg} served by {scheme}"
    return {"spec": spec, "provider": entry.get("provider", "?"), **found,
            "fingerprint": entry.get("fingerprint"), "dtype": entry.get("dtype")}  # fmt: skip


def _seeds(manifest: dict[str, Any]) -> dict[str, Any]:
    config = manifest.get("config") or {}
    seeds: dict[str, Any] = {
        "run (sampling, folds, bootstrap)": config.get("seed"),
        "bootstrap resamples": config.get("n_bootstrap"),
    }
    data = str(config.get("data", ""))
    if data.startswith("game:"):
        try:
            game = json.loads((Path(data[5:]) / "game.json").read_text(encoding="utf-8"))
            seeds["privacy game (split, canaries, training)"] = game.get("seed")
        except (OSError, ValueError):
            pass
    for attack, params in (manifest.get("attacks") or {}).items():
        for key, value in (params or {}).items():
            if "seed" in key and value is not None:
                seeds[f"{attack}.{key}"] = value
    return seeds


def provenance(manifest: dict[str, Any], argv: list[str] | None = None) -> dict[str, Any]:
    """The ``provenance`` entry of a run's manifest (see the module docstring)."""
    argv = list(sys.argv if argv is None else argv)
    data = manifest.get("data") or {}
    config = manifest.get("config") or {}
    return {
        "imprint_version": _version(),
        "command": safe_command(argv),
        "models": {
            role: model_provenance(entry) for role, entry in (manifest.get("models") or {}).items()
        },
        "data": {
            "spec": config.get("data"),
            "source": data.get("source"),
            "fingerprint": data.get("fingerprint"),
        },
        "seeds": _seeds(manifest),
    }


def provenance_rows(record: dict[str, Any]) -> list[list[str]]:
    """The report's Provenance table: (what, value) rows."""
    rows = [
        ["imprint version", str(record.get("imprint_version"))],
        ["command", str(record.get("command"))],
    ]
    for role, model in (record.get("models") or {}).items():
        what = f"{model.get('resolved')}; {model.get('kind')}; {model.get('quantisation')}"
        rows.append([f"model ({role})", f"{model.get('spec')} = {what}"])
        rows.append([f"model fingerprint ({role})", str(model.get("fingerprint"))])
        dtype = model.get("dtype")  # local models: which dtype ran and why (dtype_choice.py)
        if isinstance(dtype, dict):
            rows.append([f"model dtype ({role})", f"{dtype.get('dtype')}: {dtype.get('reason')}"])
    data = record.get("data") or {}
    rows.append(["data", f"{data.get('spec')} ({data.get('source')})"])
    rows.append(["data fingerprint", str(data.get("fingerprint"))])
    seeds = record.get("seeds") or {}
    rows.append(["seeds", ", ".join(f"{k}: {v}" for k, v in seeds.items()) or "none recorded"])
    return rows
