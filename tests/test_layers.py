"""The pipeline's direction, checked on the code: every import (at module level or inside a
function) goes to a package at the same stage or an earlier one, and no modules import each other
in a circle. The stages are the README's architecture line.

For the direction, a string that names an imprint module (``"imprint.game.schemes:load_game_data"``,
``"imprint.documents.di_calibration"``) counts as an import of that module: a lazy registry entry
or an ``import_module`` call ties a package to a later stage as an import does. Entry points
declared in pyproject.toml are not read: they are the plugin mechanism, by which a later package
(the game) adds itself to an earlier one's registry without the earlier one naming it. Circles
are read from import statements only: a registry's lazy entry naming the module that registers
into it (``backends.registry`` -> ``backends.providers``) is that pattern, not a circle, and a
logger's or an entry-point group's name (``"imprint.backends"``) is no import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "imprint"

#: stage of each top-level package or module of imprint (README "Architecture")
STAGES = {
    **dict.fromkeys(("errors", "coerce", "strict_yaml", "registry", "outdir", "formats"), 0),
    "__init__": 0,  # its lazy names (imprint.load_run, ...) are imported by name, when used
    **dict.fromkeys(("data", "metrics", "training_manifest"), 1),
    "backends": 2,
    "executors": 3,
    "requests": 4,
    "signals": 5,
    "attacks": 6,
    **dict.fromkeys(("documents", "diagnostics", "scoring"), 7),
    **dict.fromkeys(("evaluation", "calibration"), 8),
    "report": 9,
    "run": 10,
    "game": 11,
    **dict.fromkeys(("study", "audit"), 12),
    **dict.fromkeys(("cli", "view", "__main__"), 13),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


#: a whole string that names an imprint module, optionally with ``:attr`` (a lazy reference)
_MODULE_STRING = re.compile(r"imprint(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")


def _named_module(text: str, modules: set[str]) -> str | None:
    """The imprint module a string names: the module of ``"imprint.x.y:attr"``, or the longest
    module prefix of ``"imprint.x.y"`` (``imprint.x`` when ``y`` is a name defined in it)."""
    if not _MODULE_STRING.fullmatch(text):
        return None
    dotted = text.partition(":")[0]
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None  # imprint's own name or an entry-point group ("imprint.benchmarks")


def _imports(path: Path, modules: set[str], *, strings: bool) -> set[str]:
    """Every imprint module ``path`` imports, wherever the import stands (``from pkg import
    sub`` imports the module ``pkg.sub``; ``pkg`` itself only for names that are not modules),
    and with ``strings`` every imprint module a string in it names (see the module docstring).
    The package's own ``__init__`` is the exception: its lazy table names the public API's
    modules, at any stage, imported only when a user asks for the name (``imprint.load_run``)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not strings or module == "imprint":
                continue
            if (named := _named_module(node.value.strip(), modules)) is not None:
                found.add(named)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            subs = {f"{base}.{a.name}" for a in node.names}
            found |= subs & modules
            if subs - modules:
                found.add(base)
    return {n for n in found if n == "imprint" or n.startswith("imprint.")}


def _graph(*, strings: bool = False) -> dict[str, set[str]]:
    """Module -> the imprint modules it imports (``strings``: and those its strings name)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    names = set(paths)
    return {
        m: {n for n in _imports(p, names, strings=strings) if n in paths and n != m}
        for m, p in paths.items()
    }


def _stage(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    assert top in STAGES, f"{module}: add its package to STAGES (and the README's line)"
    return STAGES[top]


def test_every_import_goes_to_an_earlier_stage():
    backwards = sorted(
        f"{m} -> {n}"
        for m, targets in _graph(strings=True).items()
        for n in targets
        if _stage(n) > _stage(m) and n != "imprint"
    )
    assert backwards == []


def test_no_import_circle():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == [], "\n".join(" <-> ".join(c) for c in circles)


def test_a_string_naming_a_module_counts_as_importing_it():
    modules = set(_graph())
    assert _named_module("imprint.game.start:legacy_rule", modules) == "imprint.game.start"
    assert _named_module("imprint.metrics.paired_calibration", modules) == (
        "imprint.metrics.paired_calibration"
    )
    assert _named_module("imprint.run.folder.load_run", modules) == "imprint.run.folder"
    assert _named_module("imprint.benchmarks", modules) is None  # an entry-point group
    assert _named_module("read it with imprint.game.schemes", modules) is None  # prose
