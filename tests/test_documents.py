"""Document- and dataset-level inference: each aggregation against a hand-computed case, the
grouped cross-validation, the dataset test's error rates on synthetic sets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from imprint.data import Sample
from imprint.documents import (
    DOC_ID,
    SEQ_INDEX,
    CurvePoint,
    MeeusSettings,
    SplitConfig,
    aggregate_features,
    dataset_inference,
    document_summary,
    documents_needed,
    fraction_above,
    group_documents,
    histogram_features,
    log_frequencies,
    mean_per_document,
    meeus_scores,
    p_value_curve,
    paired_bootstrap,
    sequence_folds,
    shi_scores,
    split_documents,
    split_text,
    token_values,
    tune_threshold,
    weighted_auc,
    welch_greater,
)
from imprint.errors import ConfigError, DataError
from imprint.metrics import auc, bootstrap_metrics

# -- splitting ---


def test_split_windows_remainder_rules() -> None:
    ten = " ".join(f"w{i}" for i in range(10))
    assert split_text(ten, SplitConfig(seq_words=4, max_seqs=9)) == (
        ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"],  # remainder 2 >= 4 / 2: its own sequence
        0,
    )
    nine = " ".join(f"w{i}" for i in range(9))
    assert split_text(nine, SplitConfig(seq_words=4, max_seqs=9)) == (
        ["w0 w1 w2 w3", "w4 w5 w6 w7 w8"],  # remainder 1 < 2: joins the last window
        0,
    )
    assert split_text("just three words", SplitConfig(seq_words=4)) == (["just three words"], 0)
    assert split_text("  \n ", SplitConfig()) == ([], 0)


def test_split_keeps_the_text_between_words_and_non_latin_words() -> None:
    text = "Kraków was\n\nfounded… 我爱北京天安门 हिन्दी भाषा end."
    pieces, _ = split_text(text, SplitConfig(seq_words=3, max_seqs=100))
    # every piece is a verbatim slice, in order, and together they cover the text's words
    pos = 0
    for piece in pieces:
        at = text.index(piece, pos)
        assert text[pos:at].strip() == ""
        pos = at + len(piece)
    assert text[pos:].strip() == ""
    assert pieces[0] == "Kraków was\n\nfounded"  # line breaks inside a sequence kept
    assert "北京天" in pieces  # one Chinese character is one word ("…" is one too)
    assert any("हिन्दी" in p for p in pieces)  # a Devanagari word is not cut at its marks


def test_split_spreads_k_of_many_windows_and_counts_the_rest() -> None:
    text = " ".join(f"w{i}" for i in range(20))  # 10 windows of 2 words
    pieces, left_out = split_text(text, SplitConfig(seq_words=2, max_seqs=4))
    assert pieces == ["w0 w1", "w6 w7", "w12 w13", "w18 w19"]  # windows 0, 3, 6, 9
    assert left_out == 6


def test_split_documents_ids_labels_and_drops() -> None:
    docs = [
        Sample("a", "one two three four five six seven", 1, {"src": "x"}),
        Sample("b", "six seven", 0),
        Sample("c", " ... ", 0),  # punctuation marks are words: kept
        Sample("d", "   ", 1),  # no word: dropped, counted
    ]
    split = split_documents(docs, SplitConfig(seq_words=4, max_seqs=10))
    assert [s.id for s in split.sequences] == ["a#0", "a#1", "b#0", "c#0"]
    assert split.sequences[1].text == "five six seven"
    assert split.sequences[1].meta == {"src": "x", DOC_ID: "a", SEQ_INDEX: 1}
    assert [s.label for s in split.sequences] == [1, 1, 0, 0]
    assert [d.id for d in split.documents] == ["a", "b", "c"]
    assert split.dropped == {"document without a word": 1}
    assert split.doc_index().tolist() == [0, 0, 1, 2]


def test_group_documents_by_field() -> None:
    rows = [
        Sample("r1", "alpha beta", 1, {"book": "B1", "page": 1}),
        Sample("r2", "gamma delta", 0, {"book": "B2"}),
        Sample("r3", "epsilon zeta eta", 1, {"book": "B1", "page": 2}),
    ]
    split = group_documents(rows, "book", SplitConfig(seq_words=3, max_seqs=10))
    assert [d.id for d in split.documents] == ["B1", "B2"]
    assert split.documents[0].text == "alpha beta\nepsilon zeta eta"
    assert [(s.id, s.text) for s in split.sequences] == [
        ("B1#0", "alpha beta"),
        ("B1#1", "epsilon zeta eta"),
        ("B2#0", "gamma delta"),
    ]
    with pytest.raises(DataError, match="mixes labels"):
        group_documents([*rows, Sample("r4", "x", 0, {"book": "B1"})], "book", SplitConfig())
    with pytest.raises(DataError, match="lack it"):
        group_documents([*rows, Sample("r5", "x", 0)], "book", SplitConfig())
    with pytest.raises(DataError, match="member and non-member documents"):
        group_documents(rows[:1], "book", SplitConfig())
    with pytest.raises(ConfigError, match="seq_words"):
        SplitConfig(seq_words=0)


# -- grouped cross-validation ---


@pytest.mark.parametrize("seed", range(5))
def test_grouped_folds_never_split_a_document(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_docs = 23
    sizes = rng.integers(1, 30, size=n_docs)  # documents of very different lengths
    doc_index = np.repeat(np.arange(n_docs), sizes)
    doc_labels = rng.permutation(np.arange(n_docs) % 2)
    folds = sequence_folds(doc_index, doc_labels[doc_index], n_splits=5, seed=seed)
    tested = np.zeros(n_docs, dtype=int)
    for train, test in folds:
        assert not set(doc_index[train]) & set(doc_index[test])
        assert len(set(train) | set(test)) == len(doc_index)
        tested[np.unique(doc_index[test])] += 1
    assert (tested == 1).all()  # each document is tested exactly once


def test_folds_need_two_documents_per_class() -> None:
    with pytest.raises(DataError, match="at least 2 member and 2 non-member documents"):
        sequence_folds(np.array([0, 0, 1, 2]), np.array([1, 1, 0, 0]))


# -- Shi et al.: thresholded fraction ---


def test_fraction_above_hand_case() -> None:
    scores = np.array([0.1, 0.5, 0.9, 0.2, 0.3, 0.8, np.nan, np.nan])
    doc_index = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    got = fraction_above(scores, doc_index, 0.4, n_docs=4)
    # doc 0: 2 of 3 above; doc 1: 0 of 2; doc 2: 1 of 1 finite; doc 3: no finite score
    np.testing.assert_allclose(got[:3], [2 / 3, 0.0, 1.0])
    assert math.isnan(got[3])
    assert fraction_above(np.array([0.4]), np.array([0]), 0.4, 1)[0] == 0.0  # strictly above


def test_tune_threshold_hand_case() -> None:
    # members' sequences score 0.6-0.9, non-members' 0.1-0.5 with one member-like outlier
    scores = np.array([0.6, 0.7, 0.9, 0.8, 0.1, 0.2, 0.5, 0.65])
    doc_index = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    labels = np.array([1, 1, 0, 0])
    t = tune_threshold(scores, doc_index, labels, np.arange(4))
    fractions = fraction_above(scores, doc_index, t, 4)
    assert auc(labels, fractions) == 1.0
    # thresholds in [0.5, 0.6) and [0.65, 0.7) separate perfectly (fractions 1, 1 vs 0, 1/2 and
    # 1/2, 1 vs 0, 0); the median of the tied candidates lies in one of them
    assert 0.5 <= t < 0.6 or 0.65 <= t < 0.7
    # trained on documents 0 and 2 only, the threshold lies in [0.2, 0.6)
    assert 0.2 <= tune_threshold(scores, doc_index, labels, np.array([0, 2])) < 0.6


def test_shi_scores_are_out_of_fold() -> None:
    rng = np.random.default_rng(0)
    n_docs, k = 20, 8
    doc_labels = np.arange(n_docs) % 2
    doc_index = np.repeat(np.arange(n_docs), k)
    scores = rng.normal(size=n_docs * k) + 1.5 * doc_labels[doc_index]
    doc_scores, thresholds = shi_scores(scores, doc_index, doc_labels, n_splits=5, seed=0)
    assert len(thresholds) == 5 and np.isfinite(doc_scores).all()
    assert set(np.round(doc_scores * k).astype(int)) <= set(range(k + 1))  # fractions of k
    assert auc(doc_labels, doc_scores) > 0.9


# -- Meeus et al.: normalised token features ---


def test_token_values_hand_case() -> None:
    # corpus: tokens 0, 0, 1 -> counts (2, 1), N = 3, V = 2: f = (3/5, 2/5)
    log_f = log_frequencies([np.array([0, 0, 1])], vocab_size=2)
    np.testing.assert_allclose(np.exp(log_f), [0.6, 0.4])
    values = token_values(np.array([0, 1]), np.array([-1.0, -2.0]), log_f)
    np.testing.assert_allclose(values, [-1 - math.log(0.6), -2 - math.log(0.4)])
    # V from the model's vocabulary: an unseen id gets 1 / (N + V)
    np.testing.assert_allclose(
        np.exp(log_frequencies([np.array([0])], vocab_size=3)), [0.5, 0.25, 0.25]
    )
    with pytest.raises(DataError, match="outside the reference frequency table"):
        token_values(np.array([5]), np.array([-1.0]), log_f)


def test_aggregate_and_histogram_features_hand_case() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0])
    feats = aggregate_features(values)
    assert feats[:5].tolist() == [2.5, math.sqrt(1.25), 1.0, 4.0, 4.0]  # ..., count
    assert feats[9] == 2.5  # the median (p50 is the 5th percentile feature)
    hist = histogram_features(np.array([-5.0, 0.5, 1.5, 1.5, 10.0]), np.array([0.0, 1.0, 2.0, 3.0]))
    assert hist.tolist() == [0.4, 0.4, 0.2]  # -5 and 10 fall into the open end bins
    assert np.isnan(aggregate_features(np.zeros(0))).all()


def test_meeus_meta_classifier_separates_and_uses_other_documents_only() -> None:
    rng = np.random.default_rng(1)
    n_docs, k = 24, 5
    doc_labels = np.arange(n_docs) % 2
    doc_index = np.repeat(np.arange(n_docs), k)
    # members' tokens: the same mean, a fatter upper tail (what the mean alone would miss)
    seq_values = [rng.normal(size=40) * (2.0 if doc_labels[d] else 1.0) for d in doc_index]
    cheap = MeeusSettings(n_trees=100)
    scores = meeus_scores(seq_values, doc_index, doc_labels, n_splits=4, seed=0, settings=cheap)
    assert auc(doc_labels, scores) > 0.9
    means = mean_per_document(np.array([v.mean() for v in seq_values]), doc_index, n_docs)
    assert auc(doc_labels, means) < 0.8  # the spread features carry the signal
    # a document's score does not depend on its own label: flipping one label leaves its score
    flipped = doc_labels.copy()
    flipped[0] = 1 - flipped[0]
    again = meeus_scores(seq_values, doc_index, flipped, n_splits=4, seed=0, settings=cheap)
    folds = sequence_folds(doc_index, doc_labels[doc_index], n_splits=4, seed=0)
    same_folds = sequence_folds(doc_index, flipped[doc_index], n_splits=4, seed=0)
    if all(np.array_equal(a[1], b[1]) for a, b in zip(folds, same_folds, strict=True)):
        assert again[0] == scores[0]


# -- document metrics ---


def test_mean_per_document_and_weighted_auc() -> None:
    got = mean_per_document(np.array([1.0, 3.0, np.nan, 5.0]), np.array([0, 0, 1, 2]), 3)
    assert got[0] == 2.0 and math.isnan(got[1]) and got[2] == 5.0
    scores = np.array([0.1, 0.4, 0.35, 0.8, 0.4])
    member = np.array([False, False, True, True, True])
    levels = np.unique(scores, return_inverse=True)[1]
    weights = np.array([[1, 2, 1, 3, 1], [1, 1, 1, 1, 1]])
    got_w = weighted_auc(member, levels, weights, int(levels.max()) + 1)
    repeated = np.repeat(np.arange(5), weights[0])
    assert got_w[0] == pytest.approx(auc(member[repeated], scores[repeated]))
    assert got_w[1] == pytest.approx(auc(member, scores))


def test_document_summary_is_the_bootstrap_over_documents() -> None:
    labels, scores = np.array([1, 1, 0, 0, 1, 0]), np.array([0.9, 0.8, 0.3, np.nan, 0.2, 0.1])
    got = document_summary(labels, scores, n_resamples=200, seed=3)
    want = bootstrap_metrics(
        labels[[0, 1, 2, 4, 5]], scores[[0, 1, 2, 4, 5]], n_resamples=200, seed=3,
        resamples="documents",
    )  # fmt: skip
    assert got == want


def test_paired_bootstrap_hand_cases() -> None:
    # one sequence per document scored as the document: both AUCs equal, the gain is exactly 0
    seq = np.array([0.9, 0.2, 0.7, 0.4, 0.1, 0.6])
    labels = np.array([1, 0, 1, 0, 0, 1])
    paired = paired_bootstrap(seq, np.arange(6), labels, seq, n_resamples=300, seed=0)
    assert paired.sequence == paired.document
    assert (paired.gain.estimate, paired.gain.low, paired.gain.high) == (0.0, 0.0, 0.0)
    # noisy sequences, clean document means: the document AUC is 1, the sequence AUC is not
    seq = np.array([0.9, 0.1, 0.8, 0.6, 0.2, 0.7, 0.3, 0.4])
    doc_index = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    doc_labels = np.array([1, 1, 0, 0])
    means = mean_per_document(seq, doc_index, 4)  # 0.5, 0.7, 0.45, 0.35
    paired = paired_bootstrap(seq, doc_index, doc_labels, means, n_resamples=500, seed=0)
    assert paired.document.estimate == 1.0
    # member sequences beat 4 + 0 + 4 + 3 of the 4 non-member ones each: 11 / 16
    assert paired.sequence.estimate == auc(doc_labels[doc_index], seq) == 0.6875
    assert paired.gain.estimate == pytest.approx(0.3125)
    assert paired.sequence.low <= 0.6875 <= paired.sequence.high


# -- dataset inference ---


def test_welch_greater_matches_the_formula() -> None:
    a, b = np.array([2.0, 3.0, 5.0, 6.0]), np.array([1.0, 2.0, 2.5])
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    got_t, got_p = welch_greater(a, b)
    assert got_t == pytest.approx(t)
    assert got_p == pytest.approx(stats.t.sf(t, df))
    assert welch_greater(np.ones(3), np.zeros(3)) == (math.inf, 0.0)  # constant, apart
    assert welch_greater(np.zeros(3), np.zeros(3))[1] == 1.0


def _sets(rng: np.random.Generator, n_docs: int, k: int, shift: float, doc_sd: float = 0.5):
    """Per-sequence features (2 columns) with a per-document random effect."""
    groups = np.repeat(np.arange(n_docs), k)
    doc_effect = rng.normal(scale=doc_sd, size=n_docs)[groups]
    x = rng.normal(size=(n_docs * k, 2)) + doc_effect[:, None]
    x[:, 0] += shift
    return x, groups


def test_dataset_inference_one_feature_is_welch_on_document_means() -> None:
    rng = np.random.default_rng(0)
    xs, gs = _sets(rng, 10, 4, 1.0)
    xv, gv = _sets(rng, 10, 4, 0.0)
    result = dataset_inference(
        xs[:, :1], xv[:, :1], gs, gv, feature_names=["loss"], seed=7, clip=0.0
    )  # no clipping: the raw means
    # with one feature the learned score is an increasing affine map of it (the weight is > 0
    # here), so the test equals Welch on the raw document means of the test halves
    assert result.weights["loss"] > 0
    halves = np.random.default_rng([7, 14])
    s_first = halves.permutation(np.unique(gs))[:5]
    v_first = halves.permutation(np.unique(gv))[:5]
    a = [xs[gs == d, 0].mean() for d in np.unique(gs) if d not in s_first]
    b = [xv[gv == d, 0].mean() for d in np.unique(gv) if d not in v_first]
    assert result.p_value == pytest.approx(welch_greater(np.array(a), np.array(b))[1])
    assert (result.n_suspect_docs, result.n_suspect_seqs) == (10, 40)


def test_dataset_inference_flags_members_and_not_unseen_sets() -> None:
    rng = np.random.default_rng(2)
    flagged, false_positives = 0, 0
    for seed in range(40):
        xs, gs = _sets(rng, 16, 10, 1.2)
        xv, gv = _sets(rng, 16, 10, 0.0)
        xu, gu = _sets(rng, 16, 10, 0.0)
        flagged += dataset_inference(xs, xv, gs, gv, seed=seed).flagged
        false_positives += dataset_inference(xu, xv, gu, gv, seed=seed).flagged
    assert flagged >= 38
    assert false_positives <= 6  # alpha = 0.05: 2 expected of 40


def test_sequence_unit_is_anticonservative_with_correlated_sequences() -> None:
    """Why documents are the default unit: with a strong per-document effect, a t-test over
    sequences flags unseen sets far more often than alpha; over document means it does not."""
    rng = np.random.default_rng(3)
    by_unit = {"document": 0, "sequence": 0}
    for seed in range(60):
        xu, gu = _sets(rng, 12, 10, 0.0, doc_sd=1.5)
        xv, gv = _sets(rng, 12, 10, 0.0, doc_sd=1.5)
        for unit in by_unit:
            by_unit[unit] += dataset_inference(xu, xv, gu, gv, unit=unit, seed=seed).flagged  # type: ignore[arg-type]
    assert by_unit["document"] <= 9
    assert by_unit["sequence"] > 2 * by_unit["document"]


def test_dataset_inference_errors_and_nan_rows() -> None:
    rng = np.random.default_rng(0)
    xs, gs = _sets(rng, 6, 3, 1.0)
    xv, gv = _sets(rng, 6, 3, 0.0)
    xs[0, 1] = np.nan
    assert dataset_inference(xs, xv, gs, gv).dropped_seqs == 1
    with pytest.raises(DataError, match="at least 4 documents"):
        dataset_inference(xs[:9], xv, gs[:9], gv)
    with pytest.raises(ConfigError, match="unit"):
        dataset_inference(xs, xv, gs, gv, unit="book")  # type: ignore[arg-type]


def test_p_value_curve_and_documents_needed() -> None:
    rng = np.random.default_rng(4)
    xs, gs = _sets(rng, 12, 5, 1.5)
    xv, gv = _sets(rng, 12, 5, 0.0)
    curve = p_value_curve(xs, xv, gs, gv, repeats=5, seed=0)
    assert [c.n_docs for c in curve] == [4, 6, 8, 10, 12]
    assert curve[-1].median_p < curve[0].median_p
    hand = [
        CurvePoint(4, 0.2, 0.1, 5),
        CurvePoint(6, 0.01, 0.8, 5),
        CurvePoint(8, 0.07, 0.5, 5),
        CurvePoint(10, 0.001, 1.0, 5),
        CurvePoint(12, 1e-4, 1.0, 5),
    ]
    assert documents_needed(hand) == 10  # 6 dips below alpha but 8 does not: not yet reliable
    assert documents_needed(hand[:1]) is None
