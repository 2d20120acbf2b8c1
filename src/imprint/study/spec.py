"""An experiment file (YAML) read into frozen, validated dataclasses: :func:`load_spec`.

The file names the grid: ``models`` x ``benchmarks`` x ``attacks`` x ``sweep`` values, plus
privacy ``games`` swept over epochs. Everything is checked here, before any data or model
loads: unknown keys (with the closest known one), wrong types, unknown attacks and parameters,
ill-typed parameter values. Every error names the file, the place in it (``models[1].args``) and
the fix. See ``examples/*.yaml`` for complete files.
"""

from __future__ import annotations

import difflib
import itertools
import reprlib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.params import check_params
from imprint.backends.models import default_cache_path
from imprint.backends.shared_options import SharedModelOptions
from imprint.errors import ConfigError

__all__ = [
    "AttackVariant",
    "BenchmarkEntry",
    "GameSweep",
    "ModelEntry",
    "Settings",
    "StudySpec",
    "TableLayout",
    "load_spec",
    "parse_spec",
]

TOP_KEYS = (
    "name", "description", "out", "cache", "models", "benchmarks", "data", "refs", "attacks",
    "params", "sweep", "games", "settings", "table",
)  # fmt: skip
COLUMN_AXES = ("model", "benchmark")


@dataclass(frozen=True)
class ModelEntry:
    """A target model: ``name`` labels its column; ``model`` and ``args`` are ``imprint run``'s
    ``--model`` and ``--model-arg``. ``paired`` benchmarks (a game's own candidates) replace the
    grid's benchmarks for this model."""

    name: str
    model: str
    args: Mapping[str, Any] = field(default_factory=dict)
    paired: tuple[BenchmarkEntry, ...] = ()


@dataclass(frozen=True)
class BenchmarkEntry:
    """A data spec (``wikimia:32``, a file, ``game:DIR`` ...) and how it is prepared."""

    name: str
    data: str
    truncate: int | None = None
    min_words: int | None = None
    n_per_label: int | None = None
    text_field: str | None = None
    label_field: str | None = None
    dedupe: bool = True
    pools: Mapping[str, str] = field(default_factory=dict)  # pool name -> data spec


@dataclass(frozen=True)
class AttackVariant:
    """One row family of the tables: an attack with one setting of its parameters."""

    attack: str
    params: Mapping[str, Any] = field(default_factory=dict)  # typed; fixed and swept values
    swept: tuple[tuple[str, Any], ...] = ()  # the swept (parameter, value) pairs, for labels

    @property
    def label(self) -> str:
        """``min_k`` or ``min_k (k=0.2)``."""
        if not self.swept:
            return self.attack
        return f"{self.attack} ({', '.join(f'{p}={_show(v)}' for p, v in self.swept)})"


@dataclass(frozen=True)
class GameSweep:
    """A privacy game built once per epoch count (one training run, snapshots): each snapshot
    is a model column, attacked on the game's own candidates (benchmark ``name``)."""

    name: str
    config: Mapping[str, Any]  # GameConfig fields, validated
    epochs: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Settings(SharedModelOptions):
    """Run settings shared by every cell (the ``imprint run`` options of the same names): the
    shared model options (declared once, :class:`SharedModelOptions`; its ``shared_args()``
    gives those changed, ``RunConfig.shared_args``) and these."""

    seed: int = 0
    n_bootstrap: int = 1000
    token_budget: int | None = None
    blind: bool = True


@dataclass(frozen=True)
class TableLayout:
    """``columns``: what the columns of a table are (``model``: one table per benchmark;
    ``benchmark``: one table per model); ``fpr``: the FPR bound of the TPR figure."""

    columns: str = "model"
    fpr: float = 0.01


@dataclass(frozen=True)
class StudySpec:
    """A whole experiment file, validated (see the module docstring)."""

    name: str
    source: Path
    out: Path
    cache: Path
    models: tuple[ModelEntry, ...]
    benchmarks: tuple[BenchmarkEntry, ...]
    variants: tuple[AttackVariant, ...]
    refs: tuple[tuple[str, str], ...] = ()
    games: tuple[GameSweep, ...] = ()
    settings: Settings = Settings()
    table: TableLayout = TableLayout()
    description: str = ""
    #: one line for the user when the store is not the default one (an old folder's own)
    cache_note: str = ""


class _At:
    """A place in the file, for errors: ``FILE: models[1].args: ...``."""

    def __init__(self, source: Path, where: str = "") -> None:
        self.source, self.where = source, where

    def __truediv__(self, part: str | int) -> _At:
        if isinstance(part, int):
            return _At(self.source, f"{self.where}[{part}]")
        return _At(self.source, f"{self.where}.{part}" if self.where else part)

    def error(self, message: str) -> ConfigError:
        place = f"{self.where}: " if self.where else ""
        return ConfigError(f"{self.source}: {place}{message}")


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _mapping(value: Any, at: _At, known: Sequence[str] | None = None) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise at.error(f"expected a mapping (key: value lines), got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise at.error(f"key {key!r} is not text; quote it")
        if known is not None and key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise at.error(f"unknown key {key!r}{hint}; known keys: {', '.join(known)}")
    return dict(value)


def _list(value: Any, at: _At, *, allow_empty: bool = False) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise at.error(f"expected a list (lines starting with '- '), got {_kind(value)}")
    if not value and not allow_empty:
        raise at.error("is empty; list at least one entry")
    return list(value)


def _text(value: Any, at: _At) -> str:
    if not isinstance(value, str) or not value.strip():
        raise at.error(f"expected non-empty text, got {_kind(value)}")
    return value


def _int(value: Any, at: _At, *, minimum: int = 1, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise at.error(f"expected a whole number >= {minimum}, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    shown = reprlib.repr(value)  # bounded: a nested YAML alias bomb must not be printed whole
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{shown} ({type(value).__name__})"


#: values a file may expand to (YAML aliases included); real grids have a few hundred
MAX_NODES = 100_000


def _check_size(raw: Any, source: Path) -> None:
    """Refuse a file whose aliases expand to more than :data:`MAX_NODES` values (a 'billion
    laughs' file would otherwise take every later step minutes and gigabytes)."""
    stack, seen = [raw], 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ConfigError(
                f"{source}: expands to more than {MAX_NODES:,} values (YAML anchors/aliases "
                "repeated inside each other?); write the grid out without nested aliases"
            )
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)


def _unique(names: Sequence[str], at: _At, what: str) -> None:
    seen = [n for n in names if names.count(n) > 1]
    if seen:
        raise at.error(f"{what} {seen[0]!r} is given twice; names label table columns and rows")


#: a key as the run's API and command line name it -> the grid's own key (both accepted, so
#: one name works in RunConfig, on the command line and here)
_ALIASES = {"model_args": "args", "truncate_words": "truncate"}


def _unalias(raw: Mapping[str, Any], at: _At) -> dict[str, Any]:
    """``raw`` with API-style keys (:data:`_ALIASES`) renamed to the grid's; both given: error."""
    out = dict(raw)
    for alias, key in _ALIASES.items():
        if alias in out:
            if key in out:
                raise at.error(f"{alias!r} and {key!r} are one option; keep one")
            out[key] = out.pop(alias)
    return out


def _model(value: Any, at: _At) -> ModelEntry:
    if isinstance(value, str):
        return ModelEntry(name=_text(value, at), model=value)
    raw = _unalias(_mapping(value, at, ("name", "model", "args", "model_args")), at)
    if "model" not in raw:
        raise at.error("a model entry needs 'model' (an alias, folder, gguf:PATH or hub id)")
    spec = _text(raw["model"], at / "model")
    args = _mapping(raw.get("args", {}), at / "args")
    return ModelEntry(name=_text(raw.get("name", spec), at / "name"), model=spec, args=args)


_BENCH_KEYS = ("name", "data", "truncate", "min_words", "n_per_label", "text_field", "label_field")


def _benchmark(value: Any, at: _At, defaults: Mapping[str, Any]) -> BenchmarkEntry:
    raw = {"data": value} if isinstance(value, str) else None
    if raw is None:
        raw = _unalias(_mapping(value, at, (*_BENCH_KEYS, "dedupe", "pools", "truncate_words")), at)
    if "data" not in raw:
        raise at.error("a benchmark entry needs 'data' (e.g. wikimia:32 or a file path)")
    data = _text(raw["data"], at / "data")
    merged = {**defaults, **raw}
    fields = {k: _int(merged.get(k), at / k, optional=True) for k in _BENCH_KEYS[2:5]}
    texts = {
        k: None if merged.get(k) is None else _text(merged[k], at / k) for k in _BENCH_KEYS[5:]
    }
    dedupe = merged.get("dedupe", True)
    if not isinstance(dedupe, bool):
        raise at.error(f"dedupe: expected true or false, got {_kind(dedupe)}")
    pools = {
        k: _text(v, at / "pools" / k) for k, v in _mapping(merged.get("pools", {}), at).items()
    }
    name = _text(raw.get("name", data), at / "name")
    return BenchmarkEntry(name, data, **fields, **texts, dedupe=dedupe, pools=pools)  # type: ignore[arg-type]


def _variants(raw: dict[str, Any], at: _At, refs: Sequence[str]) -> tuple[AttackVariant, ...]:
    """The attacks crossed with their sweeps; every name and value checked as a run would
    (each variant is built once here: a k outside (0, 1] fails now, not after other cells)."""
    listed = _list(raw["attacks"], at / "attacks")
    attacks = [_text(a, at / "attacks" / i) for i, a in enumerate(listed)]
    _unique(attacks, at / "attacks", "attack")
    fixed = _mapping(raw.get("params", {}), at / "params", attacks)
    fixed = {a: _mapping(v, at / "params" / a) for a, v in fixed.items()}
    sweeps: dict[str, dict[str, list[Any]]] = {}
    for key, values in _mapping(raw.get("sweep", {}), at / "sweep").items():
        attack, dot, param = key.partition(".")
        if not dot or attack not in attacks:
            raise (at / "sweep").error(
                f"{key!r}: use ATTACK.PARAM with ATTACK one of the listed attacks {attacks}, "
                "e.g. min_k.k: [0.1, 0.2]"
            )
        sweeps.setdefault(attack, {})[param] = _list(values, at / "sweep" / key)
    out = []
    for attack in attacks:
        swept = sweeps.get(attack, {})
        for combo in itertools.product(*swept.values()):
            pairs = tuple(zip(swept, combo, strict=True))
            params = {**fixed.get(attack, {}), **dict(pairs)}
            try:
                typed = check_params({attack: params}).get(attack, {})
                build_attacks([attack], RunContext(refs=tuple(refs)), params={attack: typed})
            except ConfigError as err:
                hint = " (add refs: {NAME: MODEL} to the file)" if "--ref" in str(err) else ""
                raise at.error(f"{err}{hint}") from None
            out.append(AttackVariant(attack, typed, tuple((p, typed[p]) for p, _ in pairs)))
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):  # same row twice: [0.1, 0.1], [1, 1.0], 0.1 vs 0.1000001
        twice = next(label for label in labels if labels.count(label) > 1)
        raise (at / "sweep").error(f"{twice!r} comes out twice; list each value once")
    return tuple(out)


def _games(value: Any, at: _At) -> tuple[GameSweep, ...]:
    from imprint.game.config import GameConfig

    out = []
    for i, item in enumerate(_list(value, at)):
        raw = _mapping(item, at / i, ("name", "epochs", "config"))
        for key in ("name", "epochs"):
            if key not in raw:
                raise (at / i).error(f"a game needs {key!r}, e.g. name: demo, epochs: [1, 2, 4]")
        epochs = tuple(
            int(_int(e, at / i / "epochs" / j) or 1)
            for j, e in enumerate(_list(raw["epochs"], at / i / "epochs"))
        )
        config = _mapping(raw.get("config", {}), at / i / "config")
        try:  # every field and value checked now, not after an hour of other cells
            GameConfig(**{**config, "epochs": max(epochs)})
        except (TypeError, ConfigError) as err:
            raise (at / i / "config").error(f"{err} (see `imprint game build --help`)") from None
        out.append(GameSweep(_text(raw["name"], at / i / "name"), config, tuple(sorted(epochs))))
    _unique([g.name for g in out], at, "game")
    from imprint.study.table_render import slug

    folders = [slug(g.name) for g in out]  # each game is built in <out>/games/<slug>
    if len(set(folders)) != len(folders):
        twice = [g.name for g, f in zip(out, folders, strict=True) if folders.count(f) > 1]
        raise at.error(f"games {twice} would share one folder; name them apart in letters/digits")
    return tuple(out)


def _settings(value: Any, at: _At) -> Settings:
    known = tuple(Settings.__dataclass_fields__)
    raw = _mapping(value, at, known)
    for key in ("seed",):
        if key in raw:
            _int(raw[key], at / key, minimum=0)
    for key in ("n_bootstrap",):
        if key in raw:
            _int(raw[key], at / key)
    hints = typing.get_type_hints(Settings)  # each key's type, from the one declaration
    for key in (k for k in raw if k not in ("seed", "n_bootstrap", "blind")):
        if hints[key] == int | None:
            _int(raw[key], at / key, optional=True)
        elif hints[key] is str:
            _text(raw[key], at / key)
    if "blind" in raw and not isinstance(raw["blind"], bool):
        raise (at / "blind").error(f"expected true or false, got {_kind(raw['blind'])}")
    return Settings(**raw)


def _table(value: Any, at: _At) -> TableLayout:
    raw = _mapping(value, at, ("columns", "fpr"))
    columns = raw.get("columns", "model")
    if columns not in COLUMN_AXES:
        raise (at / "columns").error(f"expected one of {COLUMN_AXES}, got {_kind(columns)}")
    fpr = raw.get("fpr", 0.01)
    if isinstance(fpr, bool) or not isinstance(fpr, int | float) or not 0 < fpr < 1:
        raise (at / "fpr").error(f"expected an FPR bound in (0, 1) such as 0.01, got {_kind(fpr)}")
    return TableLayout(columns, float(fpr))


def _refs(value: Any, at: _At) -> tuple[tuple[str, str], ...]:
    raw = _mapping(value, at)
    if "target" in raw:
        raise at.error("'target' is the model under attack; name the reference otherwise")
    return tuple((name, _text(spec, at / name)) for name, spec in raw.items())


def parse_spec(raw: Any, source: Path, *, out: Path | None = None) -> StudySpec:
    """A :class:`StudySpec` from the parsed YAML ``raw`` of ``source``; ``out`` overrides the
    file's ``out`` (default ``studies/<file stem>``); ``cache`` defaults to a run's store,
    :func:`imprint.backends.models.default_cache_path` (under ``$IMPRINT_CACHE_DIR``), except
    for a study folder that already holds its own ``cache.sqlite`` (written before the grid
    shared the global store), which keeps using it."""
    at = _At(source)
    raw = _mapping(raw, at, TOP_KEYS)
    if "attacks" not in raw:
        raise at.error("no 'attacks': list the attacks to run, e.g. attacks: [loss, zlib, min_k]")
    if "models" not in raw and "games" not in raw:
        raise at.error("no 'models' (nor 'games'): list the target models, e.g. [smollm2-135m]")
    games = _games(raw["games"], at / "games") if "games" in raw else ()
    models = tuple(
        _model(m, at / "models" / i)
        for i, m in enumerate(_list(raw.get("models", []), at / "models", allow_empty=bool(games)))
    )
    defaults = _unalias(
        _mapping(raw.get("data", {}), at / "data", (*_BENCH_KEYS[2:], "dedupe", "pools",
                 "truncate_words")),
        at / "data",
    )  # fmt: skip
    if "benchmarks" not in raw and models:
        raise at.error("no 'benchmarks': list data specs, e.g. benchmarks: [wikimia:32]")
    benchmarks = tuple(
        _benchmark(b, at / "benchmarks" / i, defaults)
        for i, b in enumerate(
            _list(raw.get("benchmarks", []), at / "benchmarks", allow_empty=not models)
        )
    )
    _unique([m.name for m in models], at / "models", "model name")
    _unique([b.name for b in benchmarks] + [g.name for g in games], at / "benchmarks", "benchmark")
    refs = _refs(raw.get("refs", {}), at / "refs")
    out = out or Path(_text(raw.get("out", f"studies/{source.stem}"), at / "out"))
    if out.exists() and not out.is_dir():
        raise at.error(f"study folder {out} is a file; set 'out' (or --out) to a folder")
    cache, note = _cache(raw, at, out)
    return StudySpec(
        name=_text(raw.get("name", source.stem), at / "name"),
        source=source,
        out=out,
        cache=cache,
        models=models,
        benchmarks=benchmarks,
        variants=_variants(raw, at, [name for name, _ in refs]),
        refs=refs,
        games=games,
        settings=_settings(raw.get("settings", {}), at / "settings"),
        table=_table(raw.get("table", {}), at / "table"),
        description=str(raw.get("description", "")),
        cache_note=note,
    )


def _cache(raw: dict[str, Any], at: _At, out: Path) -> tuple[Path, str]:
    """The grid's store and a note when it is not the default: one store with every run and
    diagnostic ($IMPRINT_CACHE_DIR, a run's --cache default), but a folder from an earlier
    release keeps its own store, whose passes a rerun would otherwise compute again."""
    if "cache" in raw:
        return Path(_text(raw["cache"], at / "cache")), ""
    own = out / "cache.sqlite"
    if own.is_file():
        return own, (
            f"using the study folder's own store {own} (written by an earlier release); new "
            f"studies share {default_cache_path()}; set 'cache:' in the file to choose"
        )
    return default_cache_path(), ""


def load_spec(path: str | Path, *, out: Path | None = None) -> StudySpec:
    """Read and validate an experiment file (see :func:`parse_spec`)."""
    import yaml

    from imprint.strict_yaml import safe_load

    source = Path(path)
    if not source.is_file():
        raise ConfigError(
            f"experiment file {source} not found; pass a YAML file such as "
            "examples/wikimia-offline.yaml"
        )
    try:
        raw = safe_load(source.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{source} is not UTF-8 text ({err}); save it as UTF-8") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        place = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(
            f"{source}: not valid YAML{place}: {problem}; check the indentation and quoting there"
        ) from None
    if raw is None:
        raise ConfigError(
            f"{source} is empty; see examples/wikimia-offline.yaml for a complete file"
        )
    _check_size(raw, source)
    return parse_spec(raw, source, out=out)
