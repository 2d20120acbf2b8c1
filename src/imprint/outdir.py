"""The run folder's location: checked before any work, written whole or not at all.

A run is written into a hidden sibling folder (``.NAME.partial-*``) and renamed into place at the
end, so a crash leaves no half-written run, and two runs aimed at one folder never mix their
files: the one that finishes first is the folder, whole, and the other stops with an error. An
existing folder is replaced only when ``overwrite`` says so (and, for an imprint output, only
when it is an earlier output of the same kind). Without ``--out`` a run gets a new timestamped
folder (:func:`default_run_dir`) and ``runs/latest`` is a link to it (:func:`link_latest`).

One rule for every command's output folder (:func:`check_kind`): each writes a marker naming
its kind (:func:`mark_output`), and ``--overwrite`` replaces a folder imprint did not write or an
earlier output of the same kind, never an imprint output of another kind (a run's folder is not
a temporal benchmark's, nor a study's). :func:`check_writable` tries to create a folder where the
output will be made, before any work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError

_SWAP_TRIES = 100  # each failed try means another run renamed a folder at that instant


# the files every imprint run folder holds besides manifest.json (see imprint.report.writer)
RUN_FILES = ("metrics.json", "scores.parquet")

#: the marker file an output folder holds, {"format_version": "1.0", "kind": KIND}
#: (marker.schema.json); temporal benchmarks and games are known by their own manifests
#: (manifest.json's "kind", game.json) instead
MARKER = ".imprint-output.json"
LOCK = ".imprint-lock"  # see folder_lock
#: output kind -> what it is called in errors
KINDS = {
    "run": "an imprint run folder",
    "study": "an imprint experiment (study) folder",
    "temporal": "a build-temporal benchmark folder",
    "perturb": "an imprint perturb folder",
    "overlap": "an n-gram index folder",
    "game": "a privacy game folder",
    "canaries": "an imprint canaries folder",  # holds the secret mask: never replaced
    "audit": "an imprint audit folder",
}


def mark_output(folder: Path, kind: str) -> None:
    """Record in ``folder`` (made if missing) that it is an output of ``kind``."""
    assert kind in KINDS, kind
    folder.mkdir(parents=True, exist_ok=True)
    from imprint.formats import FORMAT_VERSION  # marker.schema.json

    record = {"format_version": FORMAT_VERSION, "kind": kind}
    (folder / MARKER).write_text(json.dumps(record) + "\n", encoding="utf-8")


def output_kind(folder: Path) -> str | None:
    """The kind of imprint output ``folder`` holds (its marker; for folders written before the
    marker, the signature of a run, a temporal benchmark, a game or a study), or None."""
    try:
        marked = json.loads((folder / MARKER).read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        marked = None
    if marked == "run" or is_run_folder(folder):  # a run is replaced without --overwrite:
        return "run" if is_run_folder(folder) else None  # its files must be there, not a marker
    if marked in KINDS:
        return str(marked)
    if (folder / "game.json").is_file():
        return "game"
    if (earlier := _earlier_audit_kind(folder)) is not None:
        return earlier
    if (folder / "cells").is_dir() and any(
        (folder / name).exists() for name in ("invocations.jsonl", "runs", "cache.sqlite")
    ):
        return "study"  # a study folder written before the marker
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(manifest, dict) and manifest.get("kind") == "imprint temporal benchmark":
        return "temporal"
    return None


def _earlier_audit_kind(folder: Path) -> str | None:
    """Canaries and audit folders written before the marker, by their own JSON files."""
    for name, key, kind in (("mask.json", "imprint_canary_mask", "canaries"),
                            ("audit.json", "imprint_audit", "audit")):  # fmt: skip
        try:
            if key in json.loads((folder / name).read_text(encoding="utf-8")):
                return kind
        except (OSError, ValueError, TypeError):
            continue
    return None


def check_kind(path: Path, kind: str, *, overwrite: bool, option: str = "--out") -> bool:
    """The shared rule for an existing output folder: refuse an imprint output of another kind
    (even with ``overwrite``: it replaces only an earlier output of the same kind), and a
    non-empty folder imprint did not write unless ``overwrite``. Returns True when ``path``
    is a non-empty folder that is not an earlier ``kind`` output (the caller may clear it)."""
    if not path.is_dir() or all(p.name == LOCK for p in path.iterdir()):
        return False  # empty, or only a lock (a study's first invocation, before its marker)
    found = output_kind(path)
    if found == kind:
        return False
    if found is not None:
        raise ConfigError(
            f"{option} {path} is {KINDS[found]}; this command writes {KINDS[kind]}, and "
            "--overwrite replaces only an earlier output of the same kind. Pass a new folder"
        )
    if not overwrite:
        names = sorted(p.name for p in path.iterdir())
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ConfigError(
            f"{option} {path} is a folder that imprint did not write (not {KINDS[kind]}) and "
            f"holds {len(names)} entries ({shown}). Pass a new folder, or add --overwrite to "
            "delete its contents and write there"
        )
    return True


def check_writable(path: Path, option: str = "--out") -> None:
    """Refuse ``path`` when no folder can be made where it goes: the nearest existing folder at
    or above its parent must be a folder in which a (hidden, at once removed) folder can really
    be created; permission bits alone do not tell (root passes them under /sys and /proc)."""
    ancestor = Path(os.path.abspath(path)).parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{option} {path}: {ancestor} is a file, so nothing can be made under it")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".imprint-probe-", dir=ancestor))
    except OSError as err:
        raise ConfigError(
            f"{option} {path}: cannot create a folder in {ancestor} ({err.strerror or err}); "
            "choose a writable place"
        ) from None


def is_run_folder(path: Path) -> bool:
    """True when ``path`` holds what imprint writes into a run folder: a ``manifest.json`` whose
    ``config`` and ``versions`` are objects (``versions`` naming the Python version), beside
    ``metrics.json`` and ``scores.parquet``. Only such a folder is replaced without --overwrite,
    so a look-alike manifest alone must not make a user's folder deletable."""
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict):
        return False
    config, versions = manifest.get("config"), manifest.get("versions")
    if not isinstance(config, dict) or not isinstance(versions, dict) or "python" not in versions:
        return False
    return all((path / name).is_file() for name in RUN_FILES)


def check_outside(out: Path, path: Path, flag: str) -> None:
    """Refuse a file the run keeps (``flag``'s path, e.g. the signal cache) inside ``out``.

    The run replaces ``out`` whole, so the file would be deleted with it; and made there before
    the run ends, it turns ``out`` into a folder that is not a run, which the run then refuses.
    Raises :class:`ConfigError`; creates nothing.
    """
    real_out = Path(os.path.realpath(out))
    real = Path(os.path.realpath(path))
    if real == real_out or real_out in real.parents:
        raise ConfigError(
            f"{flag} {path} lies inside --out {out}; the run replaces its --out folder whole, so "
            f"the file would be lost with it. Put it outside the run folder, e.g. "
            f"{flag} {out.parent / path.name}"
        )


def check_inputs_outside(out: Path, inputs: Iterable[tuple[str, str | Path]], *, why: str) -> None:
    """Refuse an input the command reads (``(what, spec)`` pairs: a grid file, ``--data``, a
    model folder; a spec naming no existing local path, e.g. ``wikimia:32``, is skipped) that
    lies inside ``out``, a folder about to be replaced or emptied (``why`` says which)."""
    real_out = Path(os.path.realpath(out))
    for what, spec in inputs:
        text = str(spec)
        for prefix in ("gguf:", "game:"):  # the local-path schemes of imprint.backends
            text = text.removeprefix(prefix)
        if not text or not Path(text).exists():
            continue
        real = Path(os.path.realpath(text))
        if real == real_out or real_out in real.parents:
            raise ConfigError(
                f"{what} {text} lies inside --out {out}; {why}, so it would be deleted. Pass "
                "an --out folder that holds none of the inputs"
            )


#: config fields that do not change what a run computes or reports (the folder itself, the
#: permission to replace it, the progress display): two runs differing only there are the same
_NOT_CONFIG = ("out", "overwrite", "progress")


def config_differences(out: Path, config: dict[str, Any]) -> list[str] | None:
    """How the configuration of the run in ``out`` (its manifest's ``config``) differs from
    ``config`` (a new run's, as JSON), one ``"FIELD: A there, B here"`` per field; [] when they
    are the same, None when ``out`` holds no run."""
    if not is_run_folder(out):
        return None
    earlier = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["config"]
    return describe_differences(earlier, config, ignore=_NOT_CONFIG)


def describe_differences(
    earlier: dict[str, Any], config: dict[str, Any], *, ignore: Iterable[str] = ()
) -> list[str]:
    """``"FIELD: A there, B here"`` for each field of an earlier output's recorded
    configuration that differs from ``config`` (JSON values; tuples compare as lists)."""
    here = json.loads(json.dumps(config))
    return [
        f"{key}: {_short(earlier.get(key))} there, {_short(here.get(key))} here"
        for key in sorted(set(earlier) | set(here))
        if key not in ignore and earlier.get(key) != here.get(key)
    ]


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_out_dir(
    out: Path, *, overwrite: bool = False, config: dict[str, Any] | None = None
) -> Path:
    """Refuse an output location that cannot or must not become a run folder; return it absolute.

    Raises :class:`ConfigError` when ``out`` is a symbolic link or a file, lies under a file, is
    not writable, is the current folder or one above it, is an imprint output of another kind
    (even with ``overwrite``), is a non-empty folder imprint did not write (unless
    ``overwrite``), or holds an earlier run (unless ``overwrite``, or ``config``, the new run's
    configuration as JSON, equals that run's: the same run again reuses its folder).
    Creates nothing (a probe folder is made and removed).
    """
    out = Path(os.path.abspath(out))
    if out.is_symlink():  # the finished run is renamed into place: it would replace the link
        raise ConfigError(
            f"--out {out} is a symbolic link (to {os.readlink(out)}); a run replaces its --out "
            "whole, so it would replace the link, not the folder it points to. Pass that folder "
            f"itself (--out {out.resolve()}) or a new one"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"--out {out} is a file, not a folder; pass a folder path for the run (a new one, "
            "or an earlier imprint run to replace)"
        )
    cwd = Path.cwd()
    if out == out.parent or out == cwd or out in cwd.parents:
        raise ConfigError(
            f"--out {out} is the current folder or one above it; the run replaces its --out "
            "folder whole, so pass a new folder, e.g. --out runs/mine"
        )
    check_kind(out, "run", overwrite=overwrite)  # a run replaces its folder whole
    if not overwrite and is_run_folder(out):  # never lose an earlier run silently
        differences = config_differences(out, config) if config is not None else None
        if differences != []:  # the same configuration again reuses the folder
            raise ConfigError(_earlier_run(out, differences))
    check_writable(out)  # the run is staged in a sibling folder: it must be creatable there
    return out


def _earlier_run(out: Path, differences: list[str] | None) -> str:
    """The refusal of an --out that holds a run of another (or an unknown) configuration."""
    which = "an earlier imprint run"
    if differences:
        more = "; ..." if len(differences) > 3 else ""
        which += f" of another configuration ({'; '.join(differences[:3])}{more})"
    return (
        f"--out {out} already holds {which}; pass a new folder (or leave --out out: each run "
        "gets its own runs/<time>-<model>-<data>): every model pass the earlier run made is "
        "answered by the store there, so only what differs is computed. Or add --overwrite to "
        "replace it"
    )


RUNS = Path("runs")  # where runs without --out go, relative to the current folder
LATEST = "latest"  # the link in RUNS to the newest of them


def _slug(spec: str) -> str:
    """A short, file-name-safe name of a model or data spec: its last path part, scheme dropped
    (``hf:org/name`` -> ``name``, ``wikimia:32`` -> ``wikimia-32``, ``/x/y.jsonl`` -> ``y``)."""
    import re

    text = spec.rstrip("/")
    for scheme in ("gguf:", "game:", "hf:", "vllm:", "openai:"):
        text = text.removeprefix(scheme)
    name = Path(text).stem if "/" in text or Path(text).suffix in (".jsonl", ".csv",
        ".parquet", ".json", ".txt", ".gguf") else text  # fmt: skip
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:40] or "x"


def default_run_dir(model: str, data: str, *, root: Path = RUNS, now: float | None = None) -> Path:
    """A new folder for a run given no ``--out``: ``runs/YYYYmmdd-HHMMSS-<model>-<data>`` (a
    ``-2``, ``-3``, ... suffix when a run of the same second holds that name). The empty folder
    is made here, atomically, so two runs started in the same second never pick one name; the
    finished run is renamed onto it (an empty folder) when it publishes."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = root / f"{stamp}-{_slug(model)}-{_slug(data)}"
    path, n = base, 1
    try:
        root.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                path.mkdir()  # fails if any run (or anything else) holds the name
                return path
            except FileExistsError:
                if not root.is_dir():
                    raise
                n += 1
                path = base.with_name(f"{base.name}-{n}")
    except OSError as err:  # a read-only working folder, or a file named runs
        raise ConfigError(
            f"cannot make the run folder {path} ({err.strerror or err}): run from a writable "
            "folder or pass --out DIR"
        ) from None


def release_run_dir(path: Path) -> None:
    """Remove a folder :func:`default_run_dir` reserved if the run left it empty (it failed)."""
    with contextlib.suppress(OSError):
        path.rmdir()  # only an empty folder: a published run is never removed


def link_latest(out: Path) -> Path | None:
    """Point ``<out's parent>/latest`` at ``out`` (replacing an earlier link, atomically); None,
    and nothing touched, when ``latest`` there is a real file or folder (an earlier release
    wrote runs there)."""
    link = out.parent / LATEST
    if link.exists() and not link.is_symlink():
        return None
    temporary = out.parent / f".{LATEST}.{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(out.name, temporary)  # relative: the runs folder can move whole
    os.replace(temporary, link)
    return link


def staging_dir(out: Path) -> Path:
    """A new, empty hidden sibling of ``out`` to write the run into (same file system, so the
    final rename is atomic)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = out.parent / f".{out.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staged.mkdir()
    return staged


def publish(
    staged: Path, out: Path, *, overwrite: bool = False, config: dict[str, Any] | None = None
) -> None:
    """Rename the finished ``staged`` folder to ``out``; with ``overwrite``, or when it holds a
    run of the same ``config``, an earlier run there is moved aside first, and otherwise a run
    that took ``out`` meanwhile is kept and this one refused (:func:`check_out_dir`).

    Concurrent publishers race only on renames: each try either lands its whole folder or
    finds ``out`` taken and moves that aside again, so ``out`` is always one run's folder.
    """
    for _ in range(_SWAP_TRIES):
        try:
            os.rename(staged, out)
            return
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
        if not _still_replaceable(out, overwrite, config):
            continue  # another publisher moved it aside while we looked: try again
        aside = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.rename(out, aside)
        except FileNotFoundError:
            continue  # another run moved it first
        _remove(aside)
    raise ConfigError(f"--out {out}: could not move the finished run into place; retry")


def _still_replaceable(out: Path, overwrite: bool, config: dict[str, Any] | None) -> bool:
    """Whether ``out`` may be moved aside now; False when it vanished under a concurrent
    publisher (look again). A refusal is raised only when it repeats: one check may half-see a
    concurrent rename (the folder gone between two of its looks)."""
    refusal: ConfigError | None = None
    for _ in range(3):
        try:
            check_out_dir(out, overwrite=overwrite, config=config)
            return True
        except FileNotFoundError:
            return False
        except ConfigError as err:
            if not out.exists():
                return False
            refusal = err
            time.sleep(0.01)
    assert refusal is not None
    raise refusal


def discard(staged: Path) -> None:
    """Remove an unfinished staging folder (the run failed before publishing)."""
    _remove(staged)


def _remove(path: Path) -> None:
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def claim_folder(out: Path, kind: str, *, overwrite: bool = False, dry: bool = False) -> Path:
    """Check ``out`` for an output written in place over many steps (a study): by
    :func:`check_kind`, then that a folder can be made there. Unless ``dry``, empty a folder
    imprint did not write (``overwrite`` said so) and mark ``out`` as ``kind``. Returns it
    absolute."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder path (a new one is made)")
    clear = check_kind(out, kind, overwrite=overwrite)
    check_writable(out)
    if clear and (out == out.parent or out == Path.cwd() or out in Path.cwd().parents):
        raise ConfigError(
            f"--out {out} is the current folder or one above it; --overwrite would delete it "
            "whole. Pass a new folder"
        )
    if dry:
        return out
    if clear:
        for entry in out.iterdir():
            if entry.is_dir():
                _remove(entry)
            else:
                entry.unlink()
    mark_output(out, kind)
    return out


@contextmanager
def folder_lock(folder: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (``.imprint-lock`` in it) while the block runs; a
    second holder waits for the first (``on_wait`` is told who holds it) and then finds its
    work done, instead of computing it again beside it."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            if on_wait is not None:
                on_wait(holder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()
            yield
        finally:
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)
