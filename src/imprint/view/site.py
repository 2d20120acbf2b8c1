"""Build ``imprint view``'s static pages: ``index.html`` (every entry), ``run/<id>/index.html``
(a run's report and its per-text table), ``study/<id>/tables.html`` (a study's tables) and
``compare/<a>__vs__<b>.html`` (two runs side by side, built when first asked for)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from imprint.errors import ConfigError, DataError
from imprint.metrics import Interval
from imprint.view.entries import Entry

__all__ = ["MARKER", "SEPARATOR", "build_site", "compare_page", "comparison_name"]

MARKER = ".imprint-view"  # in a built site: --build may write over an earlier one
SEPARATOR = "__vs__"  # compare/<a>__vs__<b>.html; entry ids never hold it (see _new_id)
ASSETS = ("view.css", "view.js")


def _environment() -> Any:
    import jinja2

    folder = resources.files("imprint.view") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["interval"] = _interval
    env.filters["short"] = _short
    env.filters["json_script"] = _json_script
    return env


def _interval(value: Interval | None) -> str:
    if value is None:
        return "-"
    return f"{value.estimate:.3f} [{value.low:.3f}, {value.high:.3f}]"


def _short(spec: str) -> str:
    """A model or data spec's last path part, its scheme kept (``game:/x/games/1a2b`` ->
    ``game:1a2b``: a demo's or game's run is not named by a bare hash); the full text is in the
    cell's title."""
    text = spec.rstrip("/")
    scheme = re.match(r"[a-z][a-z0-9_-]*:(?!//)", text)
    prefix = scheme.group(0) if scheme else ""
    rest = text[len(prefix) :]
    return prefix + (rest.rsplit("/", 1)[-1] if rest.count("/") > 1 else rest)


def _json_script(value: Any) -> str:
    """JSON safe inside <script type="application/json"> (no closing tag can appear)."""
    from markupsafe import Markup

    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def comparison_name(a: str, b: str) -> str:
    return f"{a}{SEPARATOR}{b}.html"


def check_site_folder(out: Path) -> None:
    """Refuse a --build folder that holds anything but an earlier site of ``imprint view``."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--build {out} is a file; pass a folder for the site")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError(
            f"--build {out} is a folder imprint view did not write and is not empty; pass a "
            "new folder (an earlier site of imprint view is rewritten)"
        )


def build_site(
    entries: Sequence[Entry], out: Path, *, served: bool, pairs: Iterable[tuple[str, str]] = ()
) -> Path:
    """Write the site for ``entries`` into ``out`` (made if missing; an earlier site there is
    rewritten); ``pairs`` of run ids get their comparison page now (a served site builds the
    others when asked). Returns ``out / "index.html"``."""
    check_site_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("imprint view site\n", encoding="utf-8")
    for name in ("run", "study", "compare"):
        shutil.rmtree(out / name, ignore_errors=True)
    assets = out / "assets"
    assets.mkdir(exist_ok=True)
    for name in ASSETS:
        source = resources.files("imprint.view") / "assets" / name
        (assets / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    env = _environment()
    by_id = {e.id: e for e in entries}
    built = []
    for a, b in pairs:
        compare_page(by_id, a, b, out)
        built.append(comparison_name(a, b))
    for entry in entries:
        _entry_pages(env, entry, out)
    kinds = sorted({e.kind for e in entries})
    page = env.get_template("index.html").render(
        entries=entries, kinds=kinds, served=served, built=built, root="",
        title="imprint view", parents={e.id: e for e in entries},
    )  # fmt: skip
    (out / "index.html").write_text(page, encoding="utf-8")
    return out / "index.html"


def _entry_pages(env: Any, entry: Entry, out: Path) -> None:
    """A run's page (and its report), a study's tables; a run whose scores cannot be read gets
    a note in place of its table instead of stopping the build."""
    if entry.kind == "study" and (entry.path / "tables.html").is_file():
        folder = out / "study" / entry.id
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry.path / "tables.html", folder / "tables.html")
    if not entry.page:
        return
    from imprint.view.texts import text_table

    folder = out / "run" / entry.id
    folder.mkdir(parents=True, exist_ok=True)
    report = (entry.path / "report.html").is_file()
    if report:
        shutil.copyfile(entry.path / "report.html", folder / "report.html")
    try:
        table, problem = text_table(entry.path), ""
    except (DataError, OSError, ValueError, TypeError) as err:  # TypeError: a null label
        table, problem = {"attacks": [], "rows": [], "n": 0}, f"scores.parquet unreadable: {err}"
        entry.note = entry.note or problem
    page = env.get_template("run.html").render(
        entry=entry, table=table, problem=problem, report=report, root="../../",
        title=f"{entry.name} - imprint view",
    )  # fmt: skip
    (folder / "index.html").write_text(page, encoding="utf-8")


def compare_page(by_id: dict[str, Entry], a: str, b: str, out: Path) -> Path:
    """Write ``compare/<a>__vs__<b>.html``: the two runs' index rows side by side and the
    paired comparison ``imprint compare A B`` prints (thresholds at A's FPRs applied to B; the
    AUC difference B - A paired by id, DeLong with Bonferroni over the attacks)."""
    from imprint.diagnostics.runs import compare_runs

    for which in (a, b):
        if which not in by_id or not by_id[which].comparable:
            raise DataError(f"{which} is not a run with scores in this view; pick two runs")
    left, right = by_id[a], by_id[b]
    try:
        result: dict[str, Any] | None = compare_runs(left.path, right.path).to_dict()
        problem = ""
    except (DataError, OSError, ValueError, TypeError) as err:
        result, problem = None, str(err)
    page = _environment().get_template("compare.html").render(
        a=left, b=right, result=result, problem=problem, root="../",
        title=f"{left.name} vs {right.name} - imprint view",
    )  # fmt: skip
    target = out / "compare" / comparison_name(a, b)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(target)  # a reader sees the whole page or none
    return target


def same_data_pairs(entries: Sequence[Entry], limit: int = 50) -> list[tuple[str, str]]:
    """Pairs of runs that scored the same data (by its fingerprint), each both ways (the first
    ticked is A): the comparisons a static site builds ahead (``limit`` pairs at most; a served
    site builds any pair when asked)."""
    runs = [e for e in entries if e.comparable]
    pairs = [
        (x.id, y.id)
        for i, x in enumerate(runs)
        for y in runs[i + 1 :]
        if x.data_key and x.data_key == y.data_key
    ][:limit]
    return [*pairs, *((b, a) for a, b in pairs)]
