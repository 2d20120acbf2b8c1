"""Pure transforms on sequences of :class:`Sample`.

Each returns ``(samples, dropped)``: the kept samples as a tuple, in their original order, and a
dict mapping a drop reason to a count, so no sample disappears without being counted.
Words are whitespace-split (``str.split()``).
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from dataclasses import replace

from imprint.data.sample import MEMBER, NON_MEMBER, Sample
from imprint.errors import ConfigError, DataError

Dropped = dict[str, int]
Result = tuple[tuple[Sample, ...], Dropped]

R_CONFLICT = "text under both labels"
R_DUPLICATE = "duplicate text"


class LabelConflictWarning(UserWarning):
    """The same text appears as both member and non-member; every copy was dropped."""


def _check_n(n: int, what: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{what} must be a positive integer, got {n!r}")


def truncate_words(samples: Sequence[Sample], n: int) -> Result:
    """Cut every text to its first ``n`` words (joined by single spaces). Drops nothing.

    Texts with at most ``n`` words are kept unchanged, whitespace included.
    """
    _check_n(n, "truncate")
    out = []
    for s in samples:
        words = s.text.split()
        out.append(replace(s, text=" ".join(words[:n])) if len(words) > n else s)
    return tuple(out), {}


def min_words(samples: Sequence[Sample], n: int) -> Result:
    """Keep texts with at least ``n`` words; drops counted as ``"shorter than {n} words"``."""
    _check_n(n, "min_words")
    kept = tuple(s for s in samples if len(s.text.split()) >= n)
    n_drop = len(samples) - len(kept)
    return kept, ({f"shorter than {n} words": n_drop} if n_drop else {})


def find_label_conflicts(samples: Sequence[Sample]) -> list[tuple[str, ...]]:
    """Groups of ids whose (exactly equal) text appears under both labels, in first-seen order."""
    by_text: dict[str, list[Sample]] = {}
    for s in samples:
        by_text.setdefault(s.text, []).append(s)
    return [
        tuple(s.id for s in group)
        for group in by_text.values()
        if len({s.label for s in group}) > 1
    ]


def dedupe(samples: Sequence[Sample]) -> Result:
    """Exact-text dedupe.

    Copies of a text under one label keep the first (the others counted as ``"duplicate text"``).
    A text present under both labels is ambiguous ground truth: every copy is dropped, counted as
    ``"text under both labels"``, and a :class:`LabelConflictWarning` lists the ids
    (:func:`find_label_conflicts` returns them all).
    """
    labels_of: dict[str, set[int]] = {}
    for s in samples:
        labels_of.setdefault(s.text, set()).add(s.label)
    conflict_texts = {t for t, labels in labels_of.items() if len(labels) > 1}
    seen: set[str] = set()
    kept: list[Sample] = []
    dropped: Dropped = {}
    for s in samples:
        if s.text in conflict_texts:
            dropped[R_CONFLICT] = dropped.get(R_CONFLICT, 0) + 1
        elif s.text in seen:
            dropped[R_DUPLICATE] = dropped.get(R_DUPLICATE, 0) + 1
        else:
            seen.add(s.text)
            kept.append(s)
    if conflict_texts:
        conflicts = find_label_conflicts(samples)
        shown = "; ".join(", ".join(g) for g in conflicts[:10])
        more = f" (and {len(conflicts) - 10} more)" if len(conflicts) > 10 else ""
        warnings.warn(
            f"{len(conflicts)} text(s) appear as both member and non-member; dropped all "
            f"{dropped[R_CONFLICT]} copies. Ids: {shown}{more}",
            LabelConflictWarning,
            stacklevel=2,
        )
    return tuple(kept), dropped


def sample_per_label(samples: Sequence[Sample], n: int, *, seed: int) -> Result:
    """Draw ``n`` members and ``n`` non-members uniformly at random (``random.Random(seed)``).

    Kept samples stay in their original order; the rest are counted as
    ``"not sampled (n_per_label={n})"``. Raises :class:`DataError` if a class has fewer than ``n``.
    """
    _check_n(n, "n_per_label")
    rng = random.Random(seed)
    chosen: set[int] = set()
    for label, name in ((MEMBER, "members"), (NON_MEMBER, "non-members")):
        idx = [i for i, s in enumerate(samples) if s.label == label]
        if len(idx) < n:
            raise DataError(
                f"asked for {n} {name} per label but only {len(idx)} {name} exist "
                f"(after filtering). Fix: use n_per_label <= {len(idx)} or add more data."
            )
        chosen.update(rng.sample(idx, n))
    kept = tuple(s for i, s in enumerate(samples) if i in chosen)
    n_drop = len(samples) - len(kept)
    return kept, ({f"not sampled (n_per_label={n})": n_drop} if n_drop else {})


def _merge(total: Dropped, more: Dropped) -> None:
    for reason, count in more.items():
        total[reason] = total.get(reason, 0) + count


_min_words = min_words
_dedupe = dedupe


def apply_transforms(
    samples: Sequence[Sample],
    *,
    truncate: int | None = None,
    min_words: int | None = None,
    dedupe: bool = True,
    n_per_label: int | None = None,
    seed: int = 0,
) -> Result:
    """Apply, in order: ``min_words`` on the original text, ``truncate`` to N words, exact
    ``dedupe`` (after truncation, since truncation can create duplicates), and finally
    ``sample_per_label``. Returns the kept samples and the summed drop counts.

    Raises :class:`DataError` if nothing is left.
    """
    out: tuple[Sample, ...] = tuple(samples)
    dropped: Dropped = {}
    steps = []
    if min_words is not None:
        n_min = min_words
        steps.append(lambda xs: _min_words(xs, n_min))
    if truncate is not None:
        n_trunc = truncate
        steps.append(lambda xs: truncate_words(xs, n_trunc))
    if dedupe:
        steps.append(_dedupe)
    if n_per_label is not None:
        n_per = n_per_label
        steps.append(lambda xs: sample_per_label(xs, n_per, seed=seed))
    for step in steps:
        out, more = step(out)
        _merge(dropped, more)
    if samples and not out:
        raise DataError(f"every sample was dropped by the transforms: {dropped}")
    return out, dropped
