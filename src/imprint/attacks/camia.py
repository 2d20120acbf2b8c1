"""CAMIA, context-aware membership inference (Chang et al. 2024, arXiv 2409.13745; EMNLP 2025).

A member's per-token loss trajectory differs from a non-member's in shape, not only in mean: it
falls faster with context (slope), it reacts less when the text is repeated (repeated-prefix
deltas: in-context copying lowers a non-member's loss more), it is less complex (Lempel-Ziv) and
spends fewer tokens above fixed loss levels (count-below). Section 3 of the paper defines these
signals on the loss sequence l_t = -log p(x_t | x_<t); Section 3.3 combines them by empirical
p-values against non-member texts.

Features (per text; the names and defaults are those of LeakPro's CAMIA branch,
``leakpro/attacks/mia_attacks/camia.py``, ``SignalConfig``), with l the text's loss sequence and
r1, r2 the losses of the last copy of the text repeated twice and three times (joined by one
space; ``repeats=leakpro``: LeakPro's sequences, see :func:`camia_features`):

- ``{cut,cal,ppl,calppl}_{T,200,300}``: mean loss of the first T' tokens (T = all), divided by the
  token diversity (distinct / all tokens), exp of it, and both; each with ``_rep{1,2}_diff`` =
  value(x) - value(the copy, cut alike).
- ``cb_const{2.5,3.0,3.5}``: share of the first 200 losses above the constant; with repeat deltas.
- ``cbm_{T,200,300}``: share above the text's own mean loss (with repeat deltas); ``cbpm_*``:
  share of tokens above the mean of the losses before them.
- ``lz_bins{16,32}``: Lempel-Ziv phrase count of the first 200 losses binned into equal-width
  bins; repeat deltas as value(repeated) - value(x).
- ``slope_{256,512}``: minus the least-squares slope of l over position (the sequence repeated
  cyclically to the length when shorter); ``apen_256``: minus the approximate entropy (m = 8,
  r = 0.8); these three on the upper tail (members higher), every other feature on the lower.

Combination (LeakPro's ``Combiner``): for each feature, the empirical p-value of x among the
reference non-members' values, here the conformal lower tail p = (1 + #{ref <= x}) / (n + 1),
upper tail p = (1 + #{ref >= x}) / (n + 1) (LeakPro: #{ref <= x} / (n + 1), 0 below every
reference, and (n - #{ref <= x} + 1) / (n + 1); ``p_rule=leakpro``), clipped to
[1e-5, 1 - 1e-5]; Fisher's statistic
sum_k -2 log p_k (default) or Edgington / Pearson / George. Small p-values = unlike the
non-members on the member side, so the Fisher statistic is higher for members. The reference
non-members come from the run's ``nonmembers`` pool, else they are drawn (seeded) from the
natural evaluation non-members and leave the evaluation of every attack, as ReCaLL's shots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, ScoringInputs, register
from imprint.attacks.contract import prepared_field
from imprint.attacks.shots import nonmember_shots, too_few_held_out
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.requests.logprobs import LogprobRequest
from imprint.requests.plan import AttackCalls
from imprint.signals.needs import Need, SignalSet, TextVariant

__all__ = [
    "CAMIA",
    "Repeat",
    "approximate_entropy",
    "camia_features",
    "combine",
    "combined_p_values",
    "count_below_prev_mean",
    "lz_complexity",
    "p_values",
    "slope",
]

CUTS: dict[str, int | None] = {"T": None, "200": 200, "300": 300}
CB_TAUS = (2.5, 3.0, 3.5)
LZ_BINS = (16, 32)
SLOPE_LENGTHS = (256, 512)
APEN_LENGTHS = (256,)
#: tails on which a feature's value is member-like: "lower" unless named here
HIGHER = frozenset([*(f"slope_{n}" for n in SLOPE_LENGTHS), *(f"apen_{n}" for n in APEN_LENGTHS)])
METHODS = ("fisher", "edgington", "pearson", "george")
P_RULES = ("conformal", "leakpro")
REPEATS = ("copy", "leakpro")
CLIP = 1e-5


@dataclass(frozen=True)
class Repeat(TextVariant):
    """The text repeated 2 and 3 times, joined by one space (CAMIA's repeated prefixes)."""

    name: str = "repeat"
    copies: tuple[int, ...] = (2, 3)

    def apply(self, text: str) -> tuple[str, ...]:
        return tuple(" ".join([text] * c) for c in self.copies)


REPEAT = Repeat()


# -- primitive signals (l: losses, shape (T,)) ----------------------------------------------------


def _cyclic(seq: np.ndarray, length: int) -> np.ndarray:
    """``seq`` repeated from its start until ``length`` values, then cut to ``length``."""
    if len(seq) == 0 or len(seq) >= length:
        return seq[:length]
    return np.resize(seq, length)


def slope(losses: np.ndarray, length: int) -> float:
    """Least-squares slope of the (cyclically extended) first ``length`` losses over position."""
    y = _cyclic(np.asarray(losses, np.float64), length)
    if len(y) == 0:
        return 0.0
    x = np.arange(len(y), dtype=np.float64)
    var = np.mean((x - x.mean()) ** 2)
    return 0.0 if var == 0 else float(np.mean((x - x.mean()) * (y - y.mean())) / var)


def approximate_entropy(losses: np.ndarray, length: int, m: int = 8, r: float = 0.8) -> float:
    """ApEn(m, r) = phi(m) - phi(m + 1), phi(k) = mean_i log C_i(k) with C_i the share of length-k
    windows within Chebyshev distance r of window i (+1e-12 inside the log), on the cyclically
    extended first ``length`` losses; 0 when fewer than m + 2 values."""
    vals = _cyclic(np.asarray(losses, np.float64), length)
    if len(vals) < m + 2:
        return 0.0

    def phi(k: int) -> float:
        n = len(vals) - k + 1
        windows = np.lib.stride_tricks.sliding_window_view(vals, k)
        dist = np.max(np.abs(windows[:, None, :] - windows[None, :, :]), axis=2)
        share = np.sum(dist <= r, axis=0) / n
        return float(np.mean(np.log(share + 1e-12)))

    return phi(m) - phi(m + 1)


def lz_complexity(losses: np.ndarray, bins: int) -> float:
    """Lempel-Ziv phrase count of ``losses`` cut into ``bins`` equal-width bins between their
    minimum and maximum (1.0 for a constant sequence, 0.0 for an empty one): starting with one
    phrase, each step extends the current phrase while it occurs in the text before it."""
    arr = np.asarray(losses, np.float64)
    if arr.size == 0:
        return 0.0
    lo, hi = float(arr.min()), float(arr.max())
    if hi - lo < 1e-12:
        return 1.0
    edges = np.linspace(lo, hi + 1e-9, bins)
    symbols = "".join(chr(65 + int(np.digitize(v, edges))) for v in arr)
    i, count = 0, 1
    while i < len(symbols) - 1:
        width = 1
        while symbols[i : i + width] in symbols[:i] and i + width < len(symbols):
            width += 1
        i += width
        count += 1
    return float(count)


def count_below_prev_mean(losses: np.ndarray) -> float:
    """Share of tokens t >= 2 whose loss is <= the mean of the losses before it."""
    arr = np.asarray(losses, np.float64)
    if len(arr) <= 1:
        return 0.0
    prev_mean = np.cumsum(arr)[:-1] / np.arange(1, len(arr))
    return float(np.mean(arr[1:] <= prev_mean))


def _count_below(losses: np.ndarray, threshold: float) -> float:
    return float(np.mean(losses <= threshold)) if len(losses) else 0.0


def _diversity(token_ids: np.ndarray) -> float:
    return len(set(token_ids.tolist())) / len(token_ids) if len(token_ids) else 0.0


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else 0.0


def _diff(a: float, b: float) -> float:
    return a - b if math.isfinite(a) and math.isfinite(b) else 0.0


# -- features -------------------------------------------------------------------------------------


def last_copy(rep: np.ndarray, n: int, copies: int) -> np.ndarray:
    """The losses of the last copy of a text of ``n`` tokens repeated ``copies`` times: the
    last (len(rep) - n) // (copies - 1) losses (the first copy's tokens are the text's own)."""
    seg = (len(rep) - n) // (copies - 1)
    return rep[len(rep) - seg :] if seg > 0 else rep[n:]


def camia_features(
    losses: np.ndarray,
    token_ids: np.ndarray,
    rep1: np.ndarray,
    rep2: np.ndarray,
    *,
    repeats: str = "copy",
) -> dict[str, float]:
    """CAMIA's features of one text from its losses (T,), token ids (T,) and the losses of the
    text repeated twice (rep1) and three times (rep2); see the module docstring. ``repeats``:
    "copy" compares each feature with the same feature of the repeated text's last copy (cut
    alike); "leakpro" with LeakPro's sequences (the whole repeated text for means and shares
    above the mean, its first 200 losses for counts and Lempel-Ziv: for a text of 200 tokens or
    more those are the text's own losses, so those deltas are 0)."""
    losses, rep1, rep2 = (np.asarray(a, np.float64) for a in (losses, rep1, rep2))
    token_ids = np.asarray(token_ids)
    if repeats == "copy":
        c1, c2 = last_copy(rep1, len(losses), 2), last_copy(rep2, len(losses), 3)

        def reps(cut: int | None) -> tuple[np.ndarray, np.ndarray]:
            return c1[:cut], c2[:cut]

        first = (losses[:200], *reps(200))
    elif repeats == "leakpro":

        def reps(cut: int | None) -> tuple[np.ndarray, np.ndarray]:
            return rep1, rep2

        first = (losses[:200], rep1[:200], rep2[:200])
    else:
        raise ConfigError(f"camia.repeats must be one of {REPEATS}, got {repeats!r}")
    out: dict[str, float] = {}
    posts = {
        "cut": lambda v, d: v,
        "cal": lambda v, d: v / d,
        "ppl": lambda v, d: math.exp(v),
        "calppl": lambda v, d: math.exp(v) / d,
    }
    for tag, cut in CUTS.items():
        div = max(_diversity(token_ids[:cut]), 1e-12)
        vb, vr1, vr2 = (_mean(x) for x in (losses[:cut], *reps(cut)))
        for fam, post in posts.items():
            b, r1, r2 = post(vb, div), post(vr1, div), post(vr2, div)
            out[f"{fam}_{tag}"] = b
            out[f"{fam}_{tag}_rep1_diff"] = _diff(b, r1)
            out[f"{fam}_{tag}_rep2_diff"] = _diff(b, r2)
    for tau in CB_TAUS:
        b, r1, r2 = (1 - _count_below(x, tau) for x in first)
        out[f"cb_const{tau}"] = b
        out[f"cb_const{tau}_rep1_diff"] = _diff(b, r1)
        out[f"cb_const{tau}_rep2_diff"] = _diff(b, r2)
    for tag, cut in CUTS.items():
        seqs = [losses[:cut], *reps(cut)]
        b, r1, r2 = (1 - (_count_below(x, _mean(x)) if len(x) else 0.0) for x in seqs)
        out[f"cbm_{tag}"] = b
        out[f"cbm_{tag}_rep1_diff"] = _diff(b, r1)
        out[f"cbm_{tag}_rep2_diff"] = _diff(b, r2)
        out[f"cbpm_{tag}"] = 1 - count_below_prev_mean(losses[:cut])
    for bins in LZ_BINS:
        b, r1, r2 = (lz_complexity(x, bins) for x in first)
        out[f"lz_bins{bins}"] = b
        out[f"lz_bins{bins}_rep1_diff"] = _diff(r1, b)
        out[f"lz_bins{bins}_rep2_diff"] = _diff(r2, b)
    for n in SLOPE_LENGTHS:
        out[f"slope_{n}"] = -slope(losses, n)
    for n in APEN_LENGTHS:
        out[f"apen_{n}"] = -approximate_entropy(losses, n)
    return out


def feature_matrix(rows: Sequence[dict[str, float]]) -> tuple[list[str], np.ndarray]:
    """(feature names, values of shape (n_texts, n_features)) from per-text feature dicts."""
    names = list(rows[0]) if rows else []
    return names, np.array([[r[k] for k in names] for r in rows], dtype=np.float64)


def p_values(
    values: np.ndarray,
    reference: np.ndarray,
    higher: Sequence[bool],
    *,
    clip: float = CLIP,
    rule: str = "conformal",
) -> np.ndarray:
    """Empirical p-values, shape (n, k), of ``values`` (n, k) among ``reference`` (m, k) on each
    feature's member tail (``higher[k]``: upper tail, else lower), clipped to [clip, 1 - clip];
    non-finite reference values are left out, a non-finite value gets NaN. ``rule``: conformal
    (valid: P(p <= alpha) <= alpha under the null, ties counted against the value) or LeakPro's
    (see :func:`_tail_p`; its lower tail rejects about 1 / (m + 1) too often)."""
    out = np.full(values.shape, np.nan)
    for k in range(values.shape[1]):
        ref = np.sort(reference[np.isfinite(reference[:, k]), k])
        n = ref.size
        col = values[:, k]
        if n == 0:
            out[:, k] = 0.5
            continue
        le = np.searchsorted(ref, col, side="right")
        ge = n - np.searchsorted(ref, col, side="left")
        p = _tail_p(le, ge, n, higher[k], rule)
        out[:, k] = np.where(np.isfinite(col), np.clip(p, clip, 1 - clip), np.nan)
    return out


def _tail_p(le: np.ndarray, ge: np.ndarray, n: int, higher: bool, rule: str) -> np.ndarray:
    """A p-value from the counts of references <= (``le``) and >= (``ge``) the value among
    ``n``: conformal (1 + count on the member tail) / (n + 1), or LeakPro's rule (lower tail
    le / (n + 1), which is 0 below every reference; upper tail (n - le + 1) / (n + 1))."""
    if rule == "conformal":
        return (1 + (ge if higher else le)) / (n + 1)
    return (n - le + 1) / (n + 1) if higher else le / (n + 1)


def combined_p_values(
    values: np.ndarray,
    reference: np.ndarray,
    higher: Sequence[bool],
    method: str = "fisher",
    *,
    rule: str = "conformal",
) -> np.ndarray:
    """The calibrated combined p-value of each row of ``values`` (n, k), shape (n,): the full
    conformal p-value of its combined statistic among the references' (m, k), each reference
    scored against the other m - 1 and the tested row, so the m + 1 statistics are exchangeable
    under the null and P(p <= alpha) <= alpha whatever the correlation of the features
    (Fisher's chi-square law would need independent ones). p = (1 + #{j: S_j >= S_x}) / (m + 1).
    """
    m = reference.shape[0]
    stat = combine(p_values(values, reference, higher, rule=rule), method)
    ref = reference[None, :, :]  # (1, m, k)
    # counts of the other references <= / >= each reference, without itself: (m, k)
    le_ref = np.sum(reference[:, None, :] <= reference[None, :, :], axis=0) - 1
    ge_ref = np.sum(reference[:, None, :] >= reference[None, :, :], axis=0) - 1
    le = le_ref[None] + (values[:, None, :] <= ref)  # (n, m, k): the tested row joins them
    ge = ge_ref[None] + (values[:, None, :] >= ref)
    tails = np.asarray(higher, bool)[None, None, :]
    p_ref = np.where(tails, _tail_p(le, ge, m, True, rule), _tail_p(le, ge, m, False, rule))
    p_ref = np.where(np.isfinite(ref), np.clip(p_ref, CLIP, 1 - CLIP), np.nan)
    ref_stat = combine(p_ref.reshape(-1, p_ref.shape[-1]), method).reshape(p_ref.shape[:2])
    return (1 + np.sum(ref_stat >= stat[:, None] - 1e-12, axis=1)) / (m + 1)


def combine(p: np.ndarray, method: str = "fisher") -> np.ndarray:
    """One score per row of p-values (n, k), higher = member: Fisher sum -2 log p, Pearson
    sum 2 log(1 - p), Edgington -sum p, George -sum logit p (NaN entries left out)."""
    if method == "fisher":
        terms = -2.0 * np.log(p)
    elif method == "pearson":
        terms = 2.0 * np.log1p(-p)
    elif method == "edgington":
        terms = -p
    elif method == "george":
        terms = -np.log(p / (1.0 - p))
    else:
        raise ConfigError(f"camia.combine must be one of {METHODS}, got {method!r}")
    return np.nansum(terms, axis=1)


@register("camia")
@dataclass(frozen=True)
class CAMIA(Attack):
    takes_held_out: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # per-token log p only: vLLM serves it
    n_reference: int = 10
    combine: str = "fisher"
    p_rule: str = "conformal"
    repeats: str = "copy"
    _reference: tuple[str, ...] | None = prepared_field()

    summary = (
        "context-aware MIA: loss-trajectory features (slope, repeat deltas, Lempel-Ziv, "
        "count-below) combined by Fisher over p-values against held-out non-members"
    )
    paper = "Chang et al. 2024, Context-Aware Membership Inference Attacks against Pre-trained LLMs"
    deviations: ClassVar[tuple[str, ...]] = (
        "Features follow LeakPro's CAMIA branch, not the authors' code (changhongyan123/"
        "context_aware_mia), which computes slope and ApEn on the text repeated 1 + 5 times cut "
        "at 600/800/1000 tokens (imprint: the text's own losses repeated cyclically, so no "
        "in-context effect), ApEn with r = 0.8 sd(x) and |phi_m - phi_m+1| (imprint: r = 0.8, "
        "signed), counts above 1, 2, 3 nats (imprint: 2.5, 3, 3.5) and Lempel-Ziv on 3/4/5 bins "
        "normalised by length (imprint: 16/32 bins, a phrase count).",
        "The authors orient every feature by the evaluation labels, which imprint never reads: "
        "tails are fixed in advance (LeakPro's run_attack is unfinished).",
        "slope_256/512 and apen_256 use the upper tail: LeakPro negates both ('negative for "
        "members') and then tests every feature on the lower tail, ranking both backwards.",
        "Repeat deltas compare each feature with the same feature of the last copy inside the "
        "text repeated 2x / 3x (as the authors' copy segments); LeakPro takes the whole repeated "
        "text, and its first 200 losses for counts and Lempel-Ziv, which for a text of 200 "
        "tokens or more are the text's own, so those deltas are 0 (repeats=leakpro keeps it).",
        "Per-feature p-values are conformal, (1 + #{ref <= x}) / (n + 1) on the lower tail and "
        "(1 + #{ref >= x}) / (n + 1) on the upper; LeakPro's lower tail #{ref <= x} / (n + 1) is "
        "0 (clipped to 1e-5, a Fisher term of 23) below every reference, so it rejects at alpha "
        "0.05 twice as often as 0.05 with 19 references (p_rule=leakpro restores it).",
        "Edgington, Pearson and George are signed higher = member (LeakPro returns them with the "
        "opposite sign to its Fisher score, so they rank members low).",
        "Reference values stay float64; LeakPro sorts them as float32, so a value tied in "
        "float64 with a reference value (shares, counts) may rank on the other side of it.",
        "Reference: the run's 10 held-out non-members by default (LeakPro: the whole population "
        "data; the authors: 30 % of the non-members, and 30 % of the members left out).",
        "Every token is scored after imprint's start token (LeakPro scores from the second "
        "token); no neighbour delta (LeakPro's nei_k defaults to 0 as well).",
    )

    def __post_init__(self) -> None:
        if self.n_reference < 2:
            raise ConfigError(f"camia.n_reference must be >= 2, got {self.n_reference}")
        if self.combine not in METHODS:
            raise ConfigError(f"camia.combine must be one of {METHODS}, got {self.combine!r}")
        if self.repeats not in REPEATS:
            raise ConfigError(f"camia.repeats must be one of {REPEATS}, got {self.repeats!r}")
        if self.p_rule not in P_RULES:
            raise ConfigError(f"camia.p_rule must be one of {P_RULES}, got {self.p_rule!r}")

    @classmethod
    def unavailable_reason(cls, run: RunContext) -> str | None:
        return too_few_held_out("camia", run, cls.n_reference)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        shots = nonmember_shots(samples, run, self.n_reference, attack="camia")
        return Preparation(
            removed_ids=shots.removed_ids,
            reason=f"camia: {len(shots.samples)} reference non-members from {shots.source}",
            attack=replace(self, _reference=tuple(s.text for s in shots.samples)),
        )

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """The passes of the reference texts and of their repetitions."""
        reference = tuple(self._reference or ())
        rows = [*reference, *(v for t in reference for v in REPEAT.apply(t))]
        return AttackCalls.of([("target", LogprobRequest(t)) for t in rows])

    def needs(self) -> tuple[Need, ...]:
        return (Need(), Need(variant=REPEAT))

    def score(self, inputs: ScoringInputs | SignalSet) -> dict[str, np.ndarray]:
        inputs = ScoringInputs.of(inputs)
        if inputs.signals is None or inputs.requests is None or self._reference is None:
            raise ConfigError(
                "camia scores against reference non-members: call prepare(samples, run) first "
                "and pass ScoringInputs(texts, signals=..., requests=...) (a run does both)"
            )
        base = inputs.signals.get()
        reps = inputs.signals.variants(Need(variant=REPEAT))
        rows = [_features_of(b, r, self.repeats) for b, r in zip(base, reps, strict=True)]
        ref_rows = reference_features(inputs.requests, self._reference, self.repeats)
        return {self.name: camia_scores(rows, ref_rows, method=self.combine, rule=self.p_rule)}


def _features_of(base: Any, reps: Sequence[Any], repeats: str = "copy") -> dict[str, float]:
    return camia_features(
        -np.asarray(base.logp, np.float64),
        np.asarray(base.token_ids),
        -np.asarray(reps[0].logp, np.float64),
        -np.asarray(reps[1].logp, np.float64),
        repeats=repeats,
    )


def reference_features(
    requests: Any, texts: Sequence[str], repeats: str = "copy"
) -> list[dict[str, float]]:
    """Features of the reference non-members, scored through the run's request client."""
    base = requests.token_stats("target", list(texts))
    rep_texts = [t for text in texts for t in REPEAT.apply(text)]
    reps = requests.token_stats("target", rep_texts)
    k = len(REPEAT.copies)
    return [_features_of(b, reps[i * k : (i + 1) * k], repeats) for i, b in enumerate(base)]


def camia_scores(
    rows: Sequence[dict[str, float]],
    reference: Sequence[dict[str, float]],
    *,
    method: str = "fisher",
    higher: frozenset[str] = HIGHER,
    rule: str = "conformal",
) -> np.ndarray:
    """Combined p-value scores of feature dicts ``rows`` against ``reference``, shape (n,)."""
    names, values = feature_matrix(rows)
    _, ref = feature_matrix(reference)
    tails = [n in higher for n in names]
    return combine(p_values(values, ref, tails, rule=rule), method)
