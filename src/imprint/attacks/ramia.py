"""RaMIA, range membership inference (Tao and Shokri 2024, "Range Membership Inference Attacks",
arXiv 2408.05131): is *any* text within a range around x (its word-replaced variants) in the
training set, not x exactly.

The range of x is ``sample_size`` texts: x itself and ``sample_size - 1`` variants, each with
between 1 and ``num_masks`` words replaced (Section 3: a range is a centre, a range function and a
size; Privacy Meter's text range function ``word_replace`` keeps the centre among the samples and
replaces 1..``num_masks`` random words, defaults sample_size 10, num_masks 5). Every range sample
is scored by RMIA (:mod:`imprint.attacks.rmia`; offline with a tuned a, as Privacy Meter's RaMIA
runs it), and the range's score is a trimmed mean of its samples' scores (Section 4.2, eq. 6:
the mean of the samples left after trimming the ones least likely to be members): the mean of
the k lowest or the k highest scores. ``trim="auto"`` (Privacy Meter's default when no trim is
set) tunes the side and k on a reference model playing the target, attacked by the others, by
the AUC of its range scores against its known membership; ``none`` takes the plain mean and
``lowest:K``/``highest:K`` fix it. A range's membership is its centre's (every sample of a
member's range is a member range sample, as Privacy Meter repeats the centre's label).

Range function: Privacy Meter fills the replaced words with a masked LM's top-6 predictions
(BERT). Offline (no MLM weights here) the replacements come from imprint's lexical table
(:mod:`imprint.attacks.neighbours`: function-word substitutes, months, numbers moved by one);
a text with no replaceable word swaps two adjacent words. Variants are seeded by the text, so a
range is the same in every run. Higher = member.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from imprint.attacks.base import Preparation, RunContext, prepared_field, register
from imprint.attacks.neighbours import _CORE, lexical_candidates
from imprint.attacks.reference_models import ReferenceModelAttack
from imprint.attacks.rmia import A_GRID, rmia_scores, tune_offline_a
from imprint.data.sample import Sample, text_seed
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet, TextVariant
from imprint.training_manifest import IN, OUT

__all__ = ["RaMIA", "RangeVariant", "range_samples", "trimmed_score", "tune_trim"]

_WORD = re.compile(r"\S+")
MAX_ATTEMPTS = 100  # duplicate draws tolerated before a range is filled by repetition (as PM)


def _replace_words(text: str, rng: np.random.Generator, num_masks: int) -> str:
    words = list(_WORD.finditer(text))
    slots = []
    for m in words:
        lead, core, _ = _CORE.match(m.group()).groups()  # type: ignore[union-attr]
        if choices := lexical_candidates(core):
            start = m.start() + len(lead)
            slots.append((start, start + len(core), choices))
    if not slots:  # nothing replaceable: swap two adjacent words
        if len(words) < 2:
            return text
        i = int(rng.integers(0, len(words) - 1))
        a, b = words[i], words[i + 1]
        return (
            text[: a.start()] + b.group() + text[a.end() : b.start()] + a.group() + text[b.end() :]
        )
    k = int(rng.integers(1, min(num_masks, len(slots)) + 1))
    chosen = sorted(rng.choice(len(slots), size=k, replace=False).tolist(), reverse=True)
    for j in chosen:  # right to left: earlier offsets stay valid
        start, end, choices = slots[j]
        text = text[:start] + choices[int(rng.integers(0, len(choices)))] + text[end:]
    return text


def range_samples(text: str, sample_size: int, num_masks: int, *, seed: int = 0) -> tuple[str, ...]:
    """The range of ``text``: itself, then ``sample_size - 1`` distinct word-replaced variants;
    when no more distinct variants come up (a short text), the range is filled by repeating its
    samples in order, so every range has ``sample_size`` samples."""
    rng = np.random.default_rng([seed, text_seed(text)])
    out = [text]
    attempts = 0
    while len(out) < sample_size and attempts < MAX_ATTEMPTS:
        variant = _replace_words(text, rng, num_masks)
        if variant in out:
            attempts += 1
        else:
            out.append(variant)
    filled = [out[i % len(out)] for i in range(sample_size)]
    return tuple(filled)


@dataclass(frozen=True)
class RangeVariant(TextVariant):
    """The range samples of a text (see :func:`range_samples`)."""

    name: str = "range"
    sample_size: int = 10
    num_masks: int = 5
    seed: int = 0

    def apply(self, text: str) -> tuple[str, ...]:
        return range_samples(text, self.sample_size, self.num_masks, seed=self.seed)


def trimmed_score(scores: np.ndarray, side: str, k: int) -> np.ndarray:
    """Per range (rows of ``scores``, shape (n, S)): the mean of its ``k`` lowest (``side`` =
    ``lowest``) or highest scores; ``k = S`` is the plain mean. NaN scores sort last."""
    s = np.asarray(scores, dtype=np.float64)
    ordered = np.sort(s, axis=1) if side == "lowest" else -np.sort(-s, axis=1)
    return ordered[:, :k].mean(axis=1)


def tune_trim(scores: np.ndarray, labels: np.ndarray) -> tuple[str, int, float]:
    """The (side, k) whose trimmed mean has the highest AUC on a model with known membership
    (``labels`` (n,): 1 IN, 0 OUT, others left out); Privacy Meter's search order (k = 1..S,
    lowest before highest), the first best kept. Returns (side, k, AUC)."""
    from imprint.metrics import roc_auc_score as auc

    keep = (labels == IN) | (labels == OUT)
    y = labels[keep] == IN
    if not 0 < y.sum() < y.size:
        raise ConfigError(
            "ramia: cannot tune the trim: the model playing the target has no IN or no OUT "
            "candidate; fix it with --param ramia.trim=lowest:K (or none)"
        )
    best: tuple[str, int, float] = ("lowest", scores.shape[1], -1.0)
    for k in range(1, scores.shape[1] + 1):
        for side in ("lowest", "highest"):
            s = trimmed_score(scores[keep], side, k)
            ok = np.isfinite(s)
            value = auc(y[ok], s[ok]) if 0 < y[ok].sum() < ok.sum() else float("nan")
            if np.isfinite(value) and value > best[2]:
                best = (side, k, float(value))
    return best


def _parse_trim(trim: str, size: int) -> tuple[str, int] | None:
    """None for auto; (side, k) for none (mean of all), lowest:K or highest:K."""
    if trim == "auto":
        return None
    if trim == "none":
        return ("lowest", size)
    side, _, k = trim.partition(":")
    if side in ("lowest", "highest") and k.isdigit() and 1 <= int(k) <= size:
        return (side, int(k))
    raise ConfigError(
        f"ramia.trim must be auto, none, lowest:K or highest:K with 1 <= K <= sample_size "
        f"({size}), got {trim!r}"
    )


@register("ramia")
@dataclass(frozen=True)
class RaMIA(ReferenceModelAttack):
    modes: tuple[str, ...] = ("offline",)
    sample_size: int = 10
    num_masks: int = 5
    seed: int = 0
    a: float | Literal["auto"] = "auto"
    gamma: float = 1.0
    trim: str = "auto"
    # the population texts' signals, target first (as rmia's); None: the candidates' ranges
    z_signals: tuple[tuple[float, ...], ...] | None = prepared_field()
    summary = (
        "range MIA: RMIA scores of x and of word-replaced variants of x (its range), combined "
        "by a trimmed mean tuned on a reference model; member = anything in the range was "
        "trained on; needs --references"
    )
    paper = "Tao and Shokri 2024, Range Membership Inference Attacks (arXiv 2408.05131)"
    deviations = (
        "Range samples replace words from imprint's offline lexical table (function words, "
        "months, numbers), not Privacy Meter's BERT top-6 predictions (no MLM weights offline).",
        "The tuned trim is applied as tuned (the mean of the k lowest or highest scores); "
        "Privacy Meter tunes the mean of the k lowest but then, for that side, applies the mean "
        "of the S - k lowest (trim_mia_scores keeps int((1 - k/S) S)), a different statistic.",
        "a and the trim are tuned on one of the run's reference models attacked by the others "
        "(as imprint's rmia a=auto), not on the target's paired model.",
        "Privacy Meter's int((1 - ratio) S) keeps 0 samples when its search picks the single "
        "highest score (1 - 0.9 is 0.0999... in floating point), a NaN score; here k is kept "
        "as an integer.",
        "A population text's Pr(z) averages all reference models (all are OUT for it), where "
        "Privacy Meter's run_rmia keeps the K/2 largest of them (scores differ by up to 0.05 "
        "on benchmarks/bench_authors_b.py's simulation; identical with its rule).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sample_size < 1 or self.num_masks < 1:
            raise ConfigError(
                f"ramia.sample_size and ramia.num_masks must be >= 1, got {self.sample_size}, "
                f"{self.num_masks}"
            )
        if self.a != "auto" and not (isinstance(self.a, float | int) and 0 <= self.a <= 1):
            raise ConfigError(f"ramia.a must be auto or a number in [0, 1], got {self.a!r}")
        if not self.gamma > 0:
            raise ConfigError(f"ramia.gamma must be > 0, got {self.gamma}")
        _parse_trim(self.trim, self.sample_size)
        tuning = self.trim == "auto" or (self.a == "auto" and "offline" in self.modes)
        if tuning and len(self.models) < 2:
            raise ConfigError(
                "ramia tunes a and the trim by attacking one reference model with the others, "
                f"which needs at least 2 reference models (here {len(self.models)}); fix both: "
                "--param ramia.a=0.5 --param ramia.trim=none"
            )

    @property
    def variant(self) -> RangeVariant:
        return RangeVariant(sample_size=self.sample_size, num_masks=self.num_masks, seed=self.seed)

    def columns(self) -> tuple[str, ...]:
        return tuple(self.name if m == "offline" else f"{self.name}_online" for m in self.modes)

    def needs(self) -> tuple[Need, ...]:
        v = self.variant
        return (Need(variant=v), *(Need(model=m, variant=v) for m in self.models))

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        attack = self._with_membership(samples, run)
        texts = run.references.population if run.references is not None else ()
        if texts:
            if run.requests is None:
                raise ConfigError("ramia: population texts need the run's request client")
            rows = [
                tuple(float(v) for v in self.signal_array(run.requests.token_stats(role, texts)))
                for role in ("target", *self.models)
            ]
            attack = replace(attack, z_signals=tuple(rows))
        return Preparation(attack=attack)

    def _range_values(self, signals: SignalSet) -> tuple[np.ndarray, np.ndarray]:
        """Target (n, S) and reference (K, n, S) signals of every range sample."""

        def of(need: Need) -> np.ndarray:
            rows = signals.variants(need)
            return np.array([self.signal_array(list(r)) for r in rows], dtype=np.float64)

        v = self.variant
        return of(Need(variant=v)), np.stack([of(Need(model=m, variant=v)) for m in self.models])

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        target, refs = self._range_values(signals)
        n, size = target.shape
        member = self.member_matrix(signals.texts)  # (K, n), the centres'
        flat_m = np.repeat(member, size, axis=1)
        flat_r = refs.reshape(len(self.models), n * size)
        if self.z_signals is None:  # the candidates' range samples are the population
            z = (target.ravel(), flat_r, flat_m)
        else:
            zs = np.array(self.z_signals, dtype=np.float64)
            z = (zs[0], zs[1:], np.full(zs[1:].shape, OUT, dtype=np.int8))
        out = {}
        for mode, column in zip(self.modes, self.columns(), strict=True):
            offline = mode == "offline"
            a, trim = self._choices(flat_r, flat_m, z, member, size, offline)
            s = rmia_scores(
                target.ravel(),
                flat_r,
                flat_m,
                z[0],
                z[1],
                z[2],
                offline=offline,
                a=a,
                gamma=self.gamma,
            )
            out[column] = trimmed_score(s.reshape(n, size), *trim)
        return out

    def _choices(
        self,
        refs: np.ndarray,
        member: np.ndarray,
        z: tuple[np.ndarray, np.ndarray, np.ndarray],
        centres: np.ndarray,
        size: int,
        offline: bool,
    ) -> tuple[float, tuple[str, int]]:
        """The a (offline) and the trim, fixed or tuned on a reference model as the target."""
        fixed = _parse_trim(self.trim, size)
        a = float(self.a) if self.a != "auto" else 0.0
        if fixed is not None and (self.a != "auto" or not offline):
            return a, fixed
        both = [i for i, row in enumerate(centres) if (row == IN).any() and (row == OUT).any()]
        if not both:
            raise ConfigError(
                "ramia: tuning needs a reference model that is IN for some candidates and OUT "
                "for others; fix --param ramia.a=VALUE and --param ramia.trim=none"
            )
        p = both[0]
        rest = [i for i in range(len(self.models)) if i != p]
        zp, zr, zm = z[1][p], z[1][rest], z[2][rest]
        if offline and self.a == "auto":
            a, _ = tune_offline_a(
                refs[p],
                refs[rest],
                member[rest],
                zp,
                zr,
                zm,
                member[p],
                gamma=self.gamma,
                grid=A_GRID,
            )
        if fixed is not None:
            return a, fixed
        pseudo = rmia_scores(
            refs[p], refs[rest], member[rest], zp, zr, zm, offline=offline, a=a, gamma=self.gamma
        )
        side, k, _ = tune_trim(pseudo.reshape(-1, size), centres[p])
        return a, (side, k)
