"""The index of ``imprint view``: one :class:`Entry` per output folder found, summarised from its
own files through imprint's loaders; a folder that cannot be read becomes an entry with a note
saying why (never an error: one odd folder must not hide the others)."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.errors import DataError
from imprint.metrics import Interval
from imprint.outdir import LATEST, MARKER, output_kind

__all__ = ["Entry", "find_entries"]

_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(partial|old)-\d+-[0-9a-f]+$")


@dataclass
class Entry:
    """One row of the index. ``kind``: run, document run, game, audit, study, or ``folder``
    (unreadable or not an imprint output; ``note`` says why). ``page`` is True when the entry
    has a run page (scores to browse); ``parent`` is the id of the audit or study that holds it;
    ``data_key`` names the data a run scored (runs of one data pair by id when compared)."""

    id: str
    kind: str
    path: Path
    name: str
    date: str = ""
    model: str = ""
    data: str = ""
    n_members: int | None = None
    n_nonmembers: int | None = None
    attacks: list[str] = field(default_factory=list)
    best: tuple[str, Interval] | None = None
    blind: tuple[str, Interval] | None = None
    warnings: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    note: str = ""
    page: bool = False
    parent: str = ""
    data_key: str = ""

    @property
    def comparable(self) -> bool:
        """A run whose scores another run's can be compared with (``imprint compare``)."""
        return self.page


def find_entries(folders: Iterable[Path]) -> list[Entry]:
    """Every output under each of ``folders``: the folder itself when it is one, else its
    direct sub-folders (the runs/ layout); an audit's and a study's runs follow their parent.
    Newest first."""
    found: list[Entry] = []
    seen: set[Path] = set()
    ids: set[str] = set()
    for folder in folders:
        folder = Path(folder)
        if _recognised(folder) or _PARTIAL.match(folder.name):
            candidates = [folder]
        else:
            try:
                candidates = sorted(p for p in folder.iterdir() if p.is_dir() or _dangling(p))
            except OSError as err:
                found.append(_odd(folder, folder.name, f"cannot be listed ({_why(err)})", ids))
                continue
        for path in candidates:
            if path.name == LATEST and path.is_symlink():
                continue  # runs/latest: an alias of the newest run, listed under its own name
            if _dangling(path):  # listed, not skipped: the run it named was moved or deleted
                note = f"a link to {path.readlink()}, which is missing or loops"
                found.append(_odd(path, path.name, note, ids))
                continue
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            found.extend(_entries_of(path, _label(path, folder), ids))
    tops = sorted((e for e in found if not e.parent), key=lambda e: e.date, reverse=True)
    ordered = []
    for top in tops:
        ordered.append(top)
        ordered.extend(e for e in found if e.parent == top.id)
    return ordered


def _dangling(path: Path) -> bool:
    """A symbolic link whose target is missing or a loop (is_dir says False for both)."""
    try:
        return path.is_symlink() and not path.exists()
    except OSError:  # a loop, on Pythons whose exists() raises for one
        return True


def _label(path: Path, root: Path) -> str:
    return path.name if path != root else path.resolve().name


def _recognised(folder: Path) -> bool:
    try:
        return output_kind(folder) is not None
    except OSError:
        return False


def _new_id(name: str, ids: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "folder"
    key, n = base, 1
    while key in ids:
        n += 1
        key = f"{base}-{n}"
    ids.add(key)
    return key


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _odd(path: Path, name: str, note: str, ids: set[str], parent: str = "") -> Entry:
    return Entry(_new_id(name, ids), "folder", path, name, date=_mtime(path), note=note,
                 parent=parent)  # fmt: skip


def _mtime(path: Path) -> str:
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return ""
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


def _entries_of(path: Path, name: str, ids: set[str]) -> list[Entry]:
    """The entries of one folder (an audit or a study brings its runs after it)."""
    if (match := _PARTIAL.match(path.name)) is not None:
        why = ("half-written: a run still writing, or one stopped before it finished (imprint "
               "renames it into place when done)")  # fmt: skip
        return [_odd(path, match["name"], why, ids)]
    try:
        kind = output_kind(path)
    except OSError as err:
        return [_odd(path, name, f"cannot be read ({_why(err)})", ids)]
    if kind is not None and (newer := _newer_marker(path)):  # as imprint's loaders refuse it
        return [Entry(_new_id(name, ids), kind, path, name, date=_mtime(path), note=newer)]
    if kind == "run" or (kind is None and (path / "metrics.json").exists()):
        return [_run(path, name, ids)]
    if kind == "game":
        return [_game(path, name, ids)]
    if kind == "audit":
        return _audit(path, name, ids)
    if kind == "study":
        return _study(path, name, ids)
    if kind is not None:
        return [_odd(path, name, f"{kind} output: nothing to browse here", ids)]
    return [_odd(path, name, "not an imprint output (no run, game, audit or study files)", ids)]


def _newer_marker(path: Path) -> str:
    """Why the folder's marker cannot be read by this imprint (a newer or malformed
    ``format_version``), or ''; an unreadable marker is output_kind's to judge."""
    from imprint.formats import check_format

    try:
        data = json.loads((path / MARKER).read_text(encoding="utf-8"))
        check_format(data, str(path / MARKER))
    except DataError as err:
        return str(err)
    except (OSError, ValueError):
        pass
    return ""


def _run(path: Path, name: str, ids: set[str], parent: str = "") -> Entry:
    """A run folder: its manifest, metrics.json (read_metrics) and scores."""
    from imprint.evaluation.results import read_metrics
    from imprint.run.folder import read_json

    entry = Entry(_new_id(name, ids), "run", path, name, date=_mtime(path / "manifest.json"),
                  parent=parent)  # fmt: skip
    try:  # read_json refuses a newer format_version, saying which imprint reads it
        manifest = read_json(path / "manifest.json", "a run's manifest.json")
        config = manifest["config"]
        entry.model, entry.data = str(config["model"]), str(config["data"])
        entry.data_key = str(manifest.get("data", {}).get("fingerprint") or entry.data)
    except DataError as err:
        entry.note = f"cannot be read: {err}"  # err names the file: manifest or marker
        return entry
    except (KeyError, TypeError, AttributeError) as err:
        entry.note = f"manifest.json lacks the run's config ({type(err).__name__}: {err})"
        return entry
    try:
        metrics = read_metrics(path)
    except (DataError, OSError) as err:
        entry.note = f"metrics.json cannot be read: {err}"
        return entry
    entry.page = (path / "scores.parquet").is_file()
    if not entry.page:
        entry.note = "no scores.parquet: the per-text table cannot be shown"
    if metrics.documents is not None:
        entry.kind = "document run"
    entry.attacks = list(metrics.attacks)
    if metrics.attacks:
        any_one = next(iter(metrics.attacks.values()))
        entry.n_members, entry.n_nonmembers = any_one.n_members, any_one.n_nonmembers
    scored = [(a, m.auc) for a, m in metrics.attacks.items() if _finite(m.auc.estimate)]
    if scored:
        entry.best = max(scored, key=lambda item: item[1].estimate)
    entry.warnings = [w.message for w in metrics.warnings]
    verdict = metrics.verdict()
    if verdict is not None:
        entry.blind = (verdict.classifier, verdict.interval)
        entry.verdicts.append(f"blind baseline: {verdict.headline}")
    if entry.best is not None and entry.best[0] in metrics.text_comparisons:
        compared = metrics.text_comparisons[entry.best[0]]
        word = "beats the text" if compared.beats_text else "not shown to beat the text"
        entry.verdicts.append(f"{entry.best[0]} {word}")
    if metrics.documents is not None:
        state = metrics.documents.dataset.get("verdict", {}).get("state")
        if state:
            entry.verdicts.append(f"dataset inference: {state}")
    return entry


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _game(path: Path, name: str, ids: set[str]) -> Entry:
    from imprint.game.build import manifest_problem, read_manifest

    entry = Entry(_new_id(name, ids), "game", path, name, date=_mtime(path / "game.json"))
    manifest = read_manifest(path)
    if manifest is None:
        entry.note = f"not a complete game: {manifest_problem(path) or 'unreadable'}"
        return entry
    entry.model = str(manifest.get("base_model", {}).get("spec", ""))
    entry.data = str(manifest.get("pool", {}).get("source", ""))
    groups = manifest.get("groups", {})
    entry.n_members = sum(int(g.get("member", 0)) for g in groups.values())
    entry.n_nonmembers = sum(int(g.get("nonmember", 0)) for g in groups.values())
    config = manifest.get("config", {})
    entry.verdicts.append(
        f"privacy game: {config.get('method', '?')} fine-tune, {config.get('epochs', '?')} "
        f"epoch(s), {len(groups)} group(s); score it with imprint run --model game:{path}"
    )
    return entry


def _audit(path: Path, name: str, ids: set[str]) -> list[Entry]:
    entry = Entry(_new_id(name, ids), "audit", path, name, date=_mtime(path / "audit.json"))
    from imprint.run.folder import read_json

    try:
        record: dict[str, Any] = read_json(path / "audit.json", "an audit's audit.json")
        entry.model = str(record["model"])
        entry.n_members = int(record["canary_members"])
        entry.n_nonmembers = int(record["canaries"]) - entry.n_members
        entry.attacks = list(record.get("selection", {}).get("attacks", [record["attack"]]))
        claim = record.get("dp_claimed")
        claimed = f"; DP claimed epsilon {claim['epsilon']:g}" if claim else "; no DP claimed"
        entry.verdicts.append(
            f"epsilon >= {record['epsilon_lower_bound']:.3f} with "
            f"{record['confidence']:.0%} confidence ({record['attack']}){claimed}"
        )
        entry.warnings = [str(n) for n in record.get("notes", [])]
    except DataError as err:
        entry.note = f"audit.json cannot be read: {err}"
    except (KeyError, TypeError, ValueError) as err:
        entry.note = f"audit.json lacks a figure ({type(err).__name__}: {err})"
    found = [entry]
    if (path / "run").is_dir():
        run = _run(path / "run", f"{name}/run", ids, parent=entry.id)
        entry.data = run.data
        found.append(run)
    return found


def _study(path: Path, name: str, ids: set[str]) -> list[Entry]:
    """A study folder: its cells (read as :class:`CellRecord`) and each run it made."""
    from imprint.study.cells import CellStore

    entry = Entry(_new_id(name, ids), "study", path, name, date=_study_date(path))
    store = CellStore(path / "cells")
    cells = [store.get(p.stem) for p in sorted((path / "cells").glob("*.json"))]
    records = [c for c in cells if c is not None]
    if len(records) < len(cells):
        entry.note = f"{len(cells) - len(records)} cell file(s) unreadable or of an older format"
    entry.model = ", ".join(sorted({r.model for r in records if r.model}))
    entry.data = ", ".join(sorted({r.benchmark for r in records}))
    entry.attacks = sorted({r.row for r in records if r.model})
    scored = [
        (f"{r.benchmark}: {column}", m.auc)
        for r in records
        if r.model
        for column, m in r.columns.items()
        if _finite(m.auc.estimate)
    ]
    if scored:
        entry.best = max(scored, key=lambda item: item[1].estimate)
    entry.verdicts.append(f"{len(records)} cell(s); the study's tables: tables.html")
    found = [entry]
    runs = path / "runs"
    for run in sorted(runs.iterdir()) if runs.is_dir() else []:
        if run.is_dir():
            found.append(_run(run, f"{name}/runs/{run.name}", ids, parent=entry.id))
    return found


def _study_date(path: Path) -> str:
    """When the study last ran (its last invocation), else its folder's time."""
    try:
        lines = (path / "invocations.jsonl").read_text(encoding="utf-8").splitlines()
        stamp = json.loads(lines[-1])["time"]
        return str(stamp).replace("T", " ")[:16]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return _mtime(path)
