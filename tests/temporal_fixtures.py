"""Synthetic dated dumps for the temporal-builder tests, in both formats (written by the tests)."""

from __future__ import annotations

import bz2
import gzip
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import escape

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"


@dataclass
class Page:
    """One page of a MediaWiki export: ``revisions`` are (timestamp text, wikitext) pairs."""

    title: str
    revisions: list[tuple[str, str]]
    ns: int = 0
    page_id: int = 0
    redirect: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _page_xml(page: Page) -> str:
    parts = [
        "  <page>",
        f"    <title>{escape(page.title)}</title>",
        f"    <ns>{page.ns}</ns>",
        f"    <id>{page.page_id}</id>",
    ]
    if page.redirect is not None:
        parts.append(f'    <redirect title="{escape(page.redirect)}" />')
    for i, (stamp, text) in enumerate(page.revisions):
        parts += [
            "    <revision>",
            f"      <id>{page.page_id * 1000 + i}</id>",
            f"      <timestamp>{escape(stamp)}</timestamp>",
            "      <contributor><username>Ed</username><id>42</id></contributor>",
            f'      <text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>',
            "    </revision>",
        ]
    parts.append("  </page>")
    return "\n".join(parts)


def write_export(path: Path, pages: Sequence[Page], *, file_ns: str = "File") -> Path:
    """A MediaWiki XML export (``.xml``, ``.xml.gz`` or ``.xml.bz2`` by suffix) with a
    siteinfo declaring the wiki's File (key 6) and Category (key 14) namespace names."""
    head = (
        f'<mediawiki xmlns="{EXPORT_NS}" version="0.11" xml:lang="en">\n'
        "  <siteinfo>\n    <sitename>Test</sitename>\n    <namespaces>\n"
        f'      <namespace key="6" case="first-letter">{file_ns}</namespace>\n'
        '      <namespace key="14" case="first-letter">Kategorie</namespace>\n'
        "    </namespaces>\n  </siteinfo>\n"
    )
    body = head + "\n".join(_page_xml(p) for p in pages) + "\n</mediawiki>\n"
    data = body.encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".bz2":
        data = bz2.compress(data)
    path.write_bytes(data)
    return path


def write_jsonl(path: Path, rows: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def words(n: int, tag: str, seed: int) -> str:
    """``n`` distinct-looking whitespace words (unique per tag and seed)."""
    rng = random.Random(f"{tag}:{seed}")
    return " ".join(f"{tag}{rng.randrange(10**6)}" for _ in range(n))


START = datetime(2016, 1, 1, tzinfo=UTC)
END = datetime(2025, 1, 1, tzinfo=UTC)
CUTOFF = datetime(2020, 7, 1, tzinfo=UTC)


def drifting_rows(
    *, n_spread: int = 1200, n_near: int = 400, near_days: float = 30, seed: int = 1
) -> list[dict]:
    """Documents whose vocabulary drifts with time: each word is a topic word with probability
    0.6, from the "new" topic with probability equal to the fraction of 2016-2025 elapsed, else
    from the "old" one. ``n_spread`` documents are dated uniformly over the nine years and
    ``n_near`` within ``near_days`` of CUTOFF (2020-07-01), where the mix barely changes."""
    rng = random.Random(seed)
    span = (END - START).total_seconds()
    neutral = [f"n{i:03d}" for i in range(150)]
    old, new = [f"old{i:02d}" for i in range(15)], [f"new{i:02d}" for i in range(15)]
    dates = [START + timedelta(seconds=rng.random() * span) for _ in range(n_spread)]
    dates += [CUTOFF + timedelta(days=rng.uniform(-near_days, near_days)) for _ in range(n_near)]
    rows = []
    for i, date in enumerate(dates):
        t = (date - START).total_seconds() / span
        text = [
            rng.choice(new if rng.random() < t else old)
            if rng.random() < 0.6
            else rng.choice(neutral)
            for _ in range(80)
        ]
        rows.append({"id": f"d{i}", "date": date.isoformat(), "text": " ".join(text)})
    return rows
