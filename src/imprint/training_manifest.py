"""Training manifests: which reference model saw which texts (LiRA's and RMIA's reference models).

Reference-model attacks need models trained on *known* data: for every reference model, which of
the run's samples it trained on (IN) and which it did not (OUT). A privacy game writes such a
manifest for the reference models it trains (``imprint game build --reference-models K``); users
who trained their own reference models write one by hand. Two forms, JSON or YAML:

- a plain mapping ``model spec -> list of the sample ids it trained on`` (every other sample of
  the run is OUT for that model);
- the full form::

      imprint_training_manifest: 1
      population: [text, ...]     # optional: texts no model (target included) trained on
      models:
        - name: r0                # optional (default reference-<i>)
          spec: path/to/model     # any local model spec; a relative path is read from here
          members: [id, ...]      # sample ids the model trained on
          nonmembers: [id, ...]   # optional; with it, ids in neither list are unknown

Membership is looked up by sample id (``Sample.id``, the ``--id-field`` of the data); a run
refuses ids that match none of its samples (:func:`check_reference_ids`), since a wrong id would
silently turn an IN sample into OUT, unless told to accept them (``--allow-unmatched-ids``).
This module imports no torch; the run turns a manifest into extra backend roles and gives
attacks the :class:`ReferenceSet` (``RunContext.references``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from imprint.errors import ConfigError

__all__ = [
    "GAME_MANIFEST",
    "IN",
    "OUT",
    "REFERENCES_DIR",
    "UNKNOWN",
    "ReferenceModel",
    "ReferenceSet",
    "check_reference_ids",
    "load_reference_set",
    "write_training_manifest",
]

#: Where a game keeps its reference models and their manifest (inside the game folder).
REFERENCES_DIR = "references"
GAME_MANIFEST = "training-manifest.json"
FORMAT = 1
IN, OUT, UNKNOWN = 1, 0, -1


@dataclass(frozen=True)
class ReferenceModel:
    """One reference model: its role name in the run, its model spec and what it trained on.

    ``nonmembers=None`` means every sample not in ``members`` is OUT."""

    name: str
    spec: str
    members: frozenset[str]
    nonmembers: frozenset[str] | None = None

    def membership(self, sample_id: str) -> int:
        if sample_id in self.members:
            return IN
        if self.nonmembers is None or sample_id in self.nonmembers:
            return OUT
        return UNKNOWN


@dataclass(frozen=True)
class ReferenceSet:
    """Reference models with known training data, plus population texts that none of them (nor
    the target) trained on (RMIA's comparison texts z)."""

    models: tuple[ReferenceModel, ...]
    population: tuple[str, ...] = ()
    source: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def matrix(self, sample_ids: Sequence[str]) -> np.ndarray:
        """Membership, shape (n_models, n_samples): 1 IN, 0 OUT, -1 unknown."""
        return np.array(
            [[m.membership(i) for i in sample_ids] for m in self.models], dtype=np.int8
        ).reshape(len(self.models), len(sample_ids))

    def unmatched(self, sample_ids: Iterable[str]) -> list[str]:
        """The ids the models list (as members or non-members) that none of ``sample_ids`` is,
        sorted."""
        named: set[str] = set()
        for m in self.models:
            named |= m.members | (m.nonmembers or frozenset())
        return sorted(named - set(sample_ids))


def check_reference_ids(
    refset: ReferenceSet, sample_ids: Iterable[str], *, allow: bool = False
) -> dict[str, Any]:
    """What the manifest records of ``refset`` for a run over ``sample_ids``: its source, the
    number of models, and the ids it lists that match no sample (count and the first 5).

    Unmatched ids raise :class:`ConfigError` unless ``allow``: membership is matched by id, so a
    typo'd id silently turns an IN sample into OUT."""
    unmatched = refset.unmatched(sample_ids)
    if unmatched and not allow:
        shown = ", ".join(repr(i) for i in unmatched[:3])
        more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
        raise ConfigError(
            f"training manifest {refset.source}: {len(unmatched)} sample id(s) match no sample "
            f"of the run: {shown}{more}. Membership is matched by sample id (a JSONL file's rows "
            "are <stem>:<line>, e.g. data:1), so a wrong id turns an IN sample into OUT; fix the "
            "ids, or pass --allow-unmatched-ids if the models also trained on texts outside "
            "this run (the ids are then counted in the manifest and report)"
        )
    return {
        "source": refset.source,
        "models": len(refset.models),
        "unmatched_ids": len(unmatched),
        "unmatched_examples": unmatched[:5],
    }


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"training manifest {path}: cannot read it ({err})") from err
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        from imprint.strict_yaml import safe_load

        try:
            return safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"training manifest {path}: not valid YAML ({err})") from err
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as err:
        raise ConfigError(
            f"training manifest {path}: not valid JSON ({err}); name a YAML file *.yaml"
        ) from err


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique (json keeps the last of a repeated key silently:
    a model listed twice in the plain form would lose its first list of ids)."""
    keys = [k for k, _ in pairs]
    twice = [k for k in keys if keys.count(k) > 1]
    if twice:
        raise ValueError(f"key {twice[0]!r} appears twice; merge its entries into one")
    return dict(pairs)


#: keys of a model entry and of the full form: a typo ('nonmember') must not be ignored, or
#: every sample outside 'members' would silently count as OUT
ENTRY_KEYS = ("name", "spec", "members", "nonmembers")
TOP_KEYS = ("imprint_training_manifest", "population", "models")


def _known(entry: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [str(k) for k in entry if k not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; the keys are {', '.join(known)}")


def _ids(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise ConfigError(
            f"{where} must be a list of sample ids (strings), got {type(value).__name__}"
        )
    return frozenset(str(v) for v in value)


def _spec(spec: Any, base: Path, where: str) -> str:
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{where}: 'spec' must be a model spec (alias, folder, gguf:PATH)")
    local = base / spec
    return str(local.resolve()) if ":" not in spec and local.exists() else spec


def _models(data: Any, base: Path, where: str) -> list[ReferenceModel]:
    if isinstance(data, dict) and "models" in data:
        _known(data, TOP_KEYS, where)
        entries = data["models"]
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{where}: 'models' must be a non-empty list of models")
        out = []
        for i, entry in enumerate(entries):
            at = f"{where}, models[{i}]"
            if not isinstance(entry, dict) or "members" not in entry:
                raise ConfigError(f"{at}: each model needs 'spec' and 'members' (sample ids)")
            _known(entry, ENTRY_KEYS, at)
            nonmembers = entry.get("nonmembers")
            out.append(
                ReferenceModel(
                    name=str(entry.get("name") or f"reference-{i}"),
                    spec=_spec(entry.get("spec"), base, at),
                    members=_ids(entry["members"], f"{at}.members"),
                    nonmembers=None if nonmembers is None else _ids(nonmembers, f"{at}.nonmembers"),
                )
            )
        return out
    if isinstance(data, dict) and data:  # the plain form: spec -> ids
        return [
            ReferenceModel(
                f"reference-{i}", _spec(spec, base, where), _ids(ids, f"{where}[{spec}]")
            )
            for i, (spec, ids) in enumerate(data.items())
        ]
    raise ConfigError(
        f"{where}: expected a mapping 'model spec -> [sample ids]' or "
        "{'models': [{'spec': ..., 'members': [...]}]}; see imprint.training_manifest"
    )


def check_reference_names(names: list[str], where: str = "", note: str = "") -> None:
    """The one check of reference model names (a manifest's, a run's --ref and --references
    together): unique, and none called ``target`` (the model under attack)."""
    if len(set(names)) != len(names) or "target" in names:
        place = f"{where}: " if where else ""
        raise ConfigError(
            f"{place}reference model names must be unique and not 'target': {names}{note}"
        )


def _check(models: list[ReferenceModel], where: str) -> None:
    check_reference_names([m.name for m in models], where)
    for m in models:
        overlap = m.members & (m.nonmembers or frozenset())
        if overlap:
            raise ConfigError(
                f"{where}: model {m.name!r} lists {len(overlap)} id(s) as both member and "
                f"non-member, e.g. {sorted(overlap)[0]!r}"
            )


def manifest_path(spec: str) -> Path:
    """The manifest file ``--references SPEC`` names: a file, or a game folder (``game:DIR``)."""
    raw = spec[len("game:") :] if spec.startswith("game:") else spec
    path = Path(raw).expanduser()
    if path.is_dir():
        inner = path / REFERENCES_DIR / GAME_MANIFEST
        if not inner.is_file():
            raise ConfigError(
                f"--references {spec!r}: {path} has no {REFERENCES_DIR}/{GAME_MANIFEST}; build the "
                f"game's reference models with `imprint game build --out {path} --reference-models "
                "K` (same options as the game), or pass a training manifest file"
            )
        return inner
    if not path.is_file():
        raise ConfigError(
            f"--references {spec!r}: no such file or game folder; pass a training manifest "
            "(.json/.yaml) or a game folder built with --reference-models K"
        )
    return path


def load_reference_set(spec: str) -> ReferenceSet:
    """The reference models a training manifest (or a game folder) describes; teaching errors
    for a missing file, a malformed entry, duplicate names or contradictory membership."""
    path = manifest_path(spec)
    data = _read(path)
    models = _models(data, path.parent, f"training manifest {path}")
    _check(models, f"training manifest {path}")
    population = data.get("population", []) if isinstance(data, dict) else []
    if not isinstance(population, list) or not all(isinstance(t, str) for t in population):
        raise ConfigError(f"training manifest {path}: 'population' must be a list of texts")
    return ReferenceSet(tuple(models), tuple(population), str(path))


def write_training_manifest(
    path: Path, models: Iterable[ReferenceModel], *, population: Sequence[str] = ()
) -> None:
    """Write the full form (JSON); specs that are folders under ``path``'s folder are relative."""
    base = path.parent.resolve()
    entries = []
    for m in models:
        spec = Path(m.spec)
        rel = (
            spec.resolve().relative_to(base)
            if spec.is_absolute() and spec.is_relative_to(base)
            else None
        )
        entries.append(
            {
                "name": m.name,
                "spec": str(rel) if rel is not None else m.spec,
                "members": sorted(m.members),
                "nonmembers": None if m.nonmembers is None else sorted(m.nonmembers),
            }
        )
    for e in entries:
        if e["nonmembers"] is None:
            del e["nonmembers"]
    payload = {
        "imprint_training_manifest": FORMAT,
        "population": list(population),
        "models": entries,
    }
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
