"""The 2025-26 gray-box attacks (issue 15): EZ-MIA, WBC, Gap-K%, ACMIA, Tag&Tab.

Formula tests compare each score with values computed by hand (in the comments) on fixed
log-probabilities; end-to-end tests run each attack through a real run on the tiny random models
(tests/conftest.py), with non-Latin, one-token and long texts among the samples.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.acmia import Acmia, acmia_scores, first_occurrences
from imprint.attacks.ez_mia import EzMia, ez_score
from imprint.attacks.gap_k import GapK, gap_k_score, standardised_gap
from imprint.attacks.tag_tab import (
    TagTab,
    keyword_logps,
    keywords,
    sentences,
    word_entropy,
    wordfreq_table,
)
from imprint.attacks.wbc import Wbc, wbc_score, window_votes
from imprint.backends.base import TokenStats
from imprint.data.words import Word
from imprint.errors import ConfigError
from imprint.run import RunConfig, execute_run
from imprint.signals.needs import Need, SignalSet


def stats(logp, *, ids=None, argmax=None, mean=None, var=None, top1=None) -> TokenStats:
    logp = np.asarray(logp, dtype=np.float32)
    n = len(logp)
    ids = np.arange(n, dtype=np.int32) if ids is None else np.asarray(ids, np.int32)
    return TokenStats(
        token_ids=ids,
        logp=logp,
        mean_logp=np.zeros(n, np.float32) if mean is None else np.asarray(mean, np.float32),
        var_logp=np.ones(n, np.float32) if var is None else np.asarray(var, np.float32),
        rank=np.ones(n, np.int32),
        argmax=ids.copy() if argmax is None else np.asarray(argmax, np.int32),
        top1_logp=None if top1 is None else np.asarray(top1, np.float32),
    )


def pair_signals(target: list[TokenStats], ref: list[TokenStats]) -> SignalSet:
    texts = [f"text {i}" for i in range(len(target))]
    return SignalSet(
        texts, {Need(): [(s,) for s in target], Need(model="base"): [(s,) for s in ref]}
    )


# -- EZ-MIA ---------------------------------------------------------------------------------------
EZ_TARGET = [-1.0, -2.0, -0.5, -3.0, -0.2]
EZ_REF = [-1.5, -1.0, -0.5, -4.5, -0.1]
EZ_IDS = [5, 6, 7, 8, 9]
EZ_ARGMAX = [5, 0, 0, 0, 9]  # wrong at positions 1, 2, 3


def test_ez_score_counts_only_error_positions():
    # error shifts: pos 1: -2 - (-1) = -1.0; pos 2: 0; pos 3: -3 - (-4.5) = +1.5
    # (pos 0 (+0.5) and pos 4 (-0.1) are correct predictions: left out)
    # P = 1.5, N = 1.0 -> paper's EZ = 1.5; column P / (P + N) = 1.5 / 2.5 = 0.6
    assert ez_score(EZ_TARGET, EZ_REF, EZ_IDS, EZ_ARGMAX) == pytest.approx(0.6)
    ratio = 0.6 / (1 - 0.6)
    assert ratio == pytest.approx(1.5)  # the paper's ratio is recovered exactly


def test_ez_score_edge_cases():
    # only upward shifts at the errors: the paper's ratio is infinite; the column is 1.0
    assert ez_score([-1.0, -1.0], [-2.0, -3.0], [1, 2], [0, 0]) == 1.0
    # only downward: 0.0
    assert ez_score([-3.0, -3.0], [-2.0, -1.0], [1, 2], [0, 0]) == 0.0
    # fewer error positions than min_error_tokens, or no shift at all: undefined
    assert math.isnan(ez_score(EZ_TARGET, EZ_REF, EZ_IDS, EZ_ARGMAX, min_error_tokens=4))
    assert math.isnan(ez_score([-1.0], [-2.0], [3], [0]))  # one token, one error (< 2)
    assert math.isnan(ez_score([], [], [], []))
    assert math.isnan(ez_score([-1.0, -2.0], [-1.0, -2.0], [1, 2], [0, 0]))  # P = N = 0


def test_ez_mia_attack_scores_per_reference_and_warns_on_nan():
    attack = EzMia(refs=("base",))
    signals = pair_signals(
        [stats(EZ_TARGET, ids=EZ_IDS, argmax=EZ_ARGMAX), stats([-1.0], ids=[3], argmax=[0])],
        [stats(EZ_REF, ids=EZ_IDS), stats([-2.0], ids=[3])],
    )
    with pytest.warns(RuntimeWarning, match=r"1 of 2 samples .*ez_mia\[base\]"):
        out = attack.score(signals)
    assert attack.columns() == ("ez_mia[base]",)
    assert out["ez_mia[base]"][0] == pytest.approx(0.6)
    assert math.isnan(out["ez_mia[base]"][1])


def test_ez_mia_refuses_a_reference_with_another_tokenizer():
    signals = pair_signals([stats([-1.0, -2.0], ids=[1, 2])], [stats([-1.0, -2.0], ids=[1, 3])])
    with pytest.raises(ConfigError, match="tokenize sample 0 differently"):
        EzMia(refs=("base",)).score(signals)


def test_ez_mia_and_wbc_need_a_reference_and_validate():
    with pytest.raises(ConfigError, match="--ref"):
        EzMia()
    with pytest.raises(ConfigError, match="min_error_tokens"):
        EzMia(refs=("b",), min_error_tokens=0)
    with pytest.raises(ConfigError, match="--ref"):
        Wbc()
    with pytest.raises(ConfigError, match="windows"):
        Wbc(refs=("b",), windows=(0, 2))
    run = RunContext(refs=("base",))
    names = {a.name for a in build_attacks(["all"], run)}
    assert {"ez_mia", "wbc"} <= names
    assert not {"ez_mia", "wbc"} & {a.name for a in build_attacks(["all"], RunContext())}
    # log p and the argmax are all they read: a vLLM (prompt log-probs) target serves them
    token_run = RunContext(refs=("base",), target_access="token-logprobs")
    served = {a.name for a in build_attacks(["all"], token_run)}
    assert {"ez_mia", "wbc"} <= served and not {"gap_k", "acmia", "tag_tab"} & served
    typed = build_attacks(["wbc"], run, params={"wbc": {"windows": "2,8"}})[0]
    assert typed.windows == (2, 8)  # type: ignore[attr-defined]


# -- WBC ------------------------------------------------------------------------------------------
def test_wbc_window_votes_by_hand():
    # losses: target [1, 2, 3, 1], reference [2, 1, 4, 1]; ref - target = [1, -1, 1, 0]
    tgt, ref = np.array([1.0, 2.0, 3.0, 1.0]), np.array([2.0, 1.0, 4.0, 1.0])
    assert window_votes(tgt, ref, 1) == pytest.approx(2 / 4)  # signs +, -, +, 0
    assert window_votes(tgt, ref, 2) == pytest.approx(1 / 3)  # sums 0, 0, 1
    assert window_votes(tgt, ref, 3) == pytest.approx(1 / 2)  # sums 1, 0
    assert window_votes(tgt, ref, 5) == pytest.approx(1.0)  # w > T: one window, sum 1 > 0
    # the score averages over window sizes: (1/2 + 1/3 + 1/2 + 1) / 4 = 7/12
    score = wbc_score(-tgt, -ref, (1, 2, 3, 5))
    assert score == pytest.approx(7 / 12)


def test_wbc_is_a_vote_not_a_mean():
    # one huge target loss cannot outvote three tokens where the target is better
    tgt_logp, ref_logp = [-0.1, -0.1, -0.1, -50.0], [-1.0, -1.0, -1.0, -1.0]
    assert wbc_score(tgt_logp, ref_logp, (1,)) == pytest.approx(3 / 4)
    assert np.mean(tgt_logp) < np.mean(ref_logp)  # while the mean says "non-member"


def test_wbc_attack_short_texts():
    attack = Wbc(refs=("base",), windows=(1, 2))
    signals = pair_signals(
        [stats([-1.0], ids=[4]), stats([], ids=[])], [stats([-2.0], ids=[4]), stats([], ids=[])]
    )
    with pytest.warns(RuntimeWarning, match="no scored token"):
        out = attack.score(signals)
    assert out["wbc[base]"][0] == 1.0  # one token, target better: every window votes member
    assert math.isnan(out["wbc[base]"][1])


# -- Gap-K% ---------------------------------------------------------------------------------------
GAP_STATS = stats([-1.0, -2.0, -0.5, -3.0], top1=[-0.5, -0.5, -0.5, -1.0], var=[1, 4, 1, 0.25])


def test_gap_standardised_by_hand():
    # gaps: (-1 + 0.5)/1, (-2 + 0.5)/2, 0/1, (-3 + 1)/0.5 = -0.5, -0.75, 0, -4
    np.testing.assert_allclose(standardised_gap(GAP_STATS), [-0.5, -0.75, 0.0, -4.0])


def test_gap_k_smooths_then_takes_the_lowest_fraction():
    gaps = np.array([-0.5, -0.75, 0.0, -4.0])
    # window 3: (-0.5 - 0.75 + 0)/3 = -5/12 and (-0.75 + 0 - 4)/3 = -19/12
    # k = 0.2 of 2 values -> max(1, 0) = 1 value: the lowest, -19/12
    assert gap_k_score(gaps, k=0.2, window=3) == pytest.approx(-19 / 12)
    assert gap_k_score(gaps, k=1.0, window=3) == pytest.approx((-5 / 12 - 19 / 12) / 2)
    # window 1 = no smoothing; k = 0.5 of 4 -> the 2 lowest: (-4 - 0.75)/2
    assert gap_k_score(gaps, k=0.5, window=1) == pytest.approx(-2.375)
    # shorter than the window: not smoothed, lowest of [-0.5, -0.75]
    assert gap_k_score(gaps[:2], k=0.2, window=3) == pytest.approx(-0.75)
    assert math.isnan(gap_k_score(np.array([]), k=0.2, window=3))


def test_gap_k_attack_needs_recorded_top1_and_validates():
    attack = GapK()
    signals = SignalSet(["a", "b"], {Need(): [(GAP_STATS,), (stats([], top1=[]),)]})
    with pytest.warns(RuntimeWarning, match="1 of 2 samples"):
        out = attack.score(signals)
    assert out["gap_k"][0] == pytest.approx(-19 / 12) and math.isnan(out["gap_k"][1])
    unrecorded = SignalSet(["a"], {Need(): [(stats([-1.0, -2.0]),)]})  # top1 NaN
    with pytest.raises(ConfigError, match="top-1 log-probability"):
        attack.score(unrecorded)
    with pytest.raises(ConfigError, match="k must be in"):
        GapK(k=0.0)
    with pytest.raises(ConfigError, match="window"):
        GapK(window=0)


def test_backend_records_the_top1_log_probability(tiny_model_dir):
    import torch

    from imprint.backends.base import ScoreRequest
    from imprint.backends.hf import HFLogprobBackend

    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    text = "北京 Hurricane Ana, 2023."
    (got,) = backend.score([ScoreRequest(text)])
    ids = [*backend.start_ids, *backend.encode(text)]
    with torch.no_grad():
        logits = backend.model(torch.tensor([ids])).logits[0, :-1].float()
    logp = torch.log_softmax(logits, -1)
    np.testing.assert_allclose(got.top1_logp, logp.max(-1).values.numpy(), atol=1e-4)
    np.testing.assert_array_equal(got.argmax, logp.argmax(-1).numpy())
    assert (got.top1_logp >= got.logp - 1e-5).all()


# -- ACMIA ----------------------------------------------------------------------------------------
AC_PLAIN = stats([-1.0, -2.0, -0.5, -3.0], ids=[3, 5, 3, 7])
AC_HOT = stats(
    [-0.5, -3.0, -0.2, -5.0], ids=[3, 5, 3, 7], mean=[-1, -2, -1, -2], var=[1, 4, 0.25, 1]
)


def test_acmia_formulas_by_hand():
    # first occurrences of ids [3, 5, 3, 7]: positions 0, 1, 3 (the second 3 is left out)
    np.testing.assert_array_equal(first_occurrences(np.array([3, 5, 3, 7])), [0, 1, 3])
    # tau = 0.5 (beta = 2, sharpening): AC = mean(l(beta) - l) = mean(0.5, -1, -2) = -2.5/3
    # DerivAC = mean((l(beta) - mu) / beta) = mean(0.5, -1, -3) / 2 = -3.5/6
    # NormAC = mean((l(beta) - mu) / sigma), sigma = 1, 2, 1: mean(0.5, -0.5, -3) = -1
    got = acmia_scores(AC_PLAIN, AC_HOT, 0.5)
    assert got["ac"] == pytest.approx(-2.5 / 3)
    assert got["deriv"] == pytest.approx(-3.5 / 6)
    assert got["norm"] == pytest.approx(-1.0, abs=1e-8)
    # tau = 2 (beta = 1/2, flattening): AC flips to mean(l - l(beta)) = 2.5/3; DerivAC * 2
    got = acmia_scores(AC_PLAIN, AC_HOT, 2.0)
    assert got["ac"] == pytest.approx(2.5 / 3)
    assert got["deriv"] == pytest.approx(-3.5 / 3 * 2)
    assert all(math.isnan(v) for v in acmia_scores(stats([]), stats([]), 2.0).values())


def test_acmia_validates_temperatures():
    for bad in ((), (1.0,), (0.0,), (-2.0,), (0.5, 0.5), (float("inf"),)):
        with pytest.raises(ConfigError, match="temperatures"):
            Acmia(temperatures=bad)
    assert Acmia().columns() == (
        "acmia@0.5",
        "acmia_deriv@0.5",
        "acmia_norm@0.5",
        "acmia@2",
        "acmia_deriv@2",
        "acmia_norm@2",
    )


def test_tempered_backend_equals_a_full_softmax_at_that_temperature(tiny_model_dir):
    import torch

    from imprint.backends.base import ScoreRequest
    from imprint.backends.hf import HFLogprobBackend
    from imprint.backends.tempered import TemperedBackend

    base = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    hot = TemperedBackend(base, 0.5)
    assert hot.fingerprint != base.fingerprint != TemperedBackend(base, 2.0).fingerprint
    text = "हिन्दी Seoul 2023: the budget."
    (got,) = hot.score([ScoreRequest(text)])
    ids = [*base.start_ids, *base.encode(text)]
    with torch.no_grad():
        logits = base.model(torch.tensor([ids])).logits[0, :-1].float()
    logp = torch.log_softmax(logits / 0.5, -1)
    p = logp.exp()
    mean = (p * logp).sum(-1)
    var = (p * logp * logp).sum(-1) - mean**2
    targets = torch.tensor(ids[1:])
    np.testing.assert_allclose(got.logp, logp.gather(1, targets[:, None])[:, 0], atol=1e-4)
    np.testing.assert_allclose(got.mean_logp, mean, atol=1e-4)
    np.testing.assert_allclose(got.var_logp, var, atol=1e-3)
    (plain,) = base.score([ScoreRequest(text)])  # the base is untouched
    assert not np.allclose(plain.logp, got.logp)


# -- Tag&Tab --------------------------------------------------------------------------------------
TAG_TEXT = "Alice met Bob. The cat sat on the mat today, Zyx!"


def test_tag_tab_sentences_are_cut_and_filtered():
    words = lambda pieces: [[w.text for w in p] for p in pieces]  # noqa: E731
    # sentence 2 has 8 words: cut into pieces of 3 (the last has 2)
    assert words(sentences(TAG_TEXT, min_words=2, max_words=3)) == [
        ["Alice", "met", "Bob"],
        ["The", "cat", "sat"],
        ["on", "the", "mat"],
        ["today", "Zyx"],
    ]
    assert len(sentences(TAG_TEXT, min_words=3, max_words=3)) == 3  # "today Zyx" is too short
    # no sentence long enough: the whole text; no word at all: nothing
    assert words(sentences("Hi. Yo!", min_words=7, max_words=40)) == [["Hi", "Yo"]]
    assert sentences("?! …", min_words=1, max_words=40) == []
    # Chinese: every character is a word; 。ends a sentence
    zh = sentences("北京是首都。上海很大。", min_words=2, max_words=40)
    assert words(zh) == [["北", "京", "是", "首", "都"], ["上", "海", "很", "大"]]


def test_tag_tab_keywords_are_the_lowest_entropy_words():
    freq = {"alice": 0.001, "met": 0.01, "bob": 0.002}.get
    # -p log2 p: alice 0.00997, met 0.0664, bob 0.0179 -> the two lowest: alice, bob
    sentence = sentences(TAG_TEXT, min_words=2, max_words=3)[0]
    picked = keywords(sentence, 2, lambda w: freq(w, 0.0))
    assert [w.text for w in picked] == ["Alice", "Bob"]
    assert word_entropy(0.001) == pytest.approx(-0.001 * math.log2(0.001))
    assert word_entropy(0.0) == 0.0  # unknown to the table: rarest of all
    piece = sentences(TAG_TEXT, min_words=2, max_words=3)[3]
    assert [w.text for w in keywords(piece, 1, lambda w: {"today": 1e-4}.get(w, 0.0))] == ["Zyx"]
    # the real table: a rare word has lower entropy than "the"
    p = wordfreq_table("en")
    assert word_entropy(p("hippopotamus")) < word_entropy(p("the"))


def test_tag_tab_maps_keywords_to_their_tokens():
    # tokens "a", "b", " cd" of "ab cd"; without a start token the first one is not scored
    offsets = [(0, 1), (1, 2), (2, 5)]
    words = [Word("ab", 0, 2), Word("cd", 3, 5)]
    every, first = keyword_logps(words, offsets, stats([-1.0, -2.0]))
    assert every == [-1.0, -2.0] and first == [-1.0, -2.0]
    every, first = keyword_logps(words, offsets, stats([-0.5, -1.0, -2.0]))  # start token
    assert every == [-0.5, -1.0, -2.0] and first == [-0.5, -2.0]
    # the attack's columns are the means: (-0.5 - 1 - 2) / 3 and (-0.5 - 2) / 2
    assert np.mean(every) == pytest.approx(-3.5 / 3) and np.mean(first) == -1.25


def test_tag_tab_validates():
    with pytest.raises(ConfigError, match="k and min_sentence_words"):
        TagTab(k=0)
    with pytest.raises(ConfigError, match="max_sentence_words"):
        TagTab(min_sentence_words=10, max_sentence_words=5)
    assert TagTab().columns() == ("tag_tab", "tag_tab_first")


# -- end to end on the tiny models ----------------------------------------------------------------
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "In 2023 the council met in Seoul to discuss the budget.",
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii.",
    "Membership inference asks whether a text was in the training data.",
    "北京是中华人民共和国的首都。它有三千多年的历史。",
    "हिन्दी भारत की एक प्रमुख भाषा है। यह देवनागरी लिपि में लिखी जाती है।",
    "a",
    "Zürich",
    " ".join(["Numbers like 1, 10 and 100 appear in many documents; so do dates."] * 25),
    "Kraków's old town—rebuilt, restored—draws visitors; ¿qué más? 🙂",
]


def write_data(folder: Path) -> Path:
    path = folder / "frontier.jsonl"
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return path


def run_frontier(folder: Path, model: Path, ref: Path, attacks: tuple[str, ...]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN and single-sample warnings are tested elsewhere
        return execute_run(
            RunConfig(
                model=str(model),
                data=str(write_data(folder)),
                out=folder / "run",
                refs=(("base", str(ref)),),
                attacks=attacks,
                n_bootstrap=50,
                blind=False,
                progress=False,
            )
        )


def test_reference_attacks_end_to_end(tiny_model_dir, tiny_ref_dir, tmp_path):
    result = run_frontier(
        tmp_path, tiny_model_dir, tiny_ref_dir, ("ez_mia", "wbc", "gap_k", "acmia", "tag_tab")
    )
    assert result.manifest["requests"]["base"]["logprobs"]["executed"] == len(TEXTS)
    ez, wbc = result.scores["ez_mia[base]"], result.scores["wbc[base]"]
    assert ez.shape == wbc.shape == (len(TEXTS),)
    finite = ez[~np.isnan(ez)]
    assert finite.size >= len(TEXTS) - 2 and ((finite >= 0) & (finite <= 1)).all()
    assert ((wbc >= 0) & (wbc <= 1)).all()  # every text, one-token ones included, has a vote
    assert len(set(np.round(wbc, 6))) > 2  # the scores vary across texts
    gap = result.scores["gap_k"]
    assert np.isfinite(gap).all() and (gap <= 0).all()  # one-token and long texts included
    for column in Acmia().columns():
        assert np.isfinite(result.scores[column]).all(), column
    tag, tag_first = result.scores["tag_tab"], result.scores["tag_tab_first"]
    assert np.isfinite(tag).all() and np.isfinite(tag_first).all() and (tag < 0).all()
    passes = result.manifest["requests"]
    assert passes["target@t=0.5"]["logprobs"]["executed"] == len(TEXTS)
    assert passes["target@t=2"]["logprobs"]["executed"] == len(TEXTS)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {"ez_mia[base]", "wbc[base]"} <= set(metrics["attacks"])


class _Tokenizing:
    """A backend that only tokenizes: splits on spaces (``words``) or on characters."""

    def __init__(self, words: bool) -> None:
        self.words = words

    def supports(self, capability: object) -> bool:
        return True

    def encode(self, text: str) -> list[int]:
        return [len(p) for p in (text.split() if self.words else text)]


class _Roles:
    def __init__(self, **backends: _Tokenizing) -> None:
        self.backends = backends

    def backend(self, role: str) -> _Tokenizing:
        return self.backends[role]


@pytest.mark.parametrize("cls", [EzMia, Wbc])
def test_token_aligned_attacks_refuse_another_tokenizer_before_any_model_pass(cls):
    # ez_mia checked the tokens only when scoring, after every pass of both models (49.6 min
    # lost at the audit recipe's size with a reference of another tokenizer): prepare() checks
    from imprint.data.sample import Sample

    samples = [Sample(id="a", text="one two three", label=1)]
    attack = cls(refs=("base",))
    same = RunContext(
        refs=("base",), requests=_Roles(target=_Tokenizing(True), base=_Tokenizing(True))
    )
    attack.prepare(samples, same)  # the same tokenizer passes
    other = RunContext(
        refs=("base",), requests=_Roles(target=_Tokenizing(True), base=_Tokenizing(False))
    )
    with pytest.raises(ConfigError, match="tokenizers split sample 0 differently"):
        attack.prepare(samples, other)
