"""Temporal benchmarks (WikiMIA-25 style) built from dated documents.

Members are documents dated before ``member_before`` (a model trained later may have seen
them), non-members documents dated on or after ``nonmember_after`` (after its training cutoff);
documents in between are dropped and counted. Such a split also measures whatever else changed
with time (topics, names, years mentioned), which the blind baseline exposes. The
regression-discontinuity design (``design="rdd"``, the SoK's recommendation, Meeus et al. 2024)
keeps only documents close to one ``cutoff``: members in ``[cutoff - bandwidth, cutoff)``,
non-members in ``[cutoff, cutoff + bandwidth]``, so slow drift has little room to act.

Steps, each counting what it drops: read (:mod:`imprint.data.dumps`), window by date,
de-duplicate over *every* document read (exact text, then normalised text: NFKC, case-folded,
punctuation removed, whitespace collapsed), keeping the earliest-dated copy, so a "non-member"
whose text was published earlier is dropped; then per length bucket: keep texts of at least N
words (:func:`imprint.data.words.split_units`: whitespace words, one per character of an
unspaced script such as Chinese), truncate to the first N words as written, de-duplicate the
truncated texts again, and draw the same number of members and non-members (seeded).
"""

from __future__ import annotations

import functools
import hashlib
import random
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from imprint.data.dumps import DatedDoc
from imprint.data.sample import MEMBER, NON_MEMBER
from imprint.data.words import split_units
from imprint.errors import ConfigError, DataError

__all__ = [
    "DEFAULT_BUCKETS",
    "Bucket",
    "Collected",
    "DrawOptions",
    "TemporalDesign",
    "collect",
    "draw",
    "make_design",
    "normalise",
    "truncate_units",
]

DEFAULT_BUCKETS = (32, 64, 128, 256)
Design = Literal["plain", "rdd"]
R_GAP = "dated between member-before and nonmember-after"
R_WINDOW = "outside the RDD window"
R_EXACT = "exact duplicate of an earlier-dated text"
R_NORMAL = "normalised duplicate of an earlier-dated text"


def _day(d: datetime) -> str:
    return d.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class TemporalDesign:
    """Which dates make a member (label 1) or a non-member (label 0); UTC datetimes.

    ``plain``: member if ``date < member_before``, non-member if ``date >= nonmember_after``.
    ``rdd`` additionally requires ``date >= cutoff - bandwidth`` (members) and
    ``date <= cutoff + bandwidth`` (non-members), with ``member_before <= cutoff <=
    nonmember_after`` defaulting to the cutoff itself.
    """

    member_before: datetime
    nonmember_after: datetime
    design: Design = "plain"
    cutoff: datetime | None = None
    bandwidth_days: float | None = None

    def __post_init__(self) -> None:
        if self.member_before > self.nonmember_after:
            raise ConfigError(
                f"--member-before {_day(self.member_before)} is later than --nonmember-after "
                f"{_day(self.nonmember_after)}: documents in between would be both; make "
                "member-before <= nonmember-after"
            )
        if self.design == "rdd":
            self._check_rdd()
        elif self.design != "plain":
            raise ConfigError(f"unknown design {self.design!r}; use plain or rdd")
        elif self.cutoff is not None or self.bandwidth_days is not None:
            raise ConfigError("--cutoff and --bandwidth belong to --design rdd; add it")

    def _check_rdd(self) -> None:
        if self.cutoff is None or self.bandwidth_days is None:
            raise ConfigError("--design rdd needs --cutoff DATE and --bandwidth DAYS")
        if not self.bandwidth_days > 0:
            raise ConfigError(
                f"--bandwidth must be a positive number of days, got {self.bandwidth_days!r}"
            )
        if not self.member_before <= self.cutoff <= self.nonmember_after:
            raise ConfigError(
                f"--cutoff {_day(self.cutoff)} must lie between --member-before "
                f"{_day(self.member_before)} and --nonmember-after {_day(self.nonmember_after)} "
                "(both default to the cutoff under --design rdd)"
            )
        try:
            width = timedelta(days=self.bandwidth_days)
            low, high = self.cutoff - width, self.cutoff + width
        except OverflowError:  # inf, or a window reaching past year 1 or 9999
            raise ConfigError(
                f"--bandwidth {self.bandwidth_days!r} days around --cutoff {_day(self.cutoff)} "
                "reaches outside years 1-9999; give a smaller --bandwidth (a plain design "
                "keeps every date on each side)"
            ) from None
        if not self.member_before > low or not self.nonmember_after <= high:
            raise ConfigError(
                f"the RDD window [{_day(low)}, {_day(high)}] leaves no room before "
                f"--member-before {_day(self.member_before)} or after --nonmember-after "
                f"{_day(self.nonmember_after)}; widen --bandwidth or move the dates"
            )

    def windows(self) -> dict[str, tuple[datetime | None, datetime | None]]:
        """``{"members": (from, before), "nonmembers": (from, until)}``; None = unbounded."""
        if self.design == "plain" or self.cutoff is None or self.bandwidth_days is None:
            return {
                "members": (None, self.member_before),
                "nonmembers": (self.nonmember_after, None),
            }
        width = timedelta(days=self.bandwidth_days)
        return {
            "members": (self.cutoff - width, self.member_before),
            "nonmembers": (self.nonmember_after, self.cutoff + width),
        }

    def label(self, date: datetime) -> int | str:
        """MEMBER, NON_MEMBER, or the reason a document of this date is not drawn."""
        (m_low, m_high), (n_low, n_high) = self.windows().values()
        if date < self.member_before:
            return MEMBER if m_low is None or date >= m_low else R_WINDOW
        if date >= self.nonmember_after:
            return NON_MEMBER if n_high is None or date <= n_high else R_WINDOW
        return R_GAP

    def as_plain(self) -> TemporalDesign:
        """The plain design with the same member-before and nonmember-after dates."""
        return replace(self, design="plain", cutoff=None, bandwidth_days=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (ISO dates, the windows in force)."""
        windows = {
            side: [None if d is None else _day(d) for d in bounds]
            for side, bounds in self.windows().items()
        }
        out: dict[str, Any] = {
            "design": self.design,
            "member_before": _day(self.member_before),
            "nonmember_after": _day(self.nonmember_after),
            "windows": windows,
        }
        if self.design == "rdd" and self.cutoff is not None:
            out.update(cutoff=_day(self.cutoff), bandwidth_days=self.bandwidth_days)
        return out


def make_design(
    *,
    member_before: datetime | None,
    nonmember_after: datetime | None,
    design: str = "plain",
    cutoff: datetime | None = None,
    bandwidth_days: float | None = None,
) -> TemporalDesign:
    """A validated design; under ``rdd`` the two dates default to ``cutoff``."""
    if design == "rdd" and cutoff is not None:
        member_before = member_before or cutoff
        nonmember_after = nonmember_after or cutoff
    if member_before is None or nonmember_after is None:
        raise ConfigError(
            "give --member-before DATE and --nonmember-after DATE (or --design rdd --cutoff "
            "DATE --bandwidth DAYS, where both default to the cutoff)"
        )
    return TemporalDesign(member_before, nonmember_after, design, cutoff, bandwidth_days)  # type: ignore[arg-type]


# -- collecting: windows and de-duplication over every document read ------------------------------


@functools.cache
def _punctuation() -> dict[int, None]:
    """A ``str.translate`` table deleting every punctuation code point (built on first use)."""
    return dict.fromkeys(i for i in range(0x110000) if unicodedata.category(chr(i)).startswith("P"))


def normalise(text: str) -> str:
    """The near-duplicate key: NFKC, case-folded, punctuation removed, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_punctuation())
    return " ".join(folded.split())


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclass(frozen=True)
class Candidate:
    """A document some design can draw: text cut to the longest bucket, its word count
    (capped there), and ``order`` (its position in the dump, the tie-break between equal dates)."""

    id: str
    source: str
    date: datetime
    text: str
    n_words: int
    order: int


@dataclass(frozen=True)
class Collected:
    """The outcome of :func:`collect`: de-duplicated candidates and, per design, what was
    dropped (by date window and as a duplicate); ``dates`` spans every document read."""

    designs: tuple[TemporalDesign, ...]
    candidates: tuple[Candidate, ...]
    n_read: int
    dropped: tuple[dict[str, int], ...]
    dates: tuple[datetime, datetime] | None
    revisions: tuple[int, int] = (0, 0)  # documents read with exactly one / several revisions
    earlier_copies: tuple[int, ...] = ()  # per design: non-members whose text was dated earlier
    duplicate_ids: int = 0  # documents whose id an earlier document already had
    duplicate_id_example: str = ""  # the first such id and where its two documents were read

    def members(self, k: int) -> list[Candidate]:
        return [c for c in self.candidates if self.designs[k].label(c.date) == MEMBER]

    def nonmembers(self, k: int) -> list[Candidate]:
        return [c for c in self.candidates if self.designs[k].label(c.date) == NON_MEMBER]


def truncate_units(text: str, n: int) -> tuple[str, int]:
    """(``text`` from its first word to the end of its ``n``-th, as written; the number of
    words, at most ``n``)."""
    units = split_units(text)
    if not units:
        return "", 0
    last = units[min(n, len(units)) - 1]
    return text[units[0].start : last.end], min(n, len(units))


def collect(
    docs: Iterable[DatedDoc], designs: Sequence[TemporalDesign], *, max_words: int
) -> Collected:
    """Window ``docs`` by each design's dates and de-duplicate them (keeping each text's
    earliest-dated copy over every document read, in or out of a window)."""
    first_exact: dict[bytes, tuple[datetime, int]] = {}
    first_norm: dict[bytes, tuple[datetime, int]] = {}
    window = [Counter[str]() for _ in designs]
    kept: list[tuple[Candidate, bytes, bytes]] = []
    low = high = None
    revisions = [0, 0]
    n_read = 0
    ids = _IdCount()
    for order, doc in enumerate(docs):
        n_read += 1
        ids.add(doc)
        low = doc.date if low is None or doc.date < low else low
        high = doc.date if high is None or doc.date > high else high
        revisions[doc.revisions > 1] += 1
        exact, norm = _digest(doc.text), _digest(normalise(doc.text))
        here = (doc.date, order)
        first_exact[exact] = min(first_exact.get(exact, here), here)
        first_norm[norm] = min(first_norm.get(norm, here), here)
        labels = [d.label(doc.date) for d in designs]
        for k, label in enumerate(labels):
            if isinstance(label, str):
                window[k][label] += 1
        if any(not isinstance(label, str) for label in labels):
            text, n_words = truncate_units(doc.text, max_words)
            kept.append(
                (Candidate(doc.id, doc.source, doc.date, text, n_words, order), exact, norm)
            )
    dates = None if low is None or high is None else (low, high)
    out = _dedupe(designs, kept, first_exact, first_norm, window, n_read, dates, revisions)
    return replace(out, duplicate_ids=ids.repeated, duplicate_id_example=ids.example)


class _IdCount:
    """Counts documents whose id was seen before (drawn.jsonl could not tell them apart)."""

    def __init__(self) -> None:
        self.first: dict[str, str] = {}
        self.repeated = 0
        self.example = ""

    def add(self, doc: DatedDoc) -> None:
        where = self.first.get(doc.id)
        if where is None:
            self.first[doc.id] = doc.source
        else:
            self.repeated += 1
            self.example = self.example or f"{doc.id!r} ({where} and {doc.source})"


def _dedupe(
    designs: Sequence[TemporalDesign],
    kept: list[tuple[Candidate, bytes, bytes]],
    first_exact: dict[bytes, tuple[datetime, int]],
    first_norm: dict[bytes, tuple[datetime, int]],
    window: list[Counter[str]],
    n_read: int,
    dates: tuple[datetime, datetime] | None,
    revisions: list[int],
) -> Collected:
    out: list[Candidate] = []
    earlier = [0] * len(designs)
    for c, exact, norm in kept:
        here = (c.date, c.order)
        reason = R_EXACT if first_exact[exact] != here else None
        reason = reason or (R_NORMAL if first_norm[norm] != here else None)
        if reason is None:
            out.append(c)
            continue
        for k, design in enumerate(designs):
            if not isinstance(design.label(c.date), str):
                window[k][reason] += 1
                first = min(first_exact[exact], first_norm[norm])[0]
                earlier[k] += design.label(c.date) == NON_MEMBER and first < design.nonmember_after
    return Collected(
        tuple(designs),
        tuple(out),
        n_read,
        tuple(dict(w) for w in window),
        dates,
        (revisions[0], revisions[1]),
        tuple(earlier),
    )


# -- drawing: buckets, balance ---------------------------------------------------------------------


@dataclass(frozen=True)
class DrawOptions:
    """Length buckets (words), texts per label per bucket (None = as many as balance allows),
    and the seed of the draw."""

    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    per_label: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [b for b in self.buckets if isinstance(b, bool) or not isinstance(b, int) or b < 1]
        if not self.buckets or bad or len(set(self.buckets)) != len(self.buckets):
            raise ConfigError(
                f"--buckets must be distinct positive word counts such as 32,64,128,256; got "
                f"{list(self.buckets)}"
            )
        if self.per_label is not None and (isinstance(self.per_label, bool) or self.per_label < 1):
            raise ConfigError(f"--per-label must be a positive integer, got {self.per_label!r}")


@dataclass(frozen=True)
class Row:
    """One drawn text: truncated ``text``, ``label`` and where it came from."""

    id: str
    source: str
    date: datetime
    text: str
    label: int


@dataclass(frozen=True)
class Bucket:
    """One length bucket: ``rows`` (members and non-members, equal counts, in the seeded draw's
    order), the candidates it could use per side, and what it dropped by reason."""

    words: int
    rows: tuple[Row, ...]
    available: dict[str, int]
    dropped: dict[str, int] = field(default_factory=dict)

    def texts_labels(self) -> tuple[list[str], list[int]]:
        return [r.text for r in self.rows], [r.label for r in self.rows]


def draw(collected: Collected, k: int, options: DrawOptions) -> tuple[list[Bucket], dict[int, str]]:
    """The buckets of design ``k`` and, for each bucket that cannot be balanced, why (a side
    without texts of that length). ``per_label`` larger than a side is a :class:`DataError`."""
    design = collected.designs[k]
    pool = [c for c in collected.candidates if not isinstance(design.label(c.date), str)]
    random.Random(options.seed).shuffle(pool)  # one permutation: buckets share their draws
    buckets, skipped = [], {}
    for words in sorted(options.buckets):
        bucket = _one_bucket(pool, design, words, options.per_label)
        if bucket.rows:
            buckets.append(bucket)
        else:
            skipped[words] = (
                f"no balanced draw: {bucket.available['members']} members and "
                f"{bucket.available['nonmembers']} non-members have at least {words} words"
            )
    return buckets, skipped


def _one_bucket(
    pool: list[Candidate], design: TemporalDesign, words: int, per_label: int | None
) -> Bucket:
    dropped: Counter[str] = Counter()
    first: dict[bytes, tuple[datetime, int]] = {}
    cut: list[tuple[Candidate, str, bytes]] = []
    for c in pool:
        if c.n_words < words:
            dropped[f"shorter than {words} words"] += 1
            continue
        text = truncate_units(c.text, words)[0]
        key = _digest(normalise(text))
        first[key] = min(first.get(key, (c.date, c.order)), (c.date, c.order))
        cut.append((c, text, key))
    ordered: list[Row] = []  # the seeded permutation's order, both sides together
    for c, text, key in cut:
        if first[key] != (c.date, c.order):
            dropped[f"same first {words} words as an earlier-dated text"] += 1
            continue
        ordered.append(Row(c.id, c.source, c.date, text, int(design.label(c.date))))
    available = {
        "members": sum(r.label == MEMBER for r in ordered),
        "nonmembers": sum(r.label == NON_MEMBER for r in ordered),
    }
    n = _per_side(available, words, per_label)
    taken = Counter[int]()
    rows = []
    for r in ordered:
        if taken[r.label] < n:
            taken[r.label] += 1
            rows.append(r)
    if len(ordered) > len(rows):
        dropped[f"not drawn (balance: {n} per side)"] += len(ordered) - len(rows)
    return Bucket(words, tuple(rows), available, dict(dropped))


def _per_side(available: dict[str, int], words: int, per_label: int | None) -> int:
    n = min(available.values())
    if per_label is None:
        return n
    if n < per_label:
        raise DataError(
            f"--per-label {per_label} asks for more texts of >= {words} words than one side "
            f"has: {available['members']} members and {available['nonmembers']} non-members "
            f"after de-duplication; use --per-label <= {n} or leave bucket {words} out of "
            "--buckets"
        )
    return per_label
