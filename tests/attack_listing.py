"""``imprint attacks`` output read back as entries: wrapped at the console's width (80 columns
in a pipe), an entry is its name's line and the indented lines under it."""

from __future__ import annotations


def attack_entries(listing: str) -> dict[str, str]:
    """Each attack's name -> its entry's words, wrapped lines joined by single spaces (a
    deviation as ``differs: TEXT``, TEXT's whitespace collapsed the same way)."""
    entries: dict[str, list[str]] = {}
    name = ""
    for line in listing.splitlines():
        if line and not line[0].isspace():
            name = line.split()[0]
            assert name not in entries, f"{name} listed twice"
            entries[name] = []
        if line.strip():
            assert name, f"an indented line before any attack's name: {line!r}"
            entries[name].append(line)
    return {n: " ".join(" ".join(lines).split()) for n, lines in entries.items()}


def said(text: str) -> str:
    """``text`` with its whitespace collapsed, as :func:`attack_entries` gives it."""
    return " ".join(text.split())
