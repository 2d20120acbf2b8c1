"""Known defects of a benchmark, counted when it loads: duplicates, short texts, split overlap.

Counted on the set as published, before a run's own transforms (whose dedupe then drops exact
duplicates and label conflicts, counting them too). The counts go to the run manifest
(``data.defects``) and each kind of defect found becomes one report warning.

- duplicates: extra copies of an exactly equal text under one label, texts under both labels,
  and extra copies that only a normalisation reveals (Unicode NFKC, case, whitespace);
- short texts: in a length-bucketed set (WikiMIA's 32/64/128/256 words), texts with fewer than
  ``short_ratio`` x bucket words (words: whitespace-separated units, each character of an
  unspaced script such as Chinese one unit, as :func:`imprint.data.words.split_units`);
- split overlap: texts shared with another split of the same benchmark, with the same label and
  with the other label (a text that is a member in one split and a non-member in another is
  contradictory ground truth); for held-out partners (dev vs test) any overlap is leakage.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from imprint.data.sample import MEMBER, Sample
from imprint.data.words import split_units

SHORT_RATIO = 0.5
_LABEL = {MEMBER: "members", 0: "non-members"}
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SplitOverlap:
    """Texts shared between this set and ``other`` (distinct texts, by exact equality)."""

    other: str
    checked: bool
    same_label: int = 0
    cross_label: int = 0
    disjoint_expected: bool = False
    note: str = ""

    @property
    def defects(self) -> int:
        return self.cross_label + (self.same_label if self.disjoint_expected else 0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"other": self.other, "checked": self.checked}
        if self.checked:
            out |= {"same_label": self.same_label, "cross_label": self.cross_label}
            out["disjoint_expected"] = self.disjoint_expected
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class DefectReport:
    """Defect counts of one loaded set (see the module docstring)."""

    n_texts: int
    duplicates: dict[str, int]  # "members"/"non-members" -> extra copies of an equal text
    cross_label: int  # distinct texts under both labels
    normalised_duplicates: int  # extra copies only normalisation reveals
    bucket_words: int | None = None
    short_ratio: float = SHORT_RATIO
    short: dict[str, int] = field(default_factory=dict)  # "members"/"non-members" -> count
    overlaps: tuple[SplitOverlap, ...] = ()

    @property
    def total(self) -> int:
        """Every counted defect: duplicates, conflicts, short texts, overlap that is a defect."""
        return (
            sum(self.duplicates.values())
            + self.cross_label
            + self.normalised_duplicates
            + sum(self.short.values())
            + sum(o.defects for o in self.overlaps)
        )

    def to_dict(self) -> dict[str, Any]:
        """The manifest's ``data.defects`` entry."""
        out: dict[str, Any] = {
            "n_texts": self.n_texts,
            "total": self.total,
            "duplicates_within_label": dict(self.duplicates),
            "texts_under_both_labels": self.cross_label,
            "normalised_duplicates": self.normalised_duplicates,
        }
        if self.bucket_words is not None:
            out["short_texts"] = {
                "bucket_words": self.bucket_words,
                "below_words": self.short_threshold,
                **self.short,
            }
        if self.overlaps:
            out["split_overlap"] = [o.to_dict() for o in self.overlaps]
        return out

    @property
    def short_threshold(self) -> int | None:
        if self.bucket_words is None:
            return None
        return max(1, round(self.short_ratio * self.bucket_words))

    def warnings(self, name: str) -> list[str]:
        """One message per kind of defect found in the set called ``name``."""
        out = []
        dup = {k: v for k, v in self.duplicates.items() if v}
        if dup or self.cross_label or self.normalised_duplicates:
            parts = [f"{n} extra copies of equal texts among {k}" for k, n in dup.items()]
            if self.cross_label:
                parts.append(f"{self.cross_label} texts labelled both member and non-member")
            if self.normalised_duplicates:
                parts.append(
                    f"{self.normalised_duplicates} more copies equal up to case, whitespace "
                    "or Unicode form"
                )
            out.append(
                f"{name}: duplicate texts in the set as published: {'; '.join(parts)} "
                "(the run's dedupe drops exact copies and both-label texts; see data.defects)"
            )
        if sum(self.short.values()):
            counts = ", ".join(f"{n} {k}" for k, n in self.short.items() if n)
            out.append(
                f"{name}: {sum(self.short.values())} texts ({counts}) have fewer than "
                f"{self.short_threshold} words, under {self.short_ratio:g} x the "
                f"{self.bucket_words}-word bucket: length differs from what the bucket promises"
            )
        out += [_overlap_warning(name, o) for o in self.overlaps if o.defects]
        return out


def _overlap_warning(name: str, o: SplitOverlap) -> str:
    if o.cross_label:
        what = f"{o.cross_label} texts with the other label (contradictory ground truth)"
        if o.disjoint_expected and o.same_label:
            what += f" and {o.same_label} with the same label"
    else:
        what = f"{o.same_label} texts (leakage between held-out splits)"
    return f"{name}: shares {what} with {o.other}"


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form near-duplicates share."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def duplicate_counts(samples: Sequence[Sample]) -> tuple[dict[str, int], int, int]:
    """(extra exact copies per label, distinct texts under both labels, extra copies that only
    normalisation reveals). Counts are over the set as given."""
    per_label = Counter((s.label, s.text) for s in samples)
    extra = {name: 0 for name in _LABEL.values()}
    for (label, _), n in per_label.items():
        extra[_LABEL[label]] += n - 1
    labels_of: dict[str, set[int]] = {}
    for label, text in per_label:
        labels_of.setdefault(text, set()).add(label)
    both = sum(len(labels) > 1 for labels in labels_of.values())
    exact_groups = len(labels_of)
    normalised_groups = len({normalise(t) for t in labels_of})
    return extra, both, exact_groups - normalised_groups


def short_counts(
    samples: Iterable[Sample], bucket_words: int, *, ratio: float = SHORT_RATIO
) -> dict[str, int]:
    """Texts with fewer than ``ratio * bucket_words`` words, per label."""
    below = max(1, round(ratio * bucket_words))
    out = {name: 0 for name in _LABEL.values()}
    for s in samples:
        if not _has_units(s.text, below):
            out[_LABEL[s.label]] += 1
    return out


def _has_units(text: str, n: int) -> bool:
    """Whether ``text`` has at least ``n`` units; ``n`` whitespace words settle it without
    splitting all of a long text (each holds one unit or more)."""
    return len(text.split(maxsplit=n - 1)) >= n or len(split_units(text)) >= n


def split_overlap(
    samples: Sequence[Sample],
    other: Sequence[Sample],
    other_name: str,
    *,
    disjoint_expected: bool = False,
) -> SplitOverlap:
    """Distinct texts ``samples`` shares with ``other``, with the same and the other label."""
    mine: dict[str, set[int]] = {}
    for s in samples:
        mine.setdefault(s.text, set()).add(s.label)
    theirs: dict[str, set[int]] = {}
    for s in other:
        theirs.setdefault(s.text, set()).add(s.label)
    shared = mine.keys() & theirs.keys()
    same = sum(bool(mine[t] & theirs[t]) for t in shared)
    cross = sum(bool(mine[t] ^ theirs[t]) for t in shared)
    return SplitOverlap(other_name, True, same, cross, disjoint_expected)


def check_defects(
    samples: Sequence[Sample],
    *,
    bucket_words: int | None = None,
    overlaps: Sequence[SplitOverlap] = (),
    short_ratio: float = SHORT_RATIO,
) -> DefectReport:
    """Every defect count of ``samples`` (``overlaps`` computed by the caller, who knows the
    benchmark's other splits)."""
    extra, both, normalised = duplicate_counts(samples)
    short = short_counts(samples, bucket_words, ratio=short_ratio) if bucket_words else {}
    return DefectReport(
        n_texts=len(samples),
        duplicates=extra,
        cross_label=both,
        normalised_duplicates=normalised,
        bucket_words=bucket_words,
        short_ratio=short_ratio,
        short=short,
        overlaps=tuple(overlaps),
    )
