"""DUCI, dataset usage cardinality inference (Tao et al. 2025, "How Much of My Dataset Did You
Use? Quantitative Data Usage Inference in Machine Learning", ICLR 2025; Privacy Meter's
``modules/duci``): *what fraction* of a document set was trained on, with an interval.
It complements dataset inference (:mod:`imprint.documents.dataset_inference`), which asks yes
or no.

Per document i a membership guess m_i = 1[score_i >= tau] from an MIA's score (higher = member),
debiased by the MIA's error rates measured on reference models whose membership is known
(Section 4, the debiasing estimator; Privacy Meter ``DUCI.debias_pred``):

    p_i = (m_i - FPR) / (TPR - FPR),        p = (1/n) sum_i p_i

TPR and FPR are those of the threshold tau that maximises TPR - FPR over the reference models'
own scores, each reference model attacked by the others, pooled; the target is attacked by the
same sets of reference models (:func:`matched_scores`: a game's pairs are left out together),
so the calibration's attacks are the target's. The MIA is
RMIA offline (:mod:`imprint.attacks.rmia`) against population texts no model trained on (not
the document set itself: RMIA's score is relative to its population, so a population of the
documents would cancel the very shift DUCI measures), its a
tuned on the reference models as ``rmia a=auto`` does and reused for every reference attack, as
Privacy Meter reuses it. Scores are per document: a document's sequences are averaged first
(:func:`per_document`), since a document is what was or was not trained on.

Interval: two parts. (1) A two-way percentile bootstrap (1,000 resamples, seeded; documents
and models are crossed, as in Owen 2007, "The pigeonhole bootstrap"): each resample draws the
documents with replacement (a document's sequences travel together) and the K reference models
with replacement, and recomputes tau, TPR, FPR from the drawn ones and p from the target's
guesses on the drawn documents; this is how well the pool's mean error rates are known. (2)
The target is one more training run, whose own TPR and FPR differ from the pool's mean as each
reference model's do, which no resampling of the references shows; so each side is widened to
sqrt(w^2 + M^2), w the side's percentile half-width and M how far one new model's rates can put
the estimate on that side (:func:`_model_reach`: a prediction limit, Student's t with K' - 1
df, for the reference models' rates p TPR_j + (1 - p) FPR_j on the probit scale, over TPR -
FPR), M taken at the bound p itself (a test inversion over a grid). Privacy Meter's
``DUCI.debias_pred`` returns the point estimate only (its ``pred_proportions`` judges it by the
absolute error over trained targets); the interval is imprint's.
Resamples whose drawn TPR <= FPR have no estimate: they are counted (``degenerate_share``) and
left out of the percentiles, and above 5 % the result is flagged unreliable (``reliable``).
Coverage, measured by simulation (:mod:`imprint.calibration.duci`, ``python
benchmarks/bench_calibration.py --only duci``: 60 documents, every model, the target too,
attackable to its own degree, reference models in complementary pairs, 300 data sets a row):
0.97-1.00 at p = 0 / 0.5 / 0.75 / 1 with K = 4 and 8 and with a strong signal; the widening
before issue 37 (the between-model sd at the *estimate*, symmetric, the normal quantile)
covered 0.88 at p = 1, K = 4, misses all above the interval (a target that learnt less than
the references reads low, where that sd is small; TPRs near 1 spread downward). The price is
width (mean 1.83 at p = 1, K = 4, was 1.32): with 4 reference models one more training run is
that uncertain. p is not clipped to [0, 1]: the estimator is unbiased only unclipped; the
interval is cut to [0, 1] (the truth lies there, so no coverage is lost; the widths above are
before the cut, docs/calibration.md gives them after it).
An interval wholly above 1 (or below 0) is not a finding but a misfit: the target separates
its documents more (less) than any reference model does, so their error rates do not calibrate
it; cut, it would be the one point [1, 1] beside an estimate of, say, 1.8. It is kept as
``uncut_interval``, ``out_of_range`` says which side, and the result is not ``reliable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from imprint.documents.doc_metrics import bootstrap_counts
from imprint.errors import DataError
from imprint.training_manifest import IN, OUT

__all__ = [
    "DEVIATIONS",
    "DuciResult",
    "debias",
    "duci",
    "duci_from_models",
    "duci_from_signals",
    "matched_scores",
    "mean_loglik",
    "model_spread",
    "per_document",
    "youden_threshold",
]

DEVIATIONS = (
    "A guess is score >= tau, the side the threshold's TPR and FPR count; Privacy Meter takes "
    "score > tau with the TPR and FPR of >= (sklearn's roc_curve), which differ at tied scores "
    "(RMIA's are fractions: ties are common).",
    "The interval (a two-way bootstrap over documents and reference models, widened by the "
    "references' between-model spread) is imprint's; Privacy Meter reports the point estimate "
    "only.",
    "a is tuned once on the reference models (one playing the target, attacked by the others), "
    "not on the target's paired model.",
    "The target and each reference model are attacked by the same reference sets (a pair left "
    "out at a time, guesses averaged over the target's attacks); Privacy Meter attacks the "
    "target with all its references and each reference with the others, one fewer.",
    "The authors' text code (YnezT0311/project_dataset_usage_inference, text_code/modules/duci, "
    "GPT-2 on BookMIA) scores each sentence by the model's own 1/perplexity (its RMIA runs "
    "unnormalised, no reference models or population in the score); imprint scores each "
    "document by offline RMIA against population texts, as Privacy Meter's DUCI, so a text's "
    "own difficulty is divided out and the references' TPR and FPR transfer to the target.",
    "The authors' text code picks a 'robust' threshold (the mean threshold over the longest "
    "run of the top 5 % of TPR - FPR values, its TPR and FPR recomputed there); imprint takes "
    "the argmax of TPR - FPR, as Privacy Meter, the rule the interval's bootstrap repeats.",
    "The authors' text code clips the estimate to [0, 1]; imprint does not: the debiased mean "
    "is unbiased only unclipped; its interval is cut to [0, 1], where the truth lies, which "
    "loses no coverage.",
)


MAX_DEGENERATE_SHARE = 0.05


@dataclass(frozen=True)
class DuciResult:
    """The estimated fraction of the documents trained on, with its interval."""

    estimate: float
    interval: tuple[float, float]
    confidence: float
    threshold: float
    tpr: float
    fpr: float
    naive: float  # the share of documents guessed member, not debiased
    n_documents: int
    n_bootstrap: int
    per_document: np.ndarray = field(repr=False)
    # share of resamples whose drawn TPR <= FPR (no estimate: left out of the percentiles);
    # above MAX_DEGENERATE_SHARE, or with no between-model spread, the interval is unreliable
    degenerate_share: float = 0.0
    reliable: bool = True
    model_spread: float = float("nan")  # one model's sd in estimate units (model_spread)
    # the interval before its cut to [0, 1]; wholly outside [0, 1] the references do not
    # calibrate the target (it learnt more, or less, than any of them) and the cut would leave
    # one point, read as certainty: ``reliable`` is then False and ``out_of_range`` says which
    uncut_interval: tuple[float, float] = (float("nan"), float("nan"))
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def out_of_range(self) -> str | None:
        """Which side ("above" 1 or "below" 0) the uncut interval lies wholly on, else None."""
        lo, hi = self.uncut_interval
        return "above" if lo > 1.0 else "below" if hi < 0.0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "interval": list(self.interval),
            "confidence": self.confidence,
            "threshold": self.threshold,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "naive": self.naive,
            "n_documents": self.n_documents,
            "n_bootstrap": self.n_bootstrap,
            "degenerate_share": self.degenerate_share,
            "reliable": self.reliable,
            "model_spread": self.model_spread,
            "uncut_interval": list(self.uncut_interval),
            "out_of_range": self.out_of_range,
            **self.extra,
        }


def per_document(values: np.ndarray, documents: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Mean of ``values`` (..., n_sequences) per document (the last axis grouped by the
    document id of each sequence); returns (document ids in first-seen order, (..., n_docs))."""
    ids = list(dict.fromkeys(documents))
    index = {d: i for i, d in enumerate(ids)}
    col = np.array([index[d] for d in documents])
    values = np.asarray(values, dtype=np.float64)
    onehot = np.zeros((col.size, len(ids)))
    onehot[np.arange(col.size), col] = 1.0
    return ids, (values @ onehot) / onehot.sum(axis=0)


def youden_threshold(
    scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tau maximising TPR - FPR (guess = score >= tau), with its TPR and FPR.

    ``scores`` and ``labels`` (m,) (1 member, 0 not); ``weights`` (B, m) gives B weighted
    versions at once (bootstrap counts), None one unweighted. On ties in TPR - FPR the highest
    tau wins (sklearn's roc_curve order, as Privacy Meter's argmax). Returns arrays (B,)."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order].astype(np.float64)
    w = np.ones((1, s.size)) if weights is None else np.asarray(weights, np.float64)[:, order]
    pos = np.cumsum(w * y, axis=1)
    neg = np.cumsum(w * (1.0 - y), axis=1)
    last = np.r_[s[1:] != s[:-1], True]  # the last of each run of equal scores
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = pos[:, last] / pos[:, -1:]
        fpr = neg[:, last] / neg[:, -1:]
    best = np.argmax(np.nan_to_num(tpr - fpr, nan=-np.inf), axis=1)
    rows = np.arange(w.shape[0])
    return s[last][best], tpr[rows, best], fpr[rows, best]


def debias(
    target: np.ndarray, ref_scores: np.ndarray, ref_member: np.ndarray
) -> tuple[np.ndarray, float, float, float]:
    """Per document p_i = (1[target_i >= tau] - FPR) / (TPR - FPR), tau/TPR/FPR from the
    pooled reference scores (K, n) and memberships (1 IN, 0 OUT, others left out). ``target``
    (n,) or (J, n): J attacks of the target, whose guesses are averaged per document."""
    known = (ref_member == IN) | (ref_member == OUT)
    thr, tpr, fpr = youden_threshold(ref_scores[known], (ref_member[known] == IN).astype(int))
    if not tpr[0] > fpr[0]:
        raise DataError(
            "duci: the MIA does not separate the reference models' members from their "
            "non-members (best TPR - FPR is 0), so no fraction can be debiased from it; use "
            "more reference models, or a target and references trained harder"
        )
    guesses = (np.atleast_2d(target) >= thr[0]).mean(axis=0)  # rows: attacks of the target
    return (guesses - fpr[0]) / (tpr[0] - fpr[0]), float(thr[0]), float(tpr[0]), float(fpr[0])


def duci(
    target: np.ndarray,
    ref_scores: np.ndarray,
    ref_member: np.ndarray,
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> DuciResult:
    """DUCI from per-document MIA scores: the target's (n,) (or (J, n), J attacks of it), each
    reference model's (K, n) (attacked without itself) and their memberships (K, n). See the
    module docstring."""
    target = np.atleast_2d(np.asarray(target, dtype=np.float64))
    ref_scores = np.asarray(ref_scores, dtype=np.float64)
    ref_member = np.asarray(ref_member)
    n = target.shape[1]
    if (
        n < 2
        or ref_scores.ndim != 2
        or ref_scores.shape[0] < 2
        or ref_scores.shape != (ref_scores.shape[0], n)
        or ref_member.shape != ref_scores.shape
    ):
        raise DataError(
            f"duci needs >= 2 documents and reference scores/memberships of shape (K >= 2, {n}); "
            "got "
            f"{ref_scores.shape} and {ref_member.shape}"
        )
    if not (np.isfinite(target).all() and np.isfinite(ref_scores).all()):
        raise DataError("duci: a document has no finite score (drop it, or give it a signal)")
    p_i, thr, tpr, fpr = debias(target, ref_scores, ref_member)
    estimate = float(p_i.mean())
    boot = _two_way_bootstrap(target, ref_scores, ref_member, n_bootstrap, seed)
    finite = boot[np.isfinite(boot)]
    share = 1.0 - finite.size / n_bootstrap  # resamples with TPR <= FPR: counted, not hidden
    rates = _model_rates(ref_scores, ref_member, thr)
    spread = _spread(rates, tpr - fpr, np.array([estimate]))[0]
    uncut = _widened_interval(estimate, finite, confidence, rates, tpr - fpr)
    # the fraction lies in [0, 1]: cutting the interval there loses no coverage and keeps a
    # side that one more model's spread pushed past the range from reading as information
    lo, hi = (float(np.clip(v, 0.0, 1.0)) for v in uncut)
    inside = not (uncut[0] > 1.0 or uncut[1] < 0.0)  # else the cut leaves one point
    return DuciResult(
        estimate=estimate,
        interval=(float(lo), float(hi)),
        confidence=confidence,
        threshold=thr,
        tpr=tpr,
        fpr=fpr,
        naive=float((target >= thr).mean()),  # over attacks and documents
        n_documents=n,
        n_bootstrap=n_bootstrap,
        per_document=p_i,
        degenerate_share=share,
        reliable=bool(share <= MAX_DEGENERATE_SHARE and np.isfinite(spread) and inside),
        model_spread=spread,
        uncut_interval=(float(uncut[0]), float(uncut[1])),
    )


def _widened_interval(
    estimate: float, boot: np.ndarray, confidence: float, rates: np.ndarray, gap: float
) -> tuple[float, float]:
    """The percentile interval of ``boot`` (document and reference-pool noise) with each side
    widened about the estimate to sqrt(w^2 + M(p)^2): w the side's percentile half-width, M(p)
    one new model's error on that side at the bound p itself (:func:`_model_reach`). A bound
    is the furthest p on a fine grid whose distance from the estimate its side covers (a test
    inversion). This replaces a widening that under-covered at high fractions, misses all
    above the interval (0.88 at p = 1, K = 4): it took the between-model sd at the *estimate*
    (it grows with p, and a target that learnt less than the references reads low, where it
    is small), symmetric (TPRs near 1 spread downward: a target can fall far below the pool,
    hardly above) and with the normal quantile for an sd from K models."""
    if boot.size < 2 or rates.shape[1] < 2:  # no between-model spread: flagged unreliable
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2
    q_lo, q_hi = np.quantile(boot, [alpha, 1 - alpha])
    bounds = []
    for side, half in ((1.0, max(q_hi - estimate, 0.0)), (-1.0, max(estimate - q_lo, 0.0))):
        widest = half + float(np.max(_model_reach(rates, gap, np.linspace(0, 1, 101), side, alpha)))
        p = estimate + side * np.linspace(0.0, widest, 2001)
        reach = np.sqrt(half**2 + _model_reach(rates, gap, p, side, alpha) ** 2)
        bounds.append(p[np.abs(p - estimate) <= reach + 1e-12][-1])
    return float(bounds[1]), float(bounds[0])


def _model_reach(
    rates: np.ndarray, gap: float, p: np.ndarray, side: float, alpha: float
) -> np.ndarray:
    """How far one new training run's error can put the estimate from a truth p on ``side``
    (+1: truth above the estimate, the target's rate below the pool's), in estimate units: the
    reference models' rates r_j = p TPR_j + (1 - p) FPR_j at tau, on the probit scale (where
    a Gaussian score's shift acts linearly), give a prediction limit Phi(mu -+ t s) for one
    more model (Student's t with K' - 1 df: s is estimated from K' models); the reach is its
    distance from the mean rate, over TPR - FPR. Rates are kept half a count off 0 and 1."""
    from scipy.stats import norm
    from scipy.stats import t as student

    q = np.clip(p, 0.0, 1.0)[:, None]
    r = q * rates[0] + (1 - q) * rates[1]
    z = norm.ppf(np.clip(r, 0.5 / rates[2], 1 - 0.5 / rates[2]))
    t = student.ppf(1 - alpha, rates.shape[1] - 1)
    limit = norm.cdf(z.mean(1) - side * t * z.std(1, ddof=1))
    return side * (r.mean(1) - limit) / gap


def _two_way_bootstrap(
    target: np.ndarray, ref_scores: np.ndarray, ref_member: np.ndarray, n_boot: int, seed: int
) -> np.ndarray:
    """Resampled estimates (B,), NaN where the drawn TPR <= FPR: each resample draws the
    documents and the K reference models with replacement (a crossed design: Owen 2007, "The
    pigeonhole bootstrap") and recomputes tau, TPR, FPR and the estimate from the drawn ones."""
    rng = np.random.default_rng(seed)
    k, n = ref_scores.shape
    counts = bootstrap_counts((np.arange(n),), n_boot, n, rng).astype(np.float64)  # (B, n)
    model_w = np.zeros((n_boot, k))
    np.add.at(model_w, (np.arange(n_boot)[:, None], rng.integers(0, k, size=(n_boot, k))), 1.0)
    known = (ref_member == IN) | (ref_member == OUT)
    # an entry's weight: its document's draws times its model's (a model's documents together)
    pooled_w = (model_w[:, :, None] * counts[:, None, :]).reshape(n_boot, k * n)[:, known.ravel()]
    b_thr, b_tpr, b_fpr = youden_threshold(
        ref_scores[known], (ref_member[known] == IN).astype(int), pooled_w
    )
    guesses = (target[None, :, :] >= b_thr[:, None, None]).mean(axis=1)  # (B, n)
    naive = (counts * guesses).sum(1) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b_tpr > b_fpr, (naive - b_fpr) / (b_tpr - b_fpr), np.nan)


def model_spread(
    ref_scores: np.ndarray, ref_member: np.ndarray, thr: float, tpr: float, fpr: float, p: float
) -> float:
    """The between-model sd of the error an estimate at fraction p would have from one model's
    own error rates, in estimate units: the sample sd over the reference models j (those with
    members and non-members) of p TPR_j + (1 - p) FPR_j at tau, over TPR - FPR. A target is one
    more training run, whose rates differ from the pool's as each reference model's do. NaN
    with fewer than 2 such models."""
    rates = _model_rates(ref_scores, ref_member, thr)
    return float(_spread(rates, tpr - fpr, np.array([p]))[0])


def _model_rates(ref_scores: np.ndarray, ref_member: np.ndarray, thr: float) -> np.ndarray:
    """Each reference model's TPR_j, FPR_j at tau and the smaller of its member and non-member
    counts, (3, K') over the K' models with members and non-members."""
    is_in, is_out = ref_member == IN, ref_member == OUT
    usable = is_in.any(axis=1) & is_out.any(axis=1)
    hit = ref_scores[usable] >= thr
    n_in, n_out = is_in[usable].sum(1), is_out[usable].sum(1)
    tpr_j = (hit & is_in[usable]).sum(1) / n_in
    fpr_j = (hit & is_out[usable]).sum(1) / n_out
    return np.stack([tpr_j, fpr_j, np.minimum(n_in, n_out)])


def _spread(rates: np.ndarray, gap: float, p: np.ndarray) -> np.ndarray:
    """:func:`model_spread` at each fraction of ``p`` (clipped to [0, 1]); NaN with < 2 models."""
    if rates.shape[1] < 2:
        return np.full(p.shape, np.nan)
    q = np.clip(p, 0.0, 1.0)[:, None]
    return np.std(q * rates[0] + (1 - q) * rates[1], axis=1, ddof=1) / gap


def _held_out_groups(member: np.ndarray) -> list[list[int]]:
    """Groups of reference models left out together: a game's pairs (models 2j and 2j + 1
    trained on complementary halves) when the memberships show them, else each model alone."""
    k = member.shape[0]
    pairs = k % 2 == 0 and all(
        ((member[2 * j] == IN) == (member[2 * j + 1] == OUT)).all() for j in range(k // 2)
    )
    return [[2 * j, 2 * j + 1] for j in range(k // 2)] if pairs else [[i] for i in range(k)]


def matched_scores(
    target: np.ndarray,
    refs: np.ndarray,
    member: np.ndarray,
    z_target: np.ndarray,
    z_refs: np.ndarray,
    *,
    a: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Offline RMIA scores against population texts z that no model trained on. For each group
    g of reference models (:func:`_held_out_groups`: a pair, or one model) the models of g are
    attacked by the models outside g, and so is the target (one row per group): every attack,
    of the target or of a reference model, then has the same references, so the error rates
    measured on the reference models are those of the target's attack. (Attacking the target
    with all K models but each reference model with K - 1 would give the target's attack more
    OUT models per document than the calibration had, and bias the debiased estimate.)
    Returns the target's scores (G, n) and each reference model's (K, n)."""
    from imprint.attacks.rmia import rmia_scores

    k = refs.shape[0]
    z_out = np.full(z_refs.shape, OUT, dtype=np.int8)
    on_target, on_refs = [], np.full(refs.shape, np.nan)

    def attack(x: np.ndarray, zx: np.ndarray, rest: list[int]) -> np.ndarray:
        r, m = refs[rest], member[rest]
        return rmia_scores(x, r, m, zx, z_refs[rest], z_out[rest], offline=True, a=a)

    for group in _held_out_groups(member):
        rest = [j for j in range(k) if j not in group]
        on_target.append(attack(target, z_target, rest))
        for i in group:
            on_refs[i] = attack(refs[i], z_refs[i], rest)
    return np.stack(on_target), on_refs


def duci_from_signals(
    target: np.ndarray,
    refs: np.ndarray,
    member: np.ndarray,
    z_target: np.ndarray,
    z_refs: np.ndarray,
    *,
    a: float | str = "auto",
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> DuciResult:
    """DUCI from per-document signals (mean token log-likelihood) under the target (n,) and K
    reference models (K, n) with their memberships (K, n), and the signals of population
    texts no model trained on (``z_target`` (m,), ``z_refs`` (K, m)); ``a="auto"`` tunes RMIA's
    offline a on the reference models (the first with IN and OUT documents plays the
    target)."""
    from imprint.attacks.rmia import tune_offline_a

    target, refs, member = (np.asarray(v) for v in (target, refs, member))
    z_target, z_refs = np.asarray(z_target, np.float64), np.asarray(z_refs, np.float64)
    if refs.shape[0] < 3:
        raise DataError(
            "duci needs at least 3 reference models, or 2 pairs (each attacked by the others)"
        )
    if a == "auto":
        both = [i for i, row in enumerate(member) if (row == IN).any() and (row == OUT).any()]
        if not both:
            raise DataError("duci: no reference model has both member and non-member documents")
        p = both[0]
        rest = [j for j in range(refs.shape[0]) if j != p]
        z_out = np.full(z_refs[rest].shape, OUT, dtype=np.int8)
        a, _ = tune_offline_a(
            refs[p], refs[rest], member[rest], z_refs[p], z_refs[rest], z_out, member[p]
        )
    on_target, on_refs = matched_scores(target, refs, member, z_target, z_refs, a=float(a))
    usable = np.isfinite(on_refs).all(axis=0) & np.isfinite(on_target).all(axis=0)
    if not usable.all():  # a document no other model is OUT for has no offline score
        raise DataError(
            f"duci: {int((~usable).sum())} document(s) have no reference model OUT for them "
            "among the others; use more reference models (K >= 4, in pairs)"
        )
    result = duci(
        on_target, on_refs, member, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed
    )
    return DuciResult(**{**result.__dict__, "extra": {"a": float(a)}})


def mean_loglik(requests: Any, role: str, texts: Sequence[str]) -> np.ndarray:
    """Each text's mean token log-likelihood under the model in ``role`` (the log-prob pass:
    batched and stored like every request)."""
    return np.array([float(np.mean(s.logp)) for s in requests.token_stats(role, texts)])


def duci_from_models(
    requests: Any,
    roles: Sequence[str],
    member: np.ndarray,
    texts: Sequence[str],
    documents: Sequence[str],
    population: Sequence[str],
    **options: Any,
) -> DuciResult:
    """DUCI of the model in role ``target`` over ``texts`` (a sequence each, grouped into
    documents by ``documents``, the document id of each), with the reference models in
    ``roles`` and their per-document memberships ``member`` (K, n_documents); ``population``:
    texts none of the models trained on. ``options`` go to :func:`duci_from_signals`."""
    if len(population) < 2:
        raise DataError(
            "duci needs population texts that no model trained on (RMIA's comparison texts): "
            "give >= 2 (the training manifest's 'population', or --population FILE)"
        )
    _, target = per_document(mean_loglik(requests, "target", texts), documents)
    _, refs = per_document(np.stack([mean_loglik(requests, r, texts) for r in roles]), documents)
    z_target = mean_loglik(requests, "target", population)
    z_refs = np.stack([mean_loglik(requests, r, population) for r in roles])
    return duci_from_signals(target, refs, member, z_target, z_refs, **options)
