"""Find the years and dates a text mentions (for the blind date detector).

Temporally split benchmarks (WikiMIA, temporal Wiki/arXiv) put members before a model's cutoff
and non-members after it, so the latest date a text mentions often gives its label away
(Das, Zhang and Tramèr 2024, "Blind Baselines Beat Membership Inference Attacks for Foundation
Models"). A *mention* is a four-digit year in [1500, 2099] standing alone, optionally refined by
a month (``February 18, 2023``, ``18 Feb 2023``, ``2023-02-18``): its value is then the
fractional year ``year + (month - 1) / 12``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DateMentions", "find_dates"]

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
    r"aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_YEAR = r"(?P<year>1[5-9]\d\d|20\d\d)"
_PATTERNS = (
    # 2023-02-18, 2023/02
    re.compile(rf"(?<![\d-]){_YEAR}[-/](?P<mnum>0?[1-9]|1[0-2])(?:[-/]\d{{1,2}})?(?!\d)"),
    # February 18, 2023 / February 2023 / 18 February 2023
    re.compile(rf"(?<!\w){_MONTH}\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?{_YEAR}(?!\d)", re.I),
    re.compile(rf"(?<!\d)\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+{_YEAR}(?!\d)", re.I),
    # a bare year
    re.compile(rf"(?<![\w.,]){_YEAR}(?![\w]|[.,]\d)"),
)


@dataclass(frozen=True)
class DateMentions:
    """Dates found in one text: ``years`` (integers, in order of appearance) and ``values``
    (fractional years, one per mention; a month refines its year)."""

    years: tuple[int, ...]
    values: tuple[float, ...]

    @property
    def latest(self) -> float | None:
        """The latest date mentioned (fractional year), or None."""
        return max(self.values) if self.values else None


def find_dates(text: str) -> DateMentions:
    """Years and dates mentioned in ``text`` (see the module docstring for the rules)."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, int, float]] = []  # (position, year, value)
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            span = match.span("year")
            if any(a <= span[0] < b for a, b in taken):
                continue
            year = int(match.group("year"))
            groups = match.groupdict()
            month = 0
            if groups.get("mnum"):
                month = int(groups["mnum"])
            elif groups.get("month"):
                month = _MONTHS[groups["month"].lower()[:3]]
            taken.append(match.span())
            found.append((span[0], year, year + (month - 1) / 12 if month else float(year)))
    found.sort()
    return DateMentions(tuple(y for _, y, _ in found), tuple(v for _, _, v in found))
