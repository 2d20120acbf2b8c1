"""MkDocs hook: the reference pages are written from the code at build time, so they never drift.

A page holds a marker line (``<!-- imprint:commands -->``, ``<!-- imprint:attacks -->``,
``<!-- imprint:datasets -->``); :func:`on_page_markdown` replaces it with Markdown generated from
the CLI's click commands (what ``--help`` prints), the attack registry (names, papers, access,
parameters, stated deviations) and the benchmark catalog. ``tests/test_docs_site.py`` builds the
site with ``mkdocs build --strict`` and checks the generated pages against the code.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "attacks_markdown",
    "backends_markdown",
    "commands_markdown",
    "datasets_markdown",
    "schemas_markdown",
    "on_page_markdown",
    "warning_kinds_markdown",
]


def _inline(text: Any) -> str:
    """Text on one line, HTML escaped (a help text's ``<N>`` is not a tag)."""
    return html.escape(" ".join(str(text).split()), quote=False)


def _cell(text: Any) -> str:
    """One Markdown table cell: no pipe may end the cell early."""
    return _inline(text).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that may itself hold backticks or pipes (table-safe)."""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


# -- commands ---------------------------------------------------------------------------------


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of a click group, depth first, in the order the CLI lists them."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from _walk(sub, (*path, name))


def _kind(param: Any) -> str:
    """The type --help shows (``<int>``, ``<list[str]>``), or ``flag``."""
    if getattr(param, "is_flag", False):
        return "flag"
    try:
        return str(param.display_type()).strip("<>")
    except Exception:  # a click version without typer's type display
        return ""


def _command_section(path: tuple[str, ...], command: Any) -> list[str]:
    name = " ".join(path)
    out = [f"## `{name}`", ""]
    help_text = (command.help or "").strip()
    if help_text:
        out += [_inline(help_text), ""]
    ctx = command.context_class(command, info_name=name)
    usage = command.get_usage(ctx).strip().removeprefix("Usage:").strip()
    out += ["```text", usage, "```", ""]
    subs = getattr(command, "commands", {})
    if subs:
        out += ["| command | what it does |", "|---|---|"]
        for sub_name, sub in subs.items():
            out.append(f"| `{name} {sub_name}` | {_cell(sub.get_short_help_str(200))} |")
        return [*out, ""]
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        record = param.get_help_record(ctx)  # what --help prints: (names, help [default: ...])
        names, help_line = record if record else (str(param.name), "")
        if param.param_type_name == "argument":
            names = str(param.name).upper()
            help_line = getattr(param, "help", None) or help_line
        names, _, metavar = names.partition(" <")  # "--out <path>": the name, then its type
        kind = _kind(param) or metavar.rstrip(">")
        split = re.split(r",| / ", names)  # "-o, --out" and "--shift / --no-shift"
        shown = ", ".join(_code(n.strip()) for n in split if n.strip())
        rows.append((shown, kind, help_line))
    if rows:
        out += ["| option | type | what it does |", "|---|---|---|"]
        out += [f"| {n} | {_cell(k)} | {_cell(h)} |" for n, k, h in rows]
    return [*out, ""]


def _global_options(root: Any) -> list[str]:
    """The options of ``imprint`` itself (given before the command: ``imprint --quiet run``)."""
    ctx = root.context_class(root, info_name="imprint")
    rows = []
    for param in root.params:
        record = None if getattr(param, "hidden", False) else param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        names, _, metavar = record[0].partition(" <")
        shown = ", ".join(_code(n.strip()) for n in re.split(r",| / ", names) if n.strip())
        rows.append((shown, _kind(param) or metavar.rstrip(">"), record[1]))
    if not rows:
        return []
    out = ["## Global options", "", "Given before the command, e.g. `imprint --quiet run ...`.", "",
           "| option | type | what it does |", "|---|---|---|"]  # fmt: skip
    return [*out, *(f"| {n} | {_cell(k)} | {_cell(h)} |" for n, k, h in rows), ""]


def commands_markdown() -> str:
    """A section per command and subcommand of ``imprint``, from its click definition."""
    import typer

    from imprint.cli import app

    root = typer.main.get_command(app)
    lines = _global_options(root)
    for path, command in _walk(root, ("imprint",)):
        if len(path) > 1:
            lines += _command_section(path, command)
    return "\n".join(lines)


# -- attacks ----------------------------------------------------------------------------------


def _parameters(cls: type) -> str:
    if not dataclasses.is_dataclass(cls):
        return ""
    shown = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_") or f.metadata.get("prepared"):
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "required"
        shown.append(f"`{f.name}={default}`")
    return ", ".join(shown)


def attacks_markdown() -> str:
    """The attack table and one entry per registered attack, from the registry."""
    from imprint.attacks.registry import ATTACKS, attack_entries

    entries = attack_entries()
    table = ["| name | access | paper | what it scores |", "|---|---|---|---|"]
    details: list[str] = []
    for entry in entries:
        if entry.broken is not None:
            table.append(f"| `{entry.name}` | broken | | {_cell(entry.broken)} |")
            continue
        cls = ATTACKS.get(entry.name)
        access = str(getattr(cls.access, "value", cls.access))
        table.append(
            f"| [`{entry.name}`](#{entry.name}) | {_cell(access)} | {_cell(cls.paper)} | "
            f"{_cell(cls.summary)} |"
        )
        details += [f"### {entry.name} {{ #{entry.name} }}", "", _inline(cls.summary), ""]
        details += [f"- **paper:** {_inline(cls.paper)}", f"- **access:** {access}"]
        if entry.origin != "built-in":
            details.append(f"- **from:** {_inline(entry.origin)}")
        served = "no (needs full-distribution statistics)" if cls.vocab_stats else "yes"
        if access == "gray-box":
            details.append(f"- **served by a token-logprob backend (vLLM):** {served}")
        params = _parameters(cls)
        if params:
            details.append(f"- **parameters** (`--param {entry.name}.NAME=VALUE`): {params}")
        if cls.deviations:
            details += ["- **differs from the paper or the authors' code:**", ""]
            details += [f"    - {_inline(d)}" for d in cls.deviations]
        details.append("")
    return "\n".join([*table, "", "## Every attack", "", *details])


# -- benchmarks -------------------------------------------------------------------------------


def datasets_markdown() -> str:
    """The benchmark catalog: what ``imprint datasets`` lists, one entry per named benchmark."""
    from imprint.data.catalog import iter_benchmarks

    table = ["| `--data` name | size | licence | what |", "|---|---|---|---|"]
    details: list[str] = []
    for b in iter_benchmarks():
        anchor = re.sub(r"[^a-z0-9]+", "-", b.name.lower()).strip("-")
        table.append(
            f"| [`{b.name}`](#{anchor}) | {_cell(b.size)} | {_cell(b.licence)} | "
            f"{_cell(b.description)} |"
        )
        details += [f"### {b.name} {{ #{anchor} }}", "", _inline(b.description), ""]
        details += [
            f"- **provenance:** {_inline(b.provenance)}",
            f"- **fields:** {_inline(b.fields)}",
        ]
        if b.hub_repo:
            details.append(f"- **hub repository:** `{b.hub_repo}`")
        files = ", ".join(f"`{f.local}`" for f in b.files if getattr(f, "local", None))
        if files:
            details.append(f"- **local files** (under `$IMPRINT_DATA_DIR`): {files}")
        if b.build_hint:
            details.append(f"- **built here by:** `{b.build_hint}`")
        if b.layout_note:
            details.append(f"- **layout:** {_inline(b.layout_note)}")
        details += [f"- **caveat:** {_inline(c)}" for c in b.caveats]
        details.append("")
    return "\n".join([*table, "", "## Every benchmark", "", *details])


def backends_markdown() -> str:
    """The backend providers (what ``imprint backends`` lists): capabilities, options, an
    example spec; then the model schemes and the offline aliases."""
    from imprint.backends.models import ALIAS_NOTES, ALIASES, model_schemes
    from imprint.backends.registry import BACKENDS

    providers = BACKENDS.load_all()
    rows = ["| scheme | can do | options (`--model-arg KEY=VALUE`) | what | e.g. |"]
    rows.append("|---|---|---|---|---|")
    for entry in BACKENDS.entries():
        if entry.broken is not None:
            rows.append(f"| `{entry.name}:` | broken | | {_cell(entry.broken)} | |")
            continue
        provider = providers[entry.name]
        caps = ", ".join(sorted(str(c) for c in provider.capabilities))
        options = ", ".join(f"`{f.name}`" for f in dataclasses.fields(provider.options))
        rows.append(
            f"| `{entry.name}:` | {_cell(caps)} | {options} | {_cell(provider.summary)} | "
            f"{_code(str(provider.example))} |"
        )
    rows += ["", "| spec | what |", "|---|---|"]
    rows += [f"| `{s}:` | served by hf (resolves to a model folder) |" for s in model_schemes()]
    for alias in sorted(ALIASES):
        note = ALIAS_NOTES.get(alias, "a GGUF file from an offline package")
        rows.append(f"| `{alias}` | alias, served by hf: {_cell(note)} |")
    return "\n".join(rows)


def warning_kinds_markdown() -> str:
    """The kinds a run's warnings carry (``metrics.json`` ``warning_kinds``), with the comment
    each has where it is declared."""
    import inspect

    from imprint.evaluation import results

    source = inspect.getsource(results)
    said = dict(re.findall(r'^\s*"(\w+)",\s*#\s*(.+)$', source, re.M))
    rows = ["| kind | when |", "|---|---|"]
    rows += [f"| `{kind}` | {_cell(said.get(kind, ''))} |" for kind in results.WARNING_KINDS]
    return "\n".join(rows)


def duci_deviations_markdown() -> str:
    """DUCI's stated differences from Privacy Meter, one bullet each."""
    from imprint.documents.duci import DEVIATIONS

    return "\n".join(f"- {_inline(d)}" for d in DEVIATIONS)


def schemas_markdown() -> str:
    """Each output's JSON Schema as shipped in the package (imprint/schemas, imprint.formats)."""
    import json

    from imprint.formats import FORMAT_VERSION, SCHEMAS, schema

    parts = [f"Written now: `format_version` **{FORMAT_VERSION}**.\n"]
    for name, file in SCHEMAS.items():
        text = json.dumps(schema(name), indent=2)
        where = f"`imprint/schemas/{name}.schema.json`"
        parts.append(f"### {_inline(file)}\n\n{where}:\n\n```json\n{text}\n```\n")
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "commands": commands_markdown,
    "attacks": attacks_markdown,
    "datasets": datasets_markdown,
    "warning-kinds": warning_kinds_markdown,
    "backends": backends_markdown,
    "duci-deviations": duci_deviations_markdown,
    "schemas": schemas_markdown,
}
_MARKER = re.compile(r"^<!-- imprint:([\w-]+) -->$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: replace each marker line with its generated Markdown."""

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown docs marker imprint:{name}; known: {sorted(GENERATORS)}")
        return GENERATORS[name]()

    return _MARKER.sub(expand, markdown)
