"""The documentation site: ``mkdocs build --strict`` passes, the reference pages written by the
hook (docs/hooks/imprint_docs.py) cover every command, attack, benchmark and warning kind, and the
README stays a short front page whose links all resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def test_the_command_reference_has_every_command_and_option(site: Path) -> None:
    import typer

    from imprint.cli import app

    page = _text(site / "reference" / "commands" / "index.html")
    root = typer.main.get_command(app)
    stack = [(("imprint",), root)]
    seen = 0
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            stack.append(((*path, name), sub))
        if len(path) == 1:
            continue
        seen += 1
        assert f"<code>{' '.join(path)}</code>" in page, path
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert f"<code>{opt}</code>" in page, (path, opt)
    assert seen >= 20  # run, attacks, ..., overlap build, data build-temporal, game build, ...
    options = [o for p in root.params for o in p.opts if o.startswith("--") and o != "--help"]
    assert {"--quiet", "--log-format"} <= set(options)  # the global options, issue 35
    for opt in options:
        assert f"<code>{opt}</code>" in page, ("imprint", opt)


def test_the_attack_reference_has_every_attack_with_paper_and_deviations(site: Path) -> None:
    import html

    from imprint.attacks import available_attacks

    page = html.unescape(_text(site / "reference" / "attacks" / "index.html"))
    attacks = available_attacks()
    assert {"loss", "min_k_pp", "lira", "samia"} <= set(attacks)
    for name, cls in attacks.items():
        assert f'id="{name}"' in page, name
        assert " ".join(cls.paper.split()) in page, name
        for deviation in cls.deviations:
            assert " ".join(deviation.split()) in page, (name, deviation)


def test_the_benchmark_catalog_page_has_every_benchmark(site: Path) -> None:
    import html

    from imprint.data.catalog import iter_benchmarks

    page = html.unescape(_text(site / "reference" / "datasets" / "index.html"))
    names = [b.name for b in iter_benchmarks()]
    assert "wikimia:32" in names and any(n.startswith("mimir:") for n in names)
    for name in names:
        assert f"<code>{name}</code>" in page, name


def test_the_report_page_lists_every_warning_kind(site: Path) -> None:
    from imprint.evaluation.results import WARNING_KINDS

    page = _text(site / "reference" / "report" / "index.html")
    for kind in WARNING_KINDS:
        assert f"<code>{kind}</code>" in page, kind


def test_every_recipe_is_a_page_of_the_site(site: Path) -> None:
    for recipe in (ROOT / "docs" / "recipes").glob("*.md"):
        assert (site / "recipes" / recipe.stem / "index.html").is_file(), recipe.name


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    readme = _text(ROOT / "README.md")
    assert len(readme.splitlines()) <= 150, "the README is the front page; details go in docs/"
    for section in ("## Install", "## Quickstart", "## Recipes", "## Architecture", "## Read more"):
        assert section in readme, section
    # the two commands CI runs (.ci/run) stay in the README, verbatim
    ci = _text(ROOT / ".ci" / "run")
    assert "./scripts/setup && .venv/bin/imprint demo" in readme
    assert "./scripts/setup --served && ./scripts/test" in readme
    assert "./scripts/setup --served\nexport IMPRINT_REQUIRE_SERVED=1\n./scripts/test\n" in ci
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 20
    for link in links:
        if "://" not in link:
            assert (ROOT / link).is_file(), f"README links to {link}, which does not exist"
