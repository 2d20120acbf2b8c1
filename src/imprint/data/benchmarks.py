"""Named benchmarks and data specs: ``resolve_data("wikimia:64")``, a file path, ``hf:owner/name``.

A benchmark is looked up as a local file first, in the data dirs (``$IMPRINT_DATA_DIR``, then
``../shared/data`` relative to the working directory, then ``shared/data`` next to the repository),
and only then on the Hugging Face hub. Other spec prefixes (``hf:``, later ``game:``) dispatch
through a small registry, see :func:`register_data_scheme`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imprint.data.loaders import (
    CSV_SUFFIXES,
    JSONL_SUFFIXES,
    PARQUET_SUFFIXES,
    LoadedData,
    load_file,
    load_hf_dataset,
)
from imprint.errors import ConfigError, DataError, MissingDependencyError

DATA_DIR_ENV = "IMPRINT_DATA_DIR"

#: A scheme loader is called as ``fn(rest_of_spec, **field_kwargs)`` and returns LoadedData.
DataScheme = Callable[..., LoadedData]


@dataclass(frozen=True)
class Benchmark:
    """Where a named benchmark lives: a path under a data dir, and optionally a hub split."""

    name: str
    description: str
    relpath: str
    hub_name: str | None = None
    hub_split: str = "train"
    hub_config: str | None = None


@dataclass(frozen=True)
class BenchmarkInfo:
    """What :func:`list_benchmarks` reports; ``local_path`` is None when no local copy exists."""

    name: str
    description: str
    local_path: Path | None


_BENCHMARKS: dict[str, Benchmark] = {}
_SCHEMES: dict[str, DataScheme] = {}


def register_benchmark(benchmark: Benchmark, *, force: bool = False) -> None:
    """Add a named benchmark; an existing name raises unless ``force=True``."""
    if benchmark.name in _BENCHMARKS and not force:
        raise ConfigError(
            f"benchmark {benchmark.name!r} is already registered; pass force=True to replace it"
        )
    _BENCHMARKS[benchmark.name] = benchmark


def register_data_scheme(prefix: str, fn: DataScheme, *, force: bool = False) -> None:
    """Make ``resolve_data(f"{prefix}:{rest}", **kw)`` call ``fn(rest, **kw)``.

    ``prefix`` must be at least two characters (so Windows drive letters stay paths) and contain
    no ``":"``; an existing prefix raises unless ``force=True``.
    """
    if len(prefix) < 2 or ":" in prefix:
        raise ConfigError(f"data scheme prefix {prefix!r} must be 2+ characters without ':'")
    if prefix in _SCHEMES and not force:
        raise ConfigError(f"data scheme {prefix!r} is already registered; pass force=True")
    _SCHEMES[prefix] = fn


def data_dirs() -> list[Path]:
    """Folders searched for benchmark files, in order (existing or not, duplicates removed)."""
    dirs: list[Path] = []
    env = os.environ.get(DATA_DIR_ENV, "")
    dirs += [Path(d).expanduser() for d in env.split(os.pathsep) if d.strip()]
    dirs.append(Path.cwd() / ".." / "shared" / "data")
    repo_root = Path(__file__).resolve().parents[3]
    dirs.append(repo_root.parent / "shared" / "data")
    unique: list[Path] = []
    for d in dirs:
        d = d.resolve()
        if d not in unique:
            unique.append(d)
    return unique


def find_local(relpath: str) -> Path | None:
    """First ``dir/relpath`` (or ``dir/<file name>``) that exists among :func:`data_dirs`."""
    for d in data_dirs():
        for candidate in (d / relpath, d / Path(relpath).name):
            if candidate.is_file():
                return candidate
    return None


def list_benchmarks() -> list[BenchmarkInfo]:
    """Every registered benchmark, sorted by name, with its local file if one is found."""
    return [
        BenchmarkInfo(b.name, b.description, find_local(b.relpath))
        for b in sorted(_BENCHMARKS.values(), key=lambda b: _natural_key(b.name))
    ]


def _natural_key(name: str) -> list[Any]:
    """Sort ``wikimia:32`` before ``wikimia:128``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def load_benchmark(name: str, **field_kwargs: Any) -> LoadedData:
    """Load a registered benchmark: local file if found, else the hub split."""
    if name not in _BENCHMARKS:
        raise DataError(_unknown_message(name))
    bench = _BENCHMARKS[name]
    path = find_local(bench.relpath)
    if path is not None:
        return load_file(path, **field_kwargs)
    looked = ", ".join(str(d) for d in data_dirs())
    fix = (
        f"Fix: set {DATA_DIR_ENV} to a folder holding {bench.relpath} "
        "(or pass the file path directly)."
    )
    if bench.hub_name is None:
        raise DataError(f"benchmark {name!r}: {bench.relpath} not found in {looked}. {fix}")
    try:
        return load_hf_dataset(
            bench.hub_name,
            split=bench.hub_split,
            config=bench.hub_config,
            id_prefix=Path(bench.relpath).stem,
            **field_kwargs,
        )
    except (DataError, MissingDependencyError) as exc:
        raise DataError(
            f"benchmark {name!r}: {bench.relpath} not found locally (looked in {looked}) "
            f"and the hub fallback failed: {exc} {fix}"
        ) from exc


def _load_hf_spec(rest: str, **field_kwargs: Any) -> LoadedData:
    """``hf:owner/name[:split]`` -> :func:`load_hf_dataset` (split defaults to ``train``)."""
    name, _, split = rest.partition(":")
    if not name:
        raise DataError("hf: spec needs a dataset name, e.g. hf:swj0419/WikiMIA:WikiMIA_length64")
    return load_hf_dataset(name, split=split or "train", **field_kwargs)


def _unknown_message(spec: str) -> str:
    choices = sorted(_BENCHMARKS, key=_natural_key) + [f"{p}:" for p in sorted(_SCHEMES)]
    close = difflib.get_close_matches(spec, choices, n=3, cutoff=0.5)
    family = spec.partition(":")[0]
    close += [c for c in choices if c.partition(":")[0] == family and c not in close]
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return (
        f"unknown data spec {spec!r}: not a benchmark name, a known prefix or an existing file."
        f"{hint} Known: {', '.join(choices)}, or a path to a "
        f"{'/'.join(JSONL_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES)} file."
    )


def resolve_data(spec: str, **field_kwargs: Any) -> LoadedData:
    """Load data named by ``spec``: a benchmark (``wikimia:64``), ``prefix:rest`` for a registered
    scheme (``hf:owner/name[:split]``), or a file path. ``field_kwargs`` go to the loader
    (``text_field``, ``label_field``, ``id_field``, ``on_bad``, ...)."""
    spec = str(spec)
    if spec in _BENCHMARKS:
        return load_benchmark(spec, **field_kwargs)
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in _SCHEMES:
        return _SCHEMES[prefix](rest, **field_kwargs)
    path = Path(spec)
    known = JSONL_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES
    if path.exists() or path.suffix.lower() in known:
        return load_file(path, **field_kwargs)
    raise DataError(_unknown_message(spec))


for _n in (32, 64, 128, 256):
    register_benchmark(
        Benchmark(
            name=f"wikimia:{_n}",
            description=f"WikiMIA, Wikipedia event texts truncated to {_n} words "
            "(members before 2017, non-members after 2023; Shi et al. 2024)",
            relpath=f"wikimia/WikiMIA_length{_n}.jsonl",
            hub_name="swj0419/WikiMIA",
            hub_split=f"WikiMIA_length{_n}",
        )
    )
register_data_scheme("hf", _load_hf_spec)
